"""One run's summarising: read what the state has not summarised, fold it with the carried boundary samples, and
merge its hour partials with the state's. A run without ``--state`` is the same with an empty state (so the two
cannot drift apart). See ``state`` for the layout and the lateness rule, ``partials`` for the deferred samples.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import reduce
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from . import incidents as inc
from . import partials as pt
from . import state as st
from . import tables as t
from .definitions import DAY_MS, HOUR_MS, SERIES_KEYS
from .hadoopfs import HadoopFS
from .inputs import HistoryFiles, HistoryUnavailable, lag_root
from .prepare import enrich, history_spark_schema, read_samples, sample_rows

CARRY_COLUMNS = [*SERIES_KEYS, "ts_ms", "true_lag", "committed_lag", "time_lag_s", "status", "median_spacing_ms"]
# A sketch row holds four KLL sketches, ~13 KB before compression at 5-s sampling, so one hour or one day of 10,000
# partitions is a table of 130 MB or more. A Parquet reader holds a whole row group's column chunk in one heap
# buffer: at the writer's default row group (128 MB) that failed a 1 GiB executor with OutOfMemoryError.
# Small row groups keep each reader's buffer small, and let Spark split the file between tasks.
SKETCH_ROW_GROUP_BYTES = 8 * 1024 * 1024


def write_sketch_table(rows: DataFrame, uri: str) -> None:
    """One Parquet file of sketch rows, in row groups of about ``SKETCH_ROW_GROUP_BYTES``."""
    rows.coalesce(1).write.mode("overwrite").option("parquet.block.size", SKETCH_ROW_GROUP_BYTES).parquet(uri)


@dataclass
class Summarised:
    merged: DataFrame  # one row per series and hour of the period (``partials.merge``), persisted
    days: DataFrame  # one row per series and day, with the day's sketches (``tables.series_days``), persisted
    gaps: DataFrame  # sampling_gaps rows, ``SERIES_KEYS``-keyed
    incidents: DataFrame  # incidents rows, ``SERIES_KEYS``-keyed
    files: HistoryFiles  # read and skipped
    info: dict[str, Any]  # for summary.json
    read_from_ms: int | None  # samples before it were not read: hours from it on are this run's
    commit: Callable[[], None] = lambda: None  # writes the new state (call after the tables are written)
    cached: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()


def floor_hour_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000) // HOUR_MS * HOUR_MS


def floor_day_ms(when: datetime) -> int:
    return int(when.timestamp() * 1000) // DAY_MS * DAY_MS


def _union(frames: list[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b), frames)


def _read_parts(spark: SparkSession, uri: str, parts: list[st.Part], table: str) -> DataFrame | None:
    if not parts:
        return None
    return spark.read.parquet(*[f"{uri}/{p.name}/{table}" for p in parts])


def _sketches(
    spark: SparkSession,
    uri: str | None,
    state: st.State | None,
    kept: list[st.Part],
    run_partials: DataFrame,
    first_ms: int | None,
) -> DataFrame:
    """Every sketch of the look-back, as ``SERIES_KEYS``, ``day_ms``, ``partials.SKETCHES`` rows: the state's closed
    days (one row per series and day), the state's closed hours of the day still open at its boundary, and this
    run's hours (which the state has not summarised). No hour is in two of them."""
    columns = [*SERIES_KEYS, "day_ms", *pt.SKETCHES]
    frames = [pt.sketch_rows(run_partials).select(*columns)]
    if state is not None and uri:
        days = _read_parts(spark, uri, kept, "days")
        if days is not None:
            frames.append(days.select(*columns))
        still_open = [p for p in kept if p.open_day_ms is not None and st.day_open(p.open_day_ms, state.boundary_ms)]
        hours = _read_parts(spark, uri, still_open, "hour_sketches")
        if hours is not None:
            frames.append(hours.select(*columns))
    sketches = _union(frames)
    return sketches.filter(F.col("day_ms") >= first_ms) if first_ms is not None else sketches


