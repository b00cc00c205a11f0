"""The output tables other than incidents. Pure DataFrame functions over the merged hour partials (``partials``)
and, for the sketch percentiles, the per series-day rows built from them and the day sketches (``series_days``),
keyed by ``SERIES_KEYS``; ``with_mirror`` adds each flow's ``mirror`` when a table is written."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .definitions import DAY_MS, HOUR_MS, LAG_KINDS, PERCENTILES, SERIES_KEYS
from .partials import SKETCHES, day_of, merged_sketch

# The tables' keys without ``mirror`` (added by ``with_mirror``).
SERIES_TOPIC = [k for k in SERIES_KEYS if k != "partition"]
SERIES_FLOW = ["flow", "source", "target", "group"]


def with_mirror(table: DataFrame, mirrors: DataFrame, keys: list[str]) -> DataFrame:
    """``table`` with the flow's ``mirror`` in its place among ``keys`` (a small broadcast join)."""
    rest = [c for c in table.columns if c not in keys]
    joined = table.join(F.broadcast(mirrors), ["flow", "source", "target"], "left")
    return joined.select(*keys, *rest)


def _coverage(bucket_ms: int) -> list[Column]:
    # try_divide: Spark 4 runs in ANSI mode, where x/0 fails the job; a median spacing of 0 (duplicate samples)
    # or null (an hour with one sample) gives null here instead.
    expected = F.try_divide(F.lit(float(bucket_ms)), F.col("median_spacing_ms"))
    return [
        expected.alias("expected_samples"),
        F.least(F.lit(1.0), F.try_divide(F.col("samples"), expected)).alias("coverage"),
        F.col("gaps"),
        (F.col("unobserved_ms") / 1000.0).alias("unobserved_s"),
    ]


def lag_hourly(merged: DataFrame) -> DataFrame:
    """Per partition and hour: exact lag percentiles and max, samples and sampling coverage.

    ``coverage`` = samples / expected samples, where expected = bucket length / the hour's median spacing,
    capped at 1. ``gaps`` counts sampling gaps that start in the bucket; ``unobserved_s`` is their time beyond
    the cap (see ``definitions``), i.e. time nobody looked.
    """
    finals: list[Column | str] = []
    for kind in LAG_KINDS:
        finals += [F.col(f"{kind}_pcts")[i].alias(f"{kind}_p{int(p * 100)}") for i, p in enumerate(PERCENTILES)]
        finals.append(f"{kind}_max")
    return merged.filter("samples > 0").select(
        *SERIES_KEYS,
        F.timestamp_millis("hour_ms").alias("bucket_start"),
        "samples",
        *[f"{kind}_known" for kind in LAG_KINDS],
        *finals,
        *_coverage(HOUR_MS),
    )


def series_days(merged: DataFrame, sketches: DataFrame) -> DataFrame:
    """Per series and UTC day: what ``lag_daily``, ``trend_daily`` and ``committed_view`` need — the hours' counts,
    maxima and sums added up, and the day's sketches merged from ``sketches`` (``partials.sketch_rows`` or the
    state's day rows: ``SERIES_KEYS``, ``day_ms``, ``partials.SKETCHES``; a closed day is one row per series). The
    day's median spacing is the median of its hours' medians. The hours are summed per day where they lie (``merged``
    is partitioned by topic: no shuffle), then that one row per series-day and the sketch rows are aggregated
    together (a union, no join)."""
    counts = [f"{kind}_known" for kind in LAG_KINDS] + ["samples", "gaps", "unobserved_ms", "cmt_samples", "cmt_sum"]
    counts += ["committed_pages", "false_pages", "missed_breaches"]
    maxima = [f"{kind}_max" for kind in LAG_KINDS] + ["cmt_max"]
    day = day_of(F.col("hour_ms")).alias("day_ms")
    hours = merged.filter("samples > 0").groupBy(*SERIES_KEYS, day)
    lite = hours.agg(
        *[F.sum(c).alias(c) for c in counts],
        *[F.max(c).alias(c) for c in maxima],
        F.min("cmt_min").alias("cmt_min"),
        F.percentile("median_spacing_ms", 0.5).alias("median_spacing_ms"),
    )
    both = lite.unionByName(sketches.select(*SERIES_KEYS, "day_ms", *SKETCHES), allowMissingColumns=True)
    g = both.repartition(*SERIES_TOPIC).groupBy(*SERIES_KEYS, "day_ms")
    return g.agg(
        *[F.sum(c).alias(c) for c in counts],  # one row of the day holds them: the sums add a number to nulls
        *[F.max(c).alias(c) for c in [*maxima, "median_spacing_ms"]],
        F.min("cmt_min").alias("cmt_min"),
        *[merged_sketch(c).alias(c) for c in SKETCHES],
    ).filter("samples > 0")


def lag_daily(days: DataFrame) -> DataFrame:
    """Per partition and UTC day (``series_days``): percentiles from the hours' sketches merged (rank error:
    ``SKETCH_RANK_ERROR``), exact max and counts; the day's median spacing is the median of its hours' medians."""
    finals: list[Column | str] = []
    for kind in LAG_KINDS:
        finals += _known_quantiles(kind)
        finals.append(f"{kind}_max")
    return days.select(
        *SERIES_KEYS,
        F.timestamp_millis("day_ms").alias("bucket_start"),
        "samples",
        *[f"{kind}_known" for kind in LAG_KINDS],
        *finals,
        *_coverage(DAY_MS),
    )


