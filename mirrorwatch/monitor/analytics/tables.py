"""The output tables other than incidents. Pure DataFrame → DataFrame functions over ``prepare.enrich``'s rows."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .definitions import LAG_KINDS, PARTITION_KEYS, PERCENTILES, TOPIC_KEYS

BUCKET_MS = {"hour": 3_600_000, "day": 86_400_000}


def _percentile_columns(column: str, prefix: str | None = None) -> tuple[list, list]:
    """(aggregate, final-select) columns for p50/p95/p99 of one column (exact, linear interpolation)."""
    prefix = prefix or column
    arr = F.percentile(column, list(PERCENTILES))
    cols = [arr.alias(f"_{prefix}_pcts")]
    return cols, [F.col(f"_{prefix}_pcts")[i].alias(f"{prefix}_p{int(p * 100)}") for i, p in enumerate(PERCENTILES)]


def lag_stats(enriched: DataFrame, bucket: str) -> DataFrame:
    """Per partition and hour (or day): lag percentiles and max, samples and sampling coverage.

    ``coverage`` = samples / expected samples, where expected = bucket length / the series' median spacing,
    capped at 1. ``gaps`` counts sampling gaps that start in the bucket; ``unobserved_s`` is their time beyond
    the cap (see ``definitions``), i.e. time nobody looked.
    """
    aggs, finals = [], []
    for kind in LAG_KINDS:
        a, f = _percentile_columns(kind)
        aggs += a
        finals += f + [F.col(f"{kind}_max")]
        aggs.append(F.max(kind).alias(f"{kind}_max"))
    grouped = (
        enriched.withColumn("bucket_start", F.date_trunc(bucket, "ts"))
        .groupBy(*PARTITION_KEYS, "bucket_start")
        .agg(
            F.count(F.lit(1)).alias("samples"),
            *[F.count(kind).alias(f"{kind}_known") for kind in LAG_KINDS],
            *aggs,
            F.first("median_spacing_ms").alias("median_spacing_ms"),
            F.sum(F.col("gap_after").cast("int")).alias("gaps"),
            (F.sum("unobserved_ms") / 1000.0).alias("unobserved_s"),
        )
    )
    # try_divide: Spark 4 runs in ANSI mode, where x/0 fails the job; a median spacing of 0 (duplicate samples)
    # or null (a single sample) gives null here instead.
    expected = F.try_divide(F.lit(float(BUCKET_MS[bucket])), F.col("median_spacing_ms"))
    return grouped.select(
        *PARTITION_KEYS,
        "bucket_start",
        "samples",
        *[f"{kind}_known" for kind in LAG_KINDS],
        *finals,
        expected.alias("expected_samples"),
        F.least(F.lit(1.0), F.try_divide(F.col("samples"), expected)).alias("coverage"),
        "gaps",
        "unobserved_s",
    )


def sampling_gaps(enriched: DataFrame) -> DataFrame:
    """Every spacing longer than gap_factor × the series' median spacing."""
    return enriched.filter("gap_after").select(
        *PARTITION_KEYS,
        F.col("ts").alias("gap_start"),
        F.timestamp_millis(F.col("ts_ms") + F.col("spacing_ms")).alias("gap_end"),
        (F.col("spacing_ms") / 1000.0).alias("gap_s"),
        (F.col("median_spacing_ms") / 1000.0).alias("median_spacing_s"),
        F.try_divide(F.col("spacing_ms"), F.col("median_spacing_ms")).alias("spacing_ratio"),
        (F.col("unobserved_ms") / 1000.0).alias("unobserved_s"),
    )


def slo_compliance(enriched: DataFrame, keys: list[str]) -> DataFrame:
    """Time-weighted SLO compliance per ``keys`` (topic or flow). Sums are integer milliseconds, so exact."""

    def ms_where(cond):
        return F.coalesce(F.sum(F.when(cond, F.col("weight_ms")).otherwise(F.lit(0))), F.lit(0)).cast("long")

    g = enriched.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("samples"),
        ms_where(F.col("compliant")).alias("compliant_ms"),
        ms_where(F.col("breach")).alias("breach_ms"),
        ms_where(~F.col("compliant") & ~F.col("breach")).alias("unknown_ms"),
        F.sum("unobserved_ms").cast("long").alias("unobserved_ms"),
        F.min("ts").alias("first_sample"),
        F.max("ts").alias("last_sample"),
    )
    judged = F.col("compliant_ms") + F.col("breach_ms")
    everything = judged + F.col("unknown_ms") + F.col("unobserved_ms")
    return g.select(
        "*",
        F.when(judged > 0, F.col("compliant_ms") / judged).alias("compliance"),
        # Lower bound: unknown samples and unobserved (gap) time counted as breached.
        F.when(everything > 0, F.col("compliant_ms") / everything).alias("compliance_lower_bound"),
    )


