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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, cast

from ...core.cli import UserError
from ..analytics_runs import sample_lateness_s
from .definitions import (
    DEFAULT_GAP_FACTOR,
    DEFAULT_SLO_LAG,
    DEFAULT_SLO_TIME_S,
    FLOW_KEYS,
    PARTITION_KEYS,
    TOPIC_KEYS,
)
from .inputs import (
    HistoryFiles,
    HistoryUnavailable,
    find_history_files,
    lag_root,
    local_path,
    shuffle_partitions,
)
from .progress import Progress
from .session import spark_session

if TYPE_CHECKING:  # pyspark is imported when a run starts, not when the CLI loads
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from .incremental import Summarised

Reader = Callable[[str], "DataFrame"]
Row = dict[str, Any]  # a table's row read back for summary.json
Number = int | float
# a history file closes within an hour (monitor.history_roll_s ≤ 3600), plus the margin the scheduled runs use too
DEFAULT_LATE_S = sample_lateness_s(3600.0)


@dataclass(frozen=True)
class AnalysisSettings:
    history_uri: str
    out_uri: str
    start: datetime | None = None
    end: datetime | None = None
    slo_lag: int = DEFAULT_SLO_LAG
    slo_time_s: float = DEFAULT_SLO_TIME_S
    gap_factor: float = DEFAULT_GAP_FACTOR
    state_uri: str | None = None  # incremental: the summarised past is kept here (``state``)
    late_s: float = DEFAULT_LATE_S  # how late a sample may be written, after its own time (incremental runs)


def run_job(settings: AnalysisSettings, master: str | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Start (or reuse) Spark, run the analysis, stop Spark if started here. User problems → ``UserError``."""
    progress = progress or Progress(quiet=True)
    local, local_lag = local_path(settings.history_uri), local_path(lag_root(settings.history_uri))
    if local is not None and not os.path.isdir(local):  # fail fast, before paying for a JVM
        raise UserError(f"history not found: {settings.history_uri}", 2)
    if local_lag is not None and not os.path.isdir(local_lag):
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


TABLE_NAMES = [
    "lag_hourly",
    "lag_daily",
    "sampling_gaps",
    "slo_by_topic",
    "slo_by_flow",
    "incidents",
    "incidents_by_topic",
    "committed_view",
    "trend_daily",
    "trend",
]


def build_tables(done: Summarised, mirrors: DataFrame) -> dict[str, Callable[[Reader], DataFrame]]:
    """Every output table by name, in writing order, as a function of ``read`` (which loads a table already
    written). Tables derived from another table read it back instead of recomputing it."""
    from . import incidents as inc
    from . import tables as t

    merged = done.merged

    def keyed(table: DataFrame, keys: list[str]) -> DataFrame:
        return t.with_mirror(table, mirrors, keys)

    tables: dict[str, Callable[[Reader], DataFrame]] = {
        "lag_hourly": lambda read: keyed(t.lag_hourly(merged), PARTITION_KEYS),
        "lag_daily": lambda read: keyed(t.lag_daily(done.days), PARTITION_KEYS),
        "sampling_gaps": lambda read: keyed(done.gaps, PARTITION_KEYS),
        "slo_by_topic": lambda read: keyed(t.slo_compliance(merged, t.SERIES_TOPIC), TOPIC_KEYS),
        "slo_by_flow": lambda read: keyed(t.slo_compliance(merged, t.SERIES_FLOW), FLOW_KEYS),
        "incidents": lambda read: keyed(done.incidents, PARTITION_KEYS),
        "incidents_by_topic": lambda read: inc.incidents_by_topic(read("incidents")),
        "committed_view": lambda read: keyed(t.committed_view(done.days), TOPIC_KEYS),
        "trend_daily": lambda read: keyed(t.trend_daily(done.days), TOPIC_KEYS),
        "trend": lambda read: t.trend(read("trend_daily"), TOPIC_KEYS),
    }
    assert list(tables) == TABLE_NAMES
    return tables


def single_file(table: DataFrame) -> DataFrame:
    """``table`` as one partition, so it is written as one file (the tables are small: per partition × hour at
    most, and readers such as the status page take a table as one file). They are built from the merged hour
    partials, which are cached: ``coalesce(1)`` runs the last aggregation in the one writing task."""
    return table.coalesce(1)


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def run_analysis(spark: SparkSession, settings: AnalysisSettings, progress: Progress) -> dict[str, Any]:
    """The whole run on ``spark``. The shuffle partitions grow with the history read (``inputs.shuffle_partitions``)
    for this run only."""

    configured = spark.conf.get(SHUFFLE_PARTITIONS) or "200"  # Spark's own default if nobody set one

    def history_files(start: datetime | None, end: datetime | None) -> HistoryFiles:
        with progress.stage("checking history files"):
            files = find_history_files(spark, settings.history_uri, start, end)
        for uri, reason in files.skipped:
            progress.warn(f"skipping corrupt Parquet file {uri}: {reason}")
        spark.conf.set(SHUFFLE_PARTITIONS, str(shuffle_partitions(int(configured), files.read_bytes)))
        return files

    try:
        return _run_analysis(spark, settings, progress, history_files)
    finally:
        spark.conf.set(SHUFFLE_PARTITIONS, configured)  # a shared session (tests, notebooks) gets its own back


def _run_analysis(
    spark: SparkSession,
    settings: AnalysisSettings,
    progress: Progress,
    history_files: Callable[[datetime | None, datetime | None], HistoryFiles],
) -> dict[str, Any]:
    from .hadoopfs import HadoopFS
    from .incremental import summarise
    from .partials import flow_mirrors

    out = settings.out_uri.rstrip("/")
    schemas: dict[
        str, StructType
    ] = {}  # of the tables written so far: reading them back needs no schema inference (a Spark job each)

    def read(name: str) -> DataFrame:
        # A table read back is one file, i.e. one partition; coalesce(1) tells Spark so (without a shuffle), and the
        # per-topic windows over it then need no exchange (a Spark job each).
        return spark.read.schema(schemas[name]).parquet(f"{out}/{name}").coalesce(1)

    with progress.stage("summarising the history"):
        done = summarise(spark, history_files, settings, progress.warn)
    try:
        with progress.stage("hour partials"):
            # One small collect: each flow's mirror (joined into every table) and the row count (0: nothing to
            # write). It computes, and caches, the samples' derived columns and the hour partials.
            flows = [r.asDict() for r in flow_mirrors(done.merged, done.read_from_ms).collect()]
        mirrors = spark.createDataFrame(
            [{k: r[k] for k in ("flow", "source", "target", "mirror")} for r in flows],
            "flow string, source string, target string, mirror string",
        )
        tables = build_tables(done, mirrors)
        rows = sum(r["samples"] for r in flows)
        done.info["rows_read"] = sum(r["samples_read"] for r in flows)
        if rows == 0:
            raise HistoryUnavailable(
                f"the lag history under {settings.history_uri} is empty"
                + (" in the requested period" if settings.start or settings.end else "")
            )
        for name, table in tables.items():
            with progress.stage(f"writing {name}"):
                df = table(read)
                schemas[name] = df.schema
                single_file(df).write.mode("overwrite").parquet(f"{out}/{name}")
        with progress.stage("keeping the summarised hours (--state)" if settings.state_uri else "finishing"):
            done.commit()
        with progress.stage("writing summary.json"):
            summary: dict[str, Any] = json_safe(build_summary(read, settings, done, rows, list(tables)))
            HadoopFS(spark).write_text(f"{out}/summary.json", json.dumps(summary, indent=1, allow_nan=False))
        return summary
    finally:
        done.release()


def json_safe(value: Any) -> Any:
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


def ordered(rows: list[Row], columns: list[str], keys: list[str]) -> list[Row]:
    """``columns`` of ``rows`` in the order Spark's ``orderBy(*keys)`` gives: ascending, nulls first (strings compare
    by code point in both). The keys are each table's grouping keys, so there are no ties to break."""
    rows = sorted(rows, key=lambda r: tuple((r[k] is not None, r[k]) for k in keys))
    return [{c: r[c] for c in columns} for r in rows]