def _carry_rows(spark: SparkSession, state_uri: str, state: st.State, first_ms: int | None) -> DataFrame | None:
    """The previous run's boundary samples as ``enrich`` rows (``is_carry``)."""
    if state.carry is None:
        return None
    carry = spark.read.parquet(f"{state_uri}/{state.carry}/carry")
    if first_ms is not None:
        carry = carry.filter(F.col("ts_ms") >= first_ms)
    own_peak = F.struct(F.col("true_lag").alias("true_lag"), (-F.col("ts_ms")).alias("neg_ts"))
    own_status = F.when(F.col("status").isNotNull(), F.array("status")).otherwise(F.array().cast("array<string>"))
    return carry.select(
        *SERIES_KEYS,
        F.lit(None).cast("string").alias("mirror"),
        "ts_ms",
        "true_lag",
        "committed_lag",
        "time_lag_s",
        "status",
        F.lit(True).alias("is_carry"),
        F.col("median_spacing_ms").alias("carry_median_ms"),
        F.coalesce("inc_start_ms", "ts_ms").alias("inc_start_ms"),
        F.coalesce("inc_samples", F.lit(1).cast("long")).alias("inc_samples"),
        F.coalesce("inc_peak", own_peak).alias("inc_peak"),
        F.when(F.col("inc_samples").isNull(), F.col("time_lag_s"))
        .otherwise(F.col("inc_peak_time"))
        .alias("inc_peak_time"),
        F.coalesce("inc_statuses", own_status).alias("inc_statuses"),
    )


def summarise(
    spark: SparkSession,
    list_files: Callable[[datetime | None, datetime | None], HistoryFiles],
    settings: Any,  # job.AnalysisSettings (not imported: job imports this module)
    warn: Callable[[str], None],
) -> Summarised:
    """Raises ``HistoryUnavailable`` when there is neither a readable file nor a state to report on."""
    fs = HadoopFS(spark)
    state_uri = settings.state_uri.rstrip("/") if settings.state_uri else None
    key = st.settings_key(settings.slo_lag, settings.slo_time_s, settings.gap_factor, settings.late_s)
    state: st.State | None = None
    replaced: set[str] = set()
    if state_uri:
        state, why = st.load(fs, state_uri, key)
        if why:
            warn(why)
            replaced = st.folders(fs, state_uri)  # deleted once this run's state is committed
    incremental = state_uri is not None
    as_of = settings.end or (datetime.now(UTC) if incremental else None)
    as_of_ms = int(as_of.timestamp() * 1000) if as_of else None
    # whole days: a closed day's sketches are one row per series in the state, which cannot be split
    first_ms = floor_day_ms(settings.start) if (incremental and settings.start) else None
    boundary = st.boundary_of(as_of_ms, settings.late_s) if (incremental and as_of_ms is not None) else None
    if state and boundary is not None:
        boundary = max(boundary, state.boundary_ms)  # a run as of an earlier time never reopens closed hours
    read_from_ms = max(state.boundary_ms, first_ms or 0) if state else first_ms
    read_from = datetime.fromtimestamp(read_from_ms / 1000, UTC) if read_from_ms is not None else settings.start

    files = list_files(read_from, as_of)
    if not files.good and state is None:
        raise HistoryUnavailable(
            f"no readable lag history files under {lag_root(settings.history_uri)}"
            + (" in the requested period" if settings.start or settings.end else "")
        )
    if files.good:
        samples = sample_rows(read_samples(spark, files.good, read_from, as_of))
    else:  # nothing new since the state: the tables are the state's
        samples = sample_rows(spark.createDataFrame([], history_spark_schema()))
    carry = _carry_rows(spark, state_uri, state, first_ms) if (state and state_uri) else None
    rows = samples if carry is None else samples.unionByName(carry)
    enriched = enrich(rows, settings.slo_lag, settings.slo_time_s, settings.gap_factor, boundary)
    enriched = enriched.persist(StorageLevel.MEMORY_AND_DISK)
    run_partials = pt.hour_partials(enriched, settings.slo_lag).persist(StorageLevel.MEMORY_AND_DISK)
    # Kept: the incidents table and the state's incidents and carry all read it, and each would otherwise
    # run the incidents' window pass over every sample read again (one row per incident: small).
    groups = inc.incident_groups(enriched, boundary).persist(StorageLevel.MEMORY_AND_DISK)
    run_incidents = inc.incidents(groups, boundary)

    kept = [p for p in state.parts if p not in st.expired(state, first_ms)] if state else []
    old_hours = _read_parts(spark, state_uri or "", kept, "hours")
    hours = [pt.spacing_view(run_partials, final=False)]
    if old_hours is not None:
        hours.append(old_hours.filter(F.col("hour_ms") >= first_ms) if first_ms is not None else old_hours)
    # Hash-partitioned by topic before the merge: the merge keeps that partitioning, so every table grouped by topic,
    # partition or partition-day aggregates the cached rows without another shuffle (a Spark job fewer each).
    merged = pt.merge(_union(hours).repartition(*t.SERIES_TOPIC)).persist(StorageLevel.MEMORY_AND_DISK)
    sketches = _sketches(spark, state_uri, state, kept, run_partials, first_ms)
    days = t.series_days(merged, sketches).persist(StorageLevel.MEMORY_AND_DISK)
    gaps = [t.sampling_gaps(enriched)]
    incidents = [run_incidents.drop("final")]
    old_gaps = _read_parts(spark, state_uri or "", kept, "gaps")
    old_incidents = _read_parts(spark, state_uri or "", kept, "incidents")
    if old_gaps is not None and old_incidents is not None:
        lookback = F.timestamp_millis(F.lit(first_ms or 0))
        gaps.append(old_gaps.filter(F.col("gap_start") >= lookback))
        incidents.append(old_incidents.filter(F.col("start") >= lookback))
    info: dict[str, Any] = {
        "state": settings.state_uri,
        "as_of": as_of,
        "read_from": read_from,
        "rows_read": None,  # filled in by the job from its first collect (``read_from_ms``)
        "state_parts": len(kept),
        "boundary": datetime.fromtimestamp(boundary / 1000, UTC) if boundary is not None else None,
    }
    done = Summarised(
        merged,
        days,
        _union(gaps),
        _union(incidents),
        files,
        info,
        read_from_ms,
        cached=[enriched, run_partials, merged, days, groups],
    )
    if incremental and state_uri and as_of_ms is not None and boundary is not None:
        done.commit = lambda: _commit(
            spark,
            fs,
            state_uri,
            state,
            replaced,
            kept,
            key,
            as_of_ms,
            boundary,
            enriched,
            run_partials,
            sketches,
            groups,
            run_incidents,
        )
    return done


