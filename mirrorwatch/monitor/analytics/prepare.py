"""Reading the history and deriving the per-sample columns every table builds on. Pure DataFrame functions.

The derived columns (see ``definitions`` for the meaning of each):
``ts_ms``, ``spacing_ms``, ``median_spacing_ms``, ``weight_ms``, ``unobserved_ms``, ``gap_after``,
``breach``, ``compliant``.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...core.records import lag_sample_arrow_schema
from .definitions import PARTITION_KEYS


def history_spark_schema() -> T.StructType:
    """The Spark schema of ``lag_sample_arrow_schema()``, mapped type by type.

    (pyspark's own ``from_arrow_schema`` would do, but it imports pandas and warns about its version.)
    """
    import pyarrow as pa

    def spark_type(arrow_type):
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
    inside data pages that the footer check cannot see."""
    df = spark.read.schema(history_spark_schema()).option("ignoreCorruptFiles", "true").parquet(*files)
    # One mirror per flow: files from before the column existed read null, and a flow whose mirror changed
    # (our engine replaced by MM2, or back) would otherwise split its series in two. The flow's newest
    # non-empty value speaks for the whole period.
    newest = F.max(F.when(F.col("mirror") != "", F.struct("ts", "mirror")))  # max() skips the nulls
    flow = Window.partitionBy("flow", "source", "target")
    df = df.withColumn("mirror", F.coalesce(newest.over(flow).getField("mirror"), F.lit("")))
    if start is not None:
        df = df.filter(F.col("ts") >= F.lit(start))
    if end is not None:
        df = df.filter(F.col("ts") < F.lit(end))
    return df


def series_window():
    return Window.partitionBy(*PARTITION_KEYS).orderBy("ts_ms")


def breach_expr(slo_lag: int, slo_time_s: float) -> Column:
    # A known value over the limit is a breach even if the other one is unknown.
    return F.coalesce(F.col("true_lag") > slo_lag, F.lit(False)) | F.coalesce(
        F.col("time_lag_s") > slo_time_s, F.lit(False)
    )


def compliant_expr(slo_lag: int, slo_time_s: float) -> Column:
    return F.coalesce((F.col("true_lag") <= slo_lag) & (F.col("time_lag_s") <= slo_time_s), F.lit(False))


def enrich(samples: DataFrame, slo_lag: int, slo_time_s: float, gap_factor: float) -> DataFrame:
    """One row per sample with the derived columns; only the columns the tables use are kept (it is cached)."""
    df = samples.select(
        *PARTITION_KEYS,
        "ts",
        F.unix_millis("ts").alias("ts_ms"),
        "true_lag",
        "committed_lag",
        "time_lag_s",
        "status",  # the evaluator's word on each sample: the incidents say which statuses their breach saw
    )
    df = df.withColumn("spacing_ms", F.lead("ts_ms").over(series_window()) - F.col("ts_ms"))
    # Exact median over the whole series: a window without ordering spans the entire partition.
    df = df.withColumn("median_spacing_ms", F.percentile("spacing_ms", 0.5).over(Window.partitionBy(*PARTITION_KEYS)))
    cap_ms = F.floor(F.lit(gap_factor) * F.col("median_spacing_ms")).cast("long")
    last_weight_ms = F.floor(F.col("median_spacing_ms")).cast("long")
    return df.select(
        "*",
        # Spark's least/greatest skip nulls, hence the explicit branch for the last sample (spacing null).
        F.when(F.col("spacing_ms").isNull(), F.coalesce(last_weight_ms, F.lit(0).cast("long")))
        .otherwise(F.least(F.col("spacing_ms"), cap_ms))
        .alias("weight_ms"),
        F.when(F.col("spacing_ms").isNull(), F.lit(0).cast("long"))
        .otherwise(F.greatest(F.col("spacing_ms") - cap_ms, F.lit(0).cast("long")))
        .alias("unobserved_ms"),
        F.coalesce(F.col("spacing_ms") > F.lit(gap_factor) * F.col("median_spacing_ms"), F.lit(False)).alias(
            "gap_after"
        ),
        breach_expr(slo_lag, slo_time_s).alias("breach"),
        compliant_expr(slo_lag, slo_time_s).alias("compliant"),
    )
