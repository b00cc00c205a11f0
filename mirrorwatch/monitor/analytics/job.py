"""The analytics job: history → Parquet tables + ``summary.json``.

Entry points: ``monitor analyze`` (cli), ``python -m mirrorwatch.monitor.analytics.job`` (same options), and
for ``spark-submit`` the script ``submit.py`` beside this module (spark-submit runs a file, not a module, and
this one uses package-relative imports). Only the driver imports mirrorwatch: the job uses no Python UDFs,
so executors need nothing but Spark. See docs/analytics.md.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from datetime import UTC, date, datetime

from ...core.cli import UserError
from .definitions import DEFAULT_GAP_FACTOR, DEFAULT_SLO_LAG, DEFAULT_SLO_TIME_S, FLOW_KEYS, TOPIC_KEYS
from .inputs import HistoryUnavailable, find_history_files, lag_root, local_path
from .progress import Progress
from .session import spark_session


@dataclass(frozen=True)
class AnalysisSettings:
    history_uri: str
    out_uri: str
    start: datetime | None = None
    end: datetime | None = None
    slo_lag: int = DEFAULT_SLO_LAG
    slo_time_s: float = DEFAULT_SLO_TIME_S
    gap_factor: float = DEFAULT_GAP_FACTOR


def run_job(settings: AnalysisSettings, master: str | None = None, progress: Progress | None = None) -> dict:
    """Start (or reuse) Spark, run the analysis, stop Spark if started here. User problems → ``UserError``."""
    progress = progress or Progress(quiet=True)
    local = local_path(settings.history_uri)
    if local is not None and not os.path.isdir(local):  # fail fast, before paying for a JVM
        raise UserError(f"history not found: {settings.history_uri}", 2)
    if local is not None and not os.path.isdir(local_path(lag_root(settings.history_uri))):
        raise UserError(f"no lag history under {settings.history_uri} (expected lag/date=YYYY-MM-DD/*.parquet)", 2)
    with progress.stage(f"starting Spark ({master or 'default master'})"):
        spark, created = spark_session(master)
    try:
        return run_analysis(spark, settings, progress)
    except HistoryUnavailable as exc:
        raise UserError(str(exc), 2) from None
    finally:
        if created:
            spark.stop()


def build_tables(enriched, settings: AnalysisSettings) -> dict:
    """Every output table by name, in writing order, as a function of ``read`` (which loads a table already
    written). Tables derived from another table read it back instead of recomputing it from the samples."""
    from . import incidents as inc
    from . import tables as t

    return {
        "lag_hourly": lambda read: t.lag_stats(enriched, "hour"),
        "lag_daily": lambda read: t.lag_stats(enriched, "day"),
        "sampling_gaps": lambda read: t.sampling_gaps(enriched),
        "slo_by_topic": lambda read: t.slo_compliance(enriched, TOPIC_KEYS),
        "slo_by_flow": lambda read: t.slo_compliance(enriched, FLOW_KEYS),
        "incidents": lambda read: inc.incidents(enriched),
        "incidents_by_topic": lambda read: inc.incidents_by_topic(read("incidents")),
        "committed_view": lambda read: t.committed_view(enriched, settings.slo_lag),
        "trend_daily": lambda read: t.trend_daily(enriched),
        "trend": lambda read: t.trend(read("trend_daily")),
    }


# Beyond this many samples a second core's share of an aggregation outweighs the fixed cost of the Spark job a
# shuffle adds (scheduling; largest on a cluster); see ``single_file``. Coarse on purpose: the bench's 1M samples
# took ~3 s per table on one core.
SINGLE_TASK_MAX_ROWS = 1_000_000


def single_file(table, flow_series: int, rows: int):
    """``table`` as one partition, so it is written as one file (the tables are small: per partition × hour at
    most, and readers such as the status page take a table as one file).

    ``coalesce(1)`` runs the whole last stage — the aggregation over the cached samples — in the one task that
    writes; ``repartition(1)`` aggregates in parallel and then shuffles to one writer, which costs one Spark job
    more per table. The cached samples are hash-partitioned by flow series (``prepare.read_samples``' window), so
    with one flow series they sit in one partition and the aggregation has one task either way; with several
    flows and a large history the shuffle is worth its job (the two tables derived from a table read back, one
    partition already, then pay a needless one too: two small jobs in a long run)."""
    if flow_series <= 1 or rows <= SINGLE_TASK_MAX_ROWS:
        return table.coalesce(1)
    return table.repartition(1)


def run_analysis(spark, settings: AnalysisSettings, progress: Progress) -> dict:
    from pyspark import StorageLevel

    from .hadoopfs import HadoopFS
    from .prepare import enrich, read_samples

    with progress.stage("checking history files"):
        files = find_history_files(spark, settings.history_uri, settings.start, settings.end)
    for uri, reason in files.skipped:
        progress.warn(f"skipping corrupt Parquet file {uri}: {reason}")
    if not files.good:
        raise HistoryUnavailable(
            f"no readable lag history files under {lag_root(settings.history_uri)}"
            + (" in the requested period" if settings.start or settings.end else "")
        )

    out = settings.out_uri.rstrip("/")
    schemas = {}  # of the tables written so far: reading them back needs no schema inference (a Spark job each)

    def read(name):
        # A table read back is one file, i.e. one partition; coalesce(1) tells Spark so (without a shuffle), and the
        # per-topic windows over it then need no exchange (a Spark job each).
        return spark.read.schema(schemas[name]).parquet(f"{out}/{name}").coalesce(1)

    with progress.stage(f"reading {len(files.good)} files"):
        samples = read_samples(spark, files.good, settings.start, settings.end)
        enriched = enrich(samples, settings.slo_lag, settings.slo_time_s, settings.gap_factor)
        enriched = enriched.persist(StorageLevel.MEMORY_AND_DISK)
        tables = build_tables(enriched, settings)
        # One small collect fills the cache, says whether there is anything (its samples add up to the row count:
        # no count(), which cost two jobs more) and gives the summary its per-flow compliance.
        by_flow = [r.asDict() for r in tables["slo_by_flow"](read).collect()]
        rows = sum(r["samples"] for r in by_flow)
    try:
        if rows == 0:
            raise HistoryUnavailable(
                f"the lag history under {settings.history_uri} is empty"
                + (" in the requested period" if settings.start or settings.end else "")
            )
        flow_series = len({(r["flow"], r["source"], r["target"]) for r in by_flow})
        for name, table in tables.items():
            with progress.stage(f"writing {name}"):
                df = table(read)
                schemas[name] = df.schema
                single_file(df, flow_series, rows).write.mode("overwrite").parquet(f"{out}/{name}")
        with progress.stage("writing summary.json"):
            summary = json_safe(build_summary(read, settings, files, rows, by_flow, list(tables)))
            HadoopFS(spark).write_text(f"{out}/summary.json", json.dumps(summary, indent=1, allow_nan=False))
        return summary
    finally:
        enriched.unpersist()


def json_safe(value):
    """Plain JSON: NaN/inf (possible if the history holds NaN lags) become null, dates become ISO strings."""
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, datetime):
        # pyspark returns timestamps as naive datetimes in this process's local time zone: make them UTC.
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def ordered(rows: list[dict], columns: list[str], keys: list[str]) -> list[dict]:
    """``columns`` of ``rows`` in the order Spark's ``orderBy(*keys)`` gives: ascending, nulls first (strings compare
    by code point in both). The keys are each table's grouping keys, so there are no ties to break."""
    rows = sorted(rows, key=lambda r: tuple((r[k] is not None, r[k]) for k in keys))
    return [{c: r[c] for c in columns} for r in rows]


