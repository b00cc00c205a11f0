"""Partial aggregates per partition and UTC hour: what every table is built from, and what incremental runs keep.

One row per series (``SERIES_KEYS``) and hour holds everything the tables need from that hour's samples:
counts, exact hourly percentiles and maxima, KLL sketches of each lag (merged into daily, topic-day and
topic-period percentiles), the hour's median spacing, first/last sample, the flow's newest ``mirror``, the
committed-view sums, and the *spacing sums* (time judged compliant / breached / unknown, unobserved time, gaps).
The sketches travel apart from the rest (``sketch_rows``; ``VALUE_COLUMNS`` has none): nothing needs them finer
than a day, so the state keeps them per series and closed day (``state``), and the hour rows stay small.

The spacing sums of a series' last sample before a run's boundary are *deferred*: what that sample stands for
depends on its successor, which a later run may read. A run therefore computes each spacing sum twice — with
the deferred samples (``all``: this run's tables) and without (``final``: what the state keeps) — and the run
that later reads the successor adds the deferred sample's part to its hour as one more row. ``merge`` adds up
the rows of an hour. Pure DataFrame functions.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .definitions import DAY_MS, PERCENTILES, SERIES_KEYS, SKETCH_K

# (name, column) of the spacing sums; each exists as ``<name>`` (all) and ``<name>__final`` in ``hour_partials``.
SPACING_SUMS = ("compliant_ms", "breach_ms", "unknown_ms", "unobserved_ms", "gaps")
LONG_LAGS = ("true_lag", "committed_lag")
COUNTS = (
    "samples",
    "true_lag_known",
    "committed_lag_known",
    "time_lag_s_known",
    "cmt_samples",
    "committed_pages",
    "false_pages",
    "missed_breaches",
)
# The KLL sketches: kept per series and hour only until the hour's UTC day closes, then per series and day
# (``sketch_rows``, ``state``); the hour rows the tables and the state share (``VALUE_COLUMNS``) carry none.
SKETCHES = tuple(f"{k}_sketch" for k in ("true_lag", "committed_lag", "time_lag_s", "cmt"))
VALUE_COLUMNS = (
    ["samples", "true_lag_known", "committed_lag_known", "time_lag_s_known"]
    + [f"{k}_pcts" for k in ("true_lag", "committed_lag", "time_lag_s")]
    + [f"{k}_max" for k in ("true_lag", "committed_lag", "time_lag_s")]
    + ["median_spacing_ms", "first_ms", "last_ms", "mirror_newest"]
    + ["cmt_samples", "cmt_sum", "cmt_min", "cmt_max", "committed_pages", "false_pages", "missed_breaches"]
)


def _spacing_sums(deferred_too: bool) -> list[Column]:
    counted = F.lit(True) if deferred_too else ~F.col("deferred")
    suffix = "" if deferred_too else "__final"

    def ms_where(cond: Column, column: str = "weight_ms") -> Column:
        return F.coalesce(F.sum(F.when(cond & counted, F.col(column))), F.lit(0)).cast("long")

    return [
        ms_where(F.col("compliant")).alias(f"compliant_ms{suffix}"),
        ms_where(F.col("breach")).alias(f"breach_ms{suffix}"),
        ms_where(~F.col("compliant") & ~F.col("breach")).alias(f"unknown_ms{suffix}"),
        ms_where(F.lit(True), "unobserved_ms").alias(f"unobserved_ms{suffix}"),
        F.coalesce(F.sum((F.col("gap_after") & counted).cast("long")), F.lit(0)).alias(f"gaps{suffix}"),
    ]


def _sketch(agg: Callable[[Column, int], Column], values: Column) -> Column:
    # null, not an empty sketch, when the hour has no value: ``merge`` takes an hour's one non-null sketch, and a
    # row that only adds a carried sample's spacing sums must not supply an empty one
    return F.when(F.count(values) > 0, agg(values, SKETCH_K))


def hour_partials(enriched: DataFrame, slo_lag: int) -> DataFrame:
    """Per series and hour of ``enriched``. A carried sample adds only its spacing sums (its values were counted
    by the run that read its hour)."""

    def own(column: str | Column) -> Column:
        c = F.col(column) if isinstance(column, str) else column
        return F.when(~F.col("is_carry"), c)

    both = own(F.col("committed_lag").isNotNull() & F.col("true_lag").isNotNull())
    diff = F.when(both, F.col("committed_lag") - F.col("true_lag"))
    pages = both & (F.col("committed_lag") > slo_lag)
    values = [
        F.count(own(F.lit(1))).alias("samples"),
        *[F.count(own(k)).alias(f"{k}_known") for k in ("true_lag", "committed_lag", "time_lag_s")],
        *[F.percentile(own(k), list(PERCENTILES)).alias(f"{k}_pcts") for k in ("true_lag", "committed_lag")],
        F.percentile(own("time_lag_s"), list(PERCENTILES)).alias("time_lag_s_pcts"),
        *[F.max(own(k)).alias(f"{k}_max") for k in ("true_lag", "committed_lag", "time_lag_s")],
        *[_sketch(F.kll_sketch_agg_bigint, own(k)).alias(f"{k}_sketch") for k in LONG_LAGS],
        _sketch(F.kll_sketch_agg_double, own("time_lag_s")).alias("time_lag_s_sketch"),
        _sketch(F.kll_sketch_agg_bigint, diff).alias("cmt_sketch"),
        F.max(own("median_spacing_ms")).alias("median_spacing_ms"),
        F.min(own("ts_ms")).alias("first_ms"),
        F.max(own("ts_ms")).alias("last_ms"),
        F.max(own(F.when(F.col("mirror") != "", F.struct("ts_ms", "mirror")))).alias("mirror_newest"),
        F.count(F.when(both, F.lit(1))).cast("long").alias("cmt_samples"),
        F.sum(diff).alias("cmt_sum"),
        F.min(diff).alias("cmt_min"),
        F.max(diff).alias("cmt_max"),
        F.count(F.when(pages, F.lit(1))).cast("long").alias("committed_pages"),
        F.count(F.when(pages & F.col("compliant"), F.lit(1))).cast("long").alias("false_pages"),
        F.count(F.when(both & ~(F.col("committed_lag") > slo_lag) & F.col("breach"), F.lit(1)))
        .cast("long")
        .alias("missed_breaches"),
    ]
    return enriched.groupBy(*SERIES_KEYS, "hour_ms").agg(*values, *_spacing_sums(True), *_spacing_sums(False))


def spacing_view(partials: DataFrame, final: bool) -> DataFrame:
    """``hour_partials`` without sketches, with one set of spacing sums: with the deferred samples (a run's tables)
    or without (what the state keeps)."""
    chosen = [F.col(f"{n}__final" if final else n).alias(n) for n in SPACING_SUMS]
    return partials.select(*SERIES_KEYS, "hour_ms", *VALUE_COLUMNS, *chosen)


def day_of(hour_ms: Column) -> Column:
    return F.floor(hour_ms / DAY_MS).cast("long") * DAY_MS


def sketch_rows(partials: DataFrame) -> DataFrame:
    """``hour_partials``' sketches, one row per series and hour that has one (a carried sample's row has none)."""
    some = reduce(lambda a, b: a | b, [F.col(c).isNotNull() for c in SKETCHES])
    return partials.filter(some).select(*SERIES_KEYS, "hour_ms", day_of(F.col("hour_ms")).alias("day_ms"), *SKETCHES)


def merged_sketch(column: str) -> Column:
    """The aggregate that merges a ``SKETCHES`` column (time lag is a double sketch, the others bigint)."""
    merge = F.kll_merge_agg_double if column == "time_lag_s_sketch" else F.kll_merge_agg_bigint
    return merge(column)


def merge_sketches(rows: DataFrame, by: list[str]) -> DataFrame:
    """Sketch rows (per hour or per day) merged per ``by``: one sketch of each kind per group."""
    return rows.groupBy(*by).agg(*[merged_sketch(c).alias(c) for c in SKETCHES])


def merge(parts: DataFrame) -> DataFrame:
    """One row per series and hour. An hour's values come from the one run that read the hour (later rows of it
    carry only the spacing sums of a sample whose successor came later, and zero counts), so values are taken as
    they are and counts and spacing sums are added up."""
    summed = set(COUNTS) | set(SPACING_SUMS)
    return parts.groupBy(*SERIES_KEYS, "hour_ms").agg(
        *[(F.sum(c) if c in summed else F.first(c, ignorenulls=True)).alias(c) for c in VALUE_COLUMNS],
        *[F.sum(n).alias(n) for n in SPACING_SUMS],
    )


def flow_mirrors(merged: DataFrame, read_from_ms: int | None) -> DataFrame:
    """What mirrors each flow: its newest non-empty ``mirror`` in the period ("" if none), so history files from
    before the column (null there) and a flow whose mirror changed stay one series. Also its samples in the
    period, and those read by this run (its hours: from ``read_from_ms`` on)."""
    this_run = F.col("hour_ms") >= F.lit(read_from_ms if read_from_ms is not None else -(2**62))
    return merged.groupBy("flow", "source", "target").agg(
        F.coalesce(F.max("mirror_newest").getField("mirror"), F.lit("")).alias("mirror"),
        F.sum("samples").alias("samples"),
        F.coalesce(F.sum(F.when(this_run, F.col("samples"))), F.lit(0)).alias("samples_read"),
    )