def spark_sum(values: Iterable[Number | None]) -> Number | None:
    """Spark's ``sum`` over one partition, in row order: null if no value is known, else 0 + each known value in
    turn (so doubles round exactly as Spark's aggregate of a one-file table does)."""
    total: Number | None = None
    for v in values:
        if v is not None:
            total = (0 if total is None else total) + v
    return total


def spark_max(values: Iterable[Number | None]) -> Number | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def read_back(read: Reader, wanted: dict[str, list[str]]) -> dict[str, list[Row]]:
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
    rows: dict[str, list[Row]] = {name: [] for name in wanted}
    for r in union.collect():
        name = r["table"]
        rows[name].append({c: r[f"{name}__{c}"] for c in wanted[name]})
    return rows


def build_summary(
    read: Reader,
    settings: AnalysisSettings,
    done: Summarised,
    rows: int,
    table_names: list[str],
) -> dict[str, Any]:
    """Small figures for dashboards and humans, from the tables just written: read back (no recomputation) in one
    Spark job, and totals are added up here rather than by a Spark
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
            "slo_by_flow": FLOW_KEYS + slo_cols,
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
        "files": {
            "read": len(done.files.good),
            "skipped": [{"uri": u, "reason": r} for u, r in done.files.skipped],
        },
        "incremental": done.info,
        "compliance_by_flow": ordered(back["slo_by_flow"], FLOW_KEYS + slo_cols, FLOW_KEYS),
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

    # run_click's wrapper takes argv (core.cli annotates it as taking nothing)
    cast(Callable[[list[str] | None], None], run_click(analyze, "analyze"))(argv)


if __name__ == "__main__":
    main()