def _known_quantiles(kind: str, prefix: str | None = None, known: str | None = None) -> list[Column]:
    """p50/p95/p99 of a merged sketch column ``<kind>_sketch``; null where no value was known (empty sketch)."""
    prefix = prefix or kind
    has = F.col(known or f"{kind}_known") > 0
    arr = (F.kll_sketch_get_quantile_double if kind == "time_lag_s" else F.kll_sketch_get_quantile_bigint)(
        F.when(has, F.col(f"{kind}_sketch")), F.array(*[F.lit(p) for p in PERCENTILES])
    )
    return [arr[i].cast("double").alias(f"{prefix}_p{int(p * 100)}") for i, p in enumerate(PERCENTILES)]


def sampling_gaps(enriched: DataFrame) -> DataFrame:
    """Every spacing longer than gap_factor × the hour's median spacing (``SERIES_KEYS``-keyed rows)."""
    return enriched.filter("gap_after").select(
        *SERIES_KEYS,
        F.timestamp_millis("ts_ms").alias("gap_start"),
        F.timestamp_millis("next_ts_ms").alias("gap_end"),
        (F.col("spacing_ms") / 1000.0).alias("gap_s"),
        (F.col("median_spacing_ms") / 1000.0).alias("median_spacing_s"),
        F.try_divide(F.col("spacing_ms"), F.col("median_spacing_ms")).alias("spacing_ratio"),
        (F.col("unobserved_ms") / 1000.0).alias("unobserved_s"),
    )


def slo_compliance(merged: DataFrame, keys: list[str]) -> DataFrame:
    """Time-weighted SLO compliance per ``keys`` (topic or flow). Sums are integer milliseconds, so exact."""
    g = merged.groupBy(*keys).agg(
        F.sum("samples").alias("samples"),
        *[F.sum(c).cast("long").alias(c) for c in ("compliant_ms", "breach_ms", "unknown_ms", "unobserved_ms")],
        F.timestamp_millis(F.min("first_ms")).alias("first_sample"),
        F.timestamp_millis(F.max("last_ms")).alias("last_sample"),
    )
    judged = F.col("compliant_ms") + F.col("breach_ms")
    everything = judged + F.col("unknown_ms") + F.col("unobserved_ms")
    return g.select(
        "*",
        F.when(judged > 0, F.col("compliant_ms") / judged).alias("compliance"),
        # Lower bound: unknown samples and unobserved (gap) time counted as breached.
        F.when(everything > 0, F.col("compliant_ms") / everything).alias("compliance_lower_bound"),
    )


def committed_view(days: DataFrame) -> DataFrame:
    """How wrong the committed view (kafka-consumer-groups' lag) was, per topic.

    ``committed_minus_true`` = committed_lag − true_lag over samples where both are known (percentiles from
    sketches). ``false_pages``: committed_lag > SLO lag while the sample was within SLO (true and time lag) — pages
    the committed view alone would have sent that true lag avoids. ``missed_breaches``: committed_lag within the
    lag SLO while the sample breached (possible through time lag).
    """
    g = days.groupBy(*SERIES_TOPIC).agg(
        F.sum("cmt_samples").alias("samples"),
        F.min("cmt_min").alias("committed_minus_true_min"),
        F.sum("cmt_sum").alias("cmt_sum"),
        F.max("cmt_max").alias("committed_minus_true_max"),
        merged_sketch("cmt_sketch").alias("cmt_sketch"),
        *[F.sum(c).alias(c) for c in ("committed_pages", "false_pages", "missed_breaches")],
    )
    return g.filter("samples > 0").select(
        *SERIES_TOPIC,
        "samples",
        "committed_minus_true_min",
        (F.col("cmt_sum") / F.col("samples")).alias("committed_minus_true_mean"),
        *_known_quantiles("cmt", "committed_minus_true", "samples"),
        "committed_minus_true_max",
        "committed_pages",
        "false_pages",
        (F.col("false_pages") / F.col("samples")).alias("false_page_share"),
        "missed_breaches",
    )


def trend_daily(days: DataFrame) -> DataFrame:
    """Per topic and UTC day (from ``series_days``): p99 of true and time lag over all the topic's partitions
    (merged sketches), and the change on the previous day that has data."""
    daily = (
        days.withColumn("day", F.to_date(F.timestamp_millis("day_ms")))
        .groupBy(*SERIES_TOPIC, "day")
        .agg(
            F.sum("samples").alias("samples"),
            F.sum("true_lag_known").alias("true_lag_known"),
            F.sum("time_lag_s_known").alias("time_lag_s_known"),
            merged_sketch("true_lag_sketch").alias("true_lag_sketch"),
            merged_sketch("time_lag_s_sketch").alias("time_lag_s_sketch"),
        )
    )
    p99 = list(PERCENTILES).index(0.99)
    daily = daily.select(
        *SERIES_TOPIC,
        "day",
        "samples",
        _known_quantiles("true_lag")[p99].alias("true_lag_p99"),
        _known_quantiles("time_lag_s")[p99].alias("time_lag_s_p99"),
    )
    w = Window.partitionBy(*SERIES_TOPIC).orderBy("day")
    return daily.select(
        "*",
        (F.col("true_lag_p99") - F.lag("true_lag_p99").over(w)).alias("true_lag_p99_change"),
        (F.col("time_lag_s_p99") - F.lag("time_lag_s_p99").over(w)).alias("time_lag_s_p99_change"),
    )


def trend(daily: DataFrame, keys: list[str]) -> DataFrame:
    """Per topic over the period: first and last day's p99 true lag, the change, and a least-squares slope
    (per day). First/last days may be partial days; the slope is less sensitive to that than the change."""
    day_index = F.datediff("day", F.min("day").over(Window.partitionBy(*keys)))
    g = (
        daily.withColumn("day_index", day_index)
        .groupBy(*keys)
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
