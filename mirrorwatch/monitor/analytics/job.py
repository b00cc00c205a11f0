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

    with progress.stage(f"reading {len(files.good)} files"):
        samples = read_samples(spark, files.good, settings.start, settings.end)
        enriched = enrich(samples, settings.slo_lag, settings.slo_time_s, settings.gap_factor)
        enriched = enriched.persist(StorageLevel.MEMORY_AND_DISK)
        rows = enriched.count()
    try:
        if rows == 0:
            raise HistoryUnavailable(
                f"the lag history under {settings.history_uri} is empty"
                + (" in the requested period" if settings.start or settings.end else "")
            )
        out = settings.out_uri.rstrip("/")

        def read(name):
            return spark.read.parquet(f"{out}/{name}")

        tables = build_tables(enriched, settings)
        for name, table in tables.items():
            with progress.stage(f"writing {name}"):
                # One file per table: they are small (per partition × hour at most).
                table(read).repartition(1).write.mode("overwrite").parquet(f"{out}/{name}")
        with progress.stage("writing summary.json"):
            summary = json_safe(build_summary(spark, settings, files, rows, list(tables)))
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


def _rows(spark, uri: str, columns: list[str], order: list[str] | None = None) -> list[dict]:
    df = spark.read.parquet(uri).select(*columns)
    return [r.asDict() for r in (df.orderBy(*order) if order else df).collect()]


def build_summary(spark, settings: AnalysisSettings, files, rows: int, table_names: list[str]) -> dict:
    """Small figures for dashboards and humans, read back from the tables just written (no recomputation)."""
    from pyspark.sql import functions as F

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
    incidents = spark.read.parquet(f"{out}/incidents")
    inc = (
        incidents.agg(
            F.count(F.lit(1)).alias("count"),
            F.sum(F.col("open").cast("int")).alias("open"),
            F.sum("duration_s").alias("total_duration_s"),
            F.max("peak_true_lag").alias("max_peak_true_lag"),
        )
        .first()
        .asDict()
    )
    gaps = (
        spark.read.parquet(f"{out}/sampling_gaps")
        .agg(F.count(F.lit(1)).alias("count"), F.sum("gap_s").alias("total_gap_s"))
        .first()
    )
    return {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "history": settings.history_uri,
        "period": {"from": settings.start, "to": settings.end},
        "slo": {"true_lag": settings.slo_lag, "time_lag_s": settings.slo_time_s, "gap_factor": settings.gap_factor},
        "rows": rows,
        "files": {"read": len(files.good), "skipped": [{"uri": u, "reason": r} for u, r in files.skipped]},
        "compliance_by_flow": _rows(spark, f"{out}/slo_by_flow", FLOW_KEYS + slo_cols, FLOW_KEYS),
        "compliance_by_topic": _rows(spark, f"{out}/slo_by_topic", TOPIC_KEYS + slo_cols, TOPIC_KEYS),
        "incidents": {**inc, "by_topic_windows": spark.read.parquet(f"{out}/incidents_by_topic").count()},
        "sampling_gaps": gaps.asDict(),
        "committed_view": _rows(
            spark,
            f"{out}/committed_view",
            TOPIC_KEYS
            + [
                "samples",
                "committed_minus_true_p50",
                "committed_minus_true_p99",
                "false_pages",
                "false_page_share",
                "missed_breaches",
            ],
            TOPIC_KEYS,
        ),
        "trend": _rows(
            spark,
            f"{out}/trend",
            TOPIC_KEYS
            + [
                "first_day",
                "last_day",
                "first_true_lag_p99",
                "last_true_lag_p99",
                "true_lag_p99_change",
                "true_lag_p99_slope_per_day",
            ],
            TOPIC_KEYS,
        ),
        "tables": {name: f"{out}/{name}" for name in table_names},
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m mirrorwatch.monitor.analytics.job`` and ``submit.py``: the ``analyze`` command on its own."""
    from ...core.cli import run_click
    from .cli import analyze

    run_click(analyze, "analyze")(argv)


if __name__ == "__main__":
    main()
