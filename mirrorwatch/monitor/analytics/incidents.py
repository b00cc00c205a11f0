"""SLO incidents by sessionization over each partition's samples. Pure DataFrame functions.

Definition (per partition — the unit the monitor samples; ``incidents_by_topic`` merges them per topic):
an *incident* is a maximal run of consecutive breach samples of one series with no sampling gap inside
(a gap ends the run: nobody saw what happened in it). Fields:
- ``start``: first breach sample; ``end``: last breach sample.
- ``recovered``: the sample right after ``end`` if it is within SLO and not separated by a gap; otherwise
  null and ``open`` is true (data ended, a gap followed, or the next sample's lag is unknown).
- ``duration_s`` = (recovered, or end if open) − start.
- ``peak_true_lag`` and ``peak_ts`` (earliest sample with that lag); ``peak_time_lag_s`` (may be at another
  sample).
- ``catch_up_rate_per_s`` = (peak_true_lag − true_lag at recovered, or at end if open) / seconds between them:
  the net rate at which the mirror caught up after the peak. Null if the peak is the reference sample.
- ``statuses``: the evaluator statuses of the run's samples, distinct and sorted (what the monitor said while
  the SLO was breached: the History view's "which alerts").
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .definitions import SERIES_KEYS, TOPIC_KEYS
from .prepare import series_window

# What an incident's samples before the boundary add up to: carried to the next run with the boundary sample
# when the incident is still going there (``incident_partials``).
CARRIED = ("inc_start_ms", "inc_samples", "inc_peak", "inc_peak_time", "inc_statuses")


def _statuses(column: Column) -> Column:
    return F.array_sort(F.array_distinct(F.flatten(F.collect_list(column))))


def incident_groups(enriched: DataFrame, boundary_ms: int | None = None) -> DataFrame:
    """One row per incident, with its fields folded from the rows' ``inc_*`` partials (a carried boundary sample
    brings the earlier part of its incident, so an incident that spans runs is one row), ``final`` (its end and
    the sample after it lie before ``boundary_ms``: no later run can change it) and, for the incident that holds
    a series' deferred sample, its partial up to the boundary (``c_*``)."""
    w = series_window()
    running = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    starts = F.col("breach") & (~F.lag("breach", 1, False).over(w) | F.lag("gap_after", 1, False).over(w))
    marked = (
        enriched.select(
            *SERIES_KEYS,
            "ts_ms",
            "true_lag",
            "breach",
            "compliant",
            "gap_after",
            "deferred",
            "next_ts_ms",
            *CARRIED,
        )
        .withColumn("next_true_lag", F.lead("true_lag").over(w))
        .withColumn("next_compliant", F.lead("compliant").over(w))
        .withColumn("incident_no", F.sum(starts.cast("int")).over(running))
        .filter("breach")
    )
    before = F.col("ts_ms") < F.lit(boundary_ms if boundary_ms is not None else 2**62)
    return marked.groupBy(*SERIES_KEYS, "incident_no").agg(
        F.min("inc_start_ms").alias("start_ms"),
        F.max("ts_ms").alias("end_ms"),
        F.sum("inc_samples").alias("samples"),
        # max of (lag, -ts): the largest lag, and among equal lags the earliest sample. Null lags sort first.
        F.max("inc_peak").alias("peak"),
        F.max("inc_peak_time").alias("peak_time_lag_s"),
        _statuses(F.col("inc_statuses")).alias("statuses"),
        F.max_by(
            F.struct("gap_after", "next_ts_ms", "next_true_lag", "next_compliant", "true_lag", "deferred"), "ts_ms"
        ).alias("last"),
        F.max(F.col("deferred").cast("int")).cast("boolean").alias("has_deferred"),
        F.sum(F.when(before, F.col("inc_samples"))).alias("c_samples"),
        F.max(F.when(before, F.col("inc_peak"))).alias("c_peak"),
        F.max(F.when(before, F.col("inc_peak_time"))).alias("c_peak_time"),
        _statuses(F.when(before, F.col("inc_statuses")).otherwise(F.array().cast("array<string>"))).alias("c_statuses"),
    )