def spark_sum(values):
    """Spark's ``sum`` over one partition, in row order: null if no value is known, else 0 + each known value in
    turn (so doubles round exactly as Spark's aggregate of a one-file table does)."""
    total = None
    for v in values:
        if v is not None:
            total = (0 if total is None else total) + v
    return total


def spark_max(values):
    known = [v for v in values if v is not None]
    return max(known) if known else None


def read_back(read, wanted: dict[str, list[str]]) -> dict[str, list[dict]]:
    """The ``wanted`` columns of several tables just written, in one Spark job: a union of their scans is one
    stage with a task per file, where a collect per table cost a job each. Each table's columns are renamed apart
    first, so that the union never meets two types under one name (it would widen them). Rows in file order."""
    from functools import reduce

    from pyspark.sql import functions as F

    frames = [
        read(name).select(F.lit(name).alias("table"), *[F.col(c).alias(f"{name}__{c}") for c in columns])
        for name, columns in wanted.items()
    ]
    union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)
    rows: dict[str, list[dict]] = {name: [] for name in wanted}
    for r in union.collect():
        name = r["table"]
        rows[name].append({c: r[f"{name}__{c}"] for c in wanted[name]})
    return rows


def build_summary(read, settings: AnalysisSettings, files, rows: int, by_flow: list[dict], table_names) -> dict:
    """Small figures for dashboards and humans, from the tables just written: the per-flow rows are in hand, the
    rest are read back (no recomputation) in one Spark job, and totals are added up here rather than by a Spark
    aggregate (two jobs each)."""
    out = settings.out_uri.rstrip("/")
    slo_cols = [
        "compliance",
        "compliance_lower_bound",
        "compliant_ms",
        "breach_ms",
        "unknown_ms",
        "unobserved_ms",
        "first_sample",
        "last_sample",
    ]

    committed_cols = [
        "samples",
        "committed_minus_true_p50",
        "committed_minus_true_p99",
        "false_pages",
        "false_page_share",
        "missed_breaches",
    ]
    trend_cols = [
        "first_day",
        "last_day",
        "first_true_lag_p99",
        "last_true_lag_p99",
        "true_lag_p99_change",
        "true_lag_p99_slope_per_day",
    ]
    back = read_back(
        read,
        {
            "slo_by_topic": TOPIC_KEYS + slo_cols,
            "incidents": ["open", "duration_s", "peak_true_lag"],
            "incidents_by_topic": ["open"],
            "sampling_gaps": ["gap_s"],
            "committed_view": TOPIC_KEYS + committed_cols,
            "trend": TOPIC_KEYS + trend_cols,
        },
    )
    incidents, gaps = back["incidents"], back["sampling_gaps"]
    return {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "history": settings.history_uri,
        "period": {"from": settings.start, "to": settings.end},
        "slo": {"true_lag": settings.slo_lag, "time_lag_s": settings.slo_time_s, "gap_factor": settings.gap_factor},
        "rows": rows,
        "files": {"read": len(files.good), "skipped": [{"uri": u, "reason": r} for u, r in files.skipped]},
        "compliance_by_flow": ordered(by_flow, FLOW_KEYS + slo_cols, FLOW_KEYS),
        "compliance_by_topic": ordered(back["slo_by_topic"], TOPIC_KEYS + slo_cols, TOPIC_KEYS),
        "incidents": {
            "count": len(incidents),
            "open": spark_sum(int(r["open"]) if r["open"] is not None else None for r in incidents),
            "total_duration_s": spark_sum(r["duration_s"] for r in incidents),
            "max_peak_true_lag": spark_max(r["peak_true_lag"] for r in incidents),
            "by_topic_windows": len(back["incidents_by_topic"]),
        },
        "sampling_gaps": {"count": len(gaps), "total_gap_s": spark_sum(r["gap_s"] for r in gaps)},
        "committed_view": ordered(back["committed_view"], TOPIC_KEYS + committed_cols, TOPIC_KEYS),
        "trend": ordered(back["trend"], TOPIC_KEYS + trend_cols, TOPIC_KEYS),
        "tables": {name: f"{out}/{name}" for name in table_names},
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m mirrorwatch.monitor.analytics.job`` and ``submit.py``: the ``analyze`` command on its own."""
    from ...core.cli import run_click
    from .cli import analyze

    run_click(analyze, "analyze")(argv)


if __name__ == "__main__":
    main()