def committed_view(enriched: DataFrame, slo_lag: int) -> DataFrame:
    """How wrong the committed view (kafka-consumer-groups' lag) was, per topic.

    ``committed_minus_true`` = committed_lag − true_lag over samples where both are known.
    ``false_pages``: committed_lag > SLO lag while the sample was within SLO (true and time lag) — pages the
    committed view alone would have sent that true lag avoids. ``missed_breaches``: committed_lag within the
    lag SLO while the sample breached (possible through time lag).
    """
    both = enriched.filter(F.col("committed_lag").isNotNull() & F.col("true_lag").isNotNull()).withColumn(
        "committed_minus_true", F.col("committed_lag") - F.col("true_lag")
    )
    a, f = _percentile_columns("committed_minus_true")
    committed_pages = F.col("committed_lag") > slo_lag
    g = both.groupBy(*TOPIC_KEYS).agg(
        F.count(F.lit(1)).alias("samples"),
        F.min("committed_minus_true").alias("committed_minus_true_min"),
        F.avg("committed_minus_true").alias("committed_minus_true_mean"),
        F.max("committed_minus_true").alias("committed_minus_true_max"),
        *a,
        F.sum(committed_pages.cast("long")).alias("committed_pages"),
        F.sum((committed_pages & F.col("compliant")).cast("long")).alias("false_pages"),
        F.sum((~committed_pages & F.col("breach")).cast("long")).alias("missed_breaches"),
    )
    return g.select(
        *TOPIC_KEYS,
        "samples",
        "committed_minus_true_min",
        "committed_minus_true_mean",
        *f,
        "committed_minus_true_max",
        "committed_pages",
        "false_pages",
        (F.col("false_pages") / F.col("samples")).alias("false_page_share"),
        "missed_breaches",
    )


def trend_daily(enriched: DataFrame) -> DataFrame:
    """Per topic and UTC day: p99 of true and time lag over all the topic's partitions, and the change on the
    previous day that has data."""
    daily = (
        enriched.withColumn("day", F.to_date("ts"))
        .groupBy(*TOPIC_KEYS, "day")
        .agg(
            F.count(F.lit(1)).alias("samples"),
            F.percentile("true_lag", 0.99).alias("true_lag_p99"),
            F.percentile("time_lag_s", 0.99).alias("time_lag_s_p99"),
        )
    )
    w = Window.partitionBy(*TOPIC_KEYS).orderBy("day")
    return daily.select(
        "*",
        (F.col("true_lag_p99") - F.lag("true_lag_p99").over(w)).alias("true_lag_p99_change"),
        (F.col("time_lag_s_p99") - F.lag("time_lag_s_p99").over(w)).alias("time_lag_s_p99_change"),
    )


def trend(daily: DataFrame) -> DataFrame:
    """Per topic over the period: first and last day's p99 true lag, the change, and a least-squares slope
    (per day). First/last days may be partial days; the slope is less sensitive to that than the change."""
    day_index = F.datediff("day", F.min("day").over(Window.partitionBy(*TOPIC_KEYS)))
    g = (
        daily.withColumn("day_index", day_index)
        .groupBy(*TOPIC_KEYS)
        .agg(
            F.count(F.lit(1)).alias("days"),
            F.min("day").alias("first_day"),
            F.max("day").alias("last_day"),
            F.min_by("true_lag_p99", "day").alias("first_true_lag_p99"),
            F.max_by("true_lag_p99", "day").alias("last_true_lag_p99"),
            F.regr_slope("true_lag_p99", "day_index").alias("true_lag_p99_slope_per_day"),
            F.regr_slope("time_lag_s_p99", "day_index").alias("time_lag_s_p99_slope_per_day"),
        )
    )
    change = F.col("last_true_lag_p99") - F.col("first_true_lag_p99")
    return g.select(
        "*",
        change.alias("true_lag_p99_change"),
        F.when(F.col("first_true_lag_p99") > 0, change / F.col("first_true_lag_p99")).alias(
            "true_lag_p99_change_ratio"
        ),
    )
