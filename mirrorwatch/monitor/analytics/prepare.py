"""Reading the history and deriving the per-sample columns every table builds on. Pure DataFrame functions.

The derived columns (see ``definitions`` for the meaning of each):
``hour_ms``, ``next_ts_ms``, ``spacing_ms``, ``median_spacing_ms``, ``weight_ms``, ``unobserved_ms``,
``gap_after``, ``breach``, ``compliant``, ``deferred``; and ``is_carry`` plus the ``inc_*`` incident partial
that ``incidents`` folds (a history sample is a one-sample partial; a carried boundary sample brings the part of
its incident seen by earlier runs).
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...core.records import lag_sample_arrow_schema
from .definitions import HOUR_MS, SERIES_KEYS


def history_spark_schema() -> T.StructType:
    """The Spark schema of ``lag_sample_arrow_schema()``, mapped type by type.

    (pyspark's own ``from_arrow_schema`` would do, but it imports pandas and warns about its version.)
    """
    import pyarrow as pa

    def spark_type(arrow_type: pa.DataType) -> T.DataType:
        if pa.types.is_timestamp(arrow_type):
            # An instant (tz-aware) is Spark's TimestampType, not TIMESTAMP_NTZ.
            return T.TimestampType() if arrow_type.tz else T.TimestampNTZType()
        for check, st in (
            (pa.types.is_string, T.StringType()),
            (pa.types.is_int32, T.IntegerType()),
            (pa.types.is_int64, T.LongType()),
            (pa.types.is_float64, T.DoubleType()),
            (pa.types.is_boolean, T.BooleanType()),
        ):
            if check(arrow_type):
                return st
        raise TypeError(f"history column type {arrow_type} has no Spark mapping here")

    return T.StructType([T.StructField(f.name, spark_type(f.type), f.nullable) for f in lag_sample_arrow_schema()])


def read_samples(
    spark: SparkSession, files: list[str], start: datetime | None = None, end: datetime | None = None
) -> DataFrame:
    """Files are listed and checked beforehand (``inputs``); ``ignoreCorruptFiles`` only guards against damage
    inside data pages that the footer check cannot see. ``mirror`` is left as written (null in files from before
    the column): the tables settle one value per flow (``partials.flow_mirrors``)."""
    df = spark.read.schema(history_spark_schema()).option("ignoreCorruptFiles", "true").parquet(*files)
    if start is not None:
        df = df.filter(F.col("ts") >= F.lit(start))
    if end is not None:
        df = df.filter(F.col("ts") < F.lit(end))
    return df


def series_window() -> WindowSpec:
    return Window.partitionBy(*SERIES_KEYS).orderBy("ts_ms")


def breach_expr(slo_lag: int, slo_time_s: float) -> Column:
    # A known value over the limit is a breach even if the other one is unknown.
    return F.coalesce(F.col("true_lag") > slo_lag, F.lit(False)) | F.coalesce(
        F.col("time_lag_s") > slo_time_s, F.lit(False)
    )


def compliant_expr(slo_lag: int, slo_time_s: float) -> Column:
    return F.coalesce((F.col("true_lag") <= slo_lag) & (F.col("time_lag_s") <= slo_time_s), F.lit(False))


PEAK_TYPE = "struct<true_lag:bigint,neg_ts:bigint>"


def sample_rows(samples: DataFrame) -> DataFrame:
    """History rows in the shape ``enrich`` takes: each sample is its own one-sample incident partial."""
    ts_ms = F.unix_millis("ts")
    return samples.select(
        *SERIES_KEYS,
        "mirror",
        ts_ms.alias("ts_ms"),
        "true_lag",
        "committed_lag",
        "time_lag_s",
        "status",  # the evaluator's word on each sample: the incidents say which statuses their breach saw
        F.lit(False).alias("is_carry"),
        F.lit(None).cast("double").alias("carry_median_ms"),
        ts_ms.alias("inc_start_ms"),
        F.lit(1).cast("long").alias("inc_samples"),
        F.struct(F.col("true_lag").alias("true_lag"), (-ts_ms).alias("neg_ts")).alias("inc_peak"),
        F.col("time_lag_s").alias("inc_peak_time"),
        F.when(F.col("status").isNotNull(), F.array("status"))
        .otherwise(F.array().cast("array<string>"))
        .alias("inc_statuses"),
    )


def enrich(
    rows: DataFrame, slo_lag: int, slo_time_s: float, gap_factor: float, boundary_ms: int | None = None
) -> DataFrame:
    """One row per sample (``sample_rows``, plus the carried boundary samples of an incremental run) with the
    derived columns. ``deferred`` marks each series' last sample before ``boundary_ms`` (the next run's start):
    what its spacing stands for is only known once its successor is (``state``)."""
    hour_ms = F.floor(F.col("ts_ms") / HOUR_MS).cast("long") * HOUR_MS
    df = rows.withColumn("hour_ms", hour_ms).withColumn("next_ts_ms", F.lead("ts_ms").over(series_window()))
    df = df.withColumn("spacing_ms", F.col("next_ts_ms") - F.col("ts_ms"))
    within = ~F.col("is_carry") & (F.col("next_ts_ms") < F.col("hour_ms") + HOUR_MS)
    # Exact median of the hour's own spacings; a carried sample's hour is not read again, so its median is carried.
    hour_median = F.percentile(F.when(within, F.col("spacing_ms")), 0.5).over(
        Window.partitionBy(*SERIES_KEYS, "hour_ms")
    )
    df = df.withColumn("median_spacing_ms", F.coalesce(F.col("carry_median_ms"), hour_median))
    median, spacing = F.col("median_spacing_ms"), F.col("spacing_ms")
    cap_ms = F.floor(F.lit(gap_factor) * median).cast("long")
    if boundary_ms is None:
        deferred = F.lit(False)
    else:
        deferred = (F.col("ts_ms") < boundary_ms) & F.coalesce(F.col("next_ts_ms") >= boundary_ms, F.lit(True))
    return df.select(
        "*",
        F.when(median.isNull(), F.lit(0).cast("long"))
        .when(spacing.isNull(), F.floor(median).cast("long"))
        .otherwise(F.least(spacing, cap_ms))
        .alias("weight_ms"),
        F.when(spacing.isNull(), F.lit(0).cast("long"))
        .when(median.isNull(), spacing)
        .otherwise(F.greatest(spacing - cap_ms, F.lit(0).cast("long")))
        .alias("unobserved_ms"),
        F.coalesce(spacing > F.lit(gap_factor) * median, F.lit(False)).alias("gap_after"),
        breach_expr(slo_lag, slo_time_s).alias("breach"),
        compliant_expr(slo_lag, slo_time_s).alias("compliant"),
        deferred.alias("deferred"),
    )