def _write_sketches(
    folder: str, old: st.State | None, boundary: int, sketches: DataFrame, run_partials: DataFrame
) -> int | None:
    """Write the part's ``days`` (the days this run closed: their sketches merged once, from the state's hour
    sketches and this run's hours) and, if its boundary is inside a day, that day's closed hours' sketches from this
    run (``hour_sketches``). Returns that open day, or None."""
    day_end = F.col("day_ms") + DAY_MS
    closing = (day_end <= boundary) & (day_end > F.lit(old.boundary_ms if old else -(2**62)))
    days = pt.merge_sketches(sketches.filter(closing), [*SERIES_KEYS, "day_ms"])
    write_sketch_table(days, f"{folder}/days")
    open_day = boundary // DAY_MS * DAY_MS
    if open_day == boundary:  # at midnight: no hour of the open day is closed yet
        return None
    own = pt.sketch_rows(run_partials).filter((F.col("hour_ms") >= open_day) & (F.col("hour_ms") < boundary))
    write_sketch_table(own, f"{folder}/hour_sketches")
    return open_day


def _commit(
    spark: SparkSession,
    fs: HadoopFS,
    uri: str,
    old: st.State | None,
    replaced: set[str],
    kept: list[st.Part],
    key: dict[str, float | int],
    as_of_ms: int,
    boundary: int,
    enriched: DataFrame,
    run_partials: DataFrame,
    sketches: DataFrame,
    groups: DataFrame,
    run_incidents: DataFrame,
) -> None:
    """Write this run's part (what it closed, and the new boundary samples), then ``state.json``."""
    name = f"run-{as_of_ms}-{int(time.time() * 1000)}"
    folder = f"{uri}/{name}"
    closed = pt.spacing_view(run_partials, final=True).filter(F.col("hour_ms") < boundary)
    closed.coalesce(1).write.mode("overwrite").parquet(f"{folder}/hours")
    own_open_day = _write_sketches(folder, old, boundary, sketches, run_partials)
    final_gaps = enriched.filter(~F.col("deferred") & (F.col("ts_ms") < boundary))
    t.sampling_gaps(final_gaps).coalesce(1).write.mode("overwrite").parquet(f"{folder}/gaps")
    run_incidents.filter("final").drop("final").coalesce(1).write.mode("overwrite").parquet(f"{folder}/incidents")
    carry = enriched.filter("deferred").select(*CARRY_COLUMNS)
    carry = carry.join(inc.carried_partials(groups), SERIES_KEYS, "left")
    carry.coalesce(1).write.mode("overwrite").parquet(f"{folder}/carry")
    # An older part's hour sketches go once their day is closed: this run's ``days`` holds them merged.
    superseded = [p for p in kept if p.open_day_ms is not None and not st.day_open(p.open_day_ms, boundary)]
    parts = [replace(p, open_day_ms=None) if p in superseded else p for p in kept]
    new = st.State(boundary, as_of_ms, key, [*parts, st.Part(name, boundary, own_open_day)], name)
    st.save(fs, uri, new)
    for p in superseded:
        fs.delete(f"{uri}/{p.name}/hour_sketches")
    dropped = ({p.name for p in (old.parts if old else [])} | replaced) - {p.name for p in new.parts}
    if old and old.carry and old.carry not in {p.name for p in new.parts}:
        dropped.add(old.carry)
    for gone in dropped:
        fs.delete(f"{uri}/{gone}")