def incidents(groups: DataFrame, boundary_ms: int | None = None) -> DataFrame:
    """The ``incidents`` table's rows (keyed by ``SERIES_KEYS``; ``mirror`` is added when written) and ``final``."""
    recovered = (
        F.col("last.next_ts_ms").isNotNull()
        & ~F.col("last.gap_after")
        & F.coalesce(F.col("last.next_compliant"), F.lit(False))
    )
    peak_lag = F.col("peak.true_lag")
    peak_ms = F.when(peak_lag.isNotNull(), -F.col("peak.neg_ts"))
    ref_ms = F.when(recovered, F.col("last.next_ts_ms")).otherwise(F.col("end_ms"))
    ref_lag = F.when(recovered, F.col("last.next_true_lag")).otherwise(F.col("last.true_lag"))
    rate = F.when(
        ref_lag.isNotNull() & peak_ms.isNotNull() & (ref_ms != peak_ms),
        (peak_lag - ref_lag) / ((ref_ms - peak_ms) / 1000.0),
    )
    final = F.lit(False) if boundary_ms is None else (F.col("end_ms") < boundary_ms) & ~F.col("last.deferred")
    return groups.select(
        *SERIES_KEYS,
        F.timestamp_millis("start_ms").alias("start"),
        F.timestamp_millis("end_ms").alias("end"),
        F.when(recovered, F.timestamp_millis(F.col("last.next_ts_ms"))).alias("recovered"),
        (~recovered).alias("open"),
        ((ref_ms - F.col("start_ms")) / 1000.0).alias("duration_s"),
        "samples",
        peak_lag.alias("peak_true_lag"),
        F.timestamp_millis(peak_ms).alias("peak_ts"),
        "peak_time_lag_s",
        rate.alias("catch_up_rate_per_s"),
        "statuses",
        final.alias("final"),
    )


def carried_partials(groups: DataFrame) -> DataFrame:
    """Per series whose deferred (boundary) sample is a breach: its incident's partial up to the boundary."""
    return groups.filter("has_deferred").select(
        *SERIES_KEYS,
        F.col("start_ms").alias("inc_start_ms"),
        F.col("c_samples").alias("inc_samples"),
        F.col("c_peak").alias("inc_peak"),
        F.col("c_peak_time").alias("inc_peak_time"),
        F.col("c_statuses").alias("inc_statuses"),
    )


def incidents_by_topic(partition_incidents: DataFrame) -> DataFrame:
    """Per-partition incidents of one topic merged where their [start, recovered-or-end] windows overlap."""
    w = Window.partitionBy(*TOPIC_KEYS).orderBy("start", "partition")
    until = F.coalesce(F.col("recovered"), F.col("end"))
    prev_until = F.max("until").over(w.rowsBetween(Window.unboundedPreceding, -1))
    grouped = (
        partition_incidents.withColumn("until", until)
        .withColumn("new_window", prev_until.isNull() | (F.col("start") > prev_until))
        .withColumn(
            "window_no",
            F.sum(F.col("new_window").cast("int")).over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
        )
    )
    return (
        grouped.groupBy(*TOPIC_KEYS, "window_no")
        .agg(
            F.min("start").alias("start"),
            F.max("until").alias("end"),
            F.count_distinct("partition").alias("partitions"),
            F.count(F.lit(1)).alias("partition_incidents"),
            F.max("peak_true_lag").alias("max_partition_peak_true_lag"),
            F.max("peak_time_lag_s").alias("peak_time_lag_s"),
            F.max(F.col("open").cast("int")).cast("boolean").alias("open"),
        )
        .select(
            *TOPIC_KEYS,
            "start",
            "end",
            ((F.unix_millis("end") - F.unix_millis("start")) / 1000.0).alias("duration_s"),
            "partitions",
            "partition_incidents",
            "max_partition_peak_true_lag",
            "peak_time_lag_s",
            "open",
        )
    )
