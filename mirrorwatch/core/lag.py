"""Lag math: committed, read and true lag of a mirror, the target cross-check, and the catch-up forecast.

In core because it has more than one caller: the monitor (every figure it publishes, for both engines) and
``mirror failover check`` (true lag and records lost at the moment of a failover), which may import only core.

Pure functions over numpy arrays (one element per partition, ``-1`` = unknown) so a cycle over many
partitions is a handful of vector operations.

Positions, from oldest to newest on the source log::

    committed  ≤  acked_next  ≤  read_position  ≤  source_end

- ``committed``: the mirror group's committed offset on the source (the engine commits only what the target
  acknowledged, so committed ≤ acked);
- ``acked_next``: last source offset surely on the target + 1: from the newest OffsetSync, and under the prefix
  policy from the target's end offset read through it (:func:`target_side_acked_next`);
- ``read_position``: the engine's next fetch offset, from the same OffsetSync.

The sync and the commit are sampled separately and either may be the newer. A commit implies an ack, so the
monitor uses ``acked = max(sync.acked_next, committed)`` and ``read = max(sync.read_position, acked)``. With
the source end sampled *after* both, every lag is ≥ 0 and ``read_lag ≤ true_lag ≤ committed_lag`` holds on
every sample by construction — a stale sync can make true lag over-report (never under-report relative to
the commit) and is exact again at the next sync.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class Lags:
    committed_lag: np.ndarray
    read_lag: np.ndarray
    true_lag: np.ndarray
    acked_next: np.ndarray  # effective: max(sync.acked_next, committed)
    read_position: np.ndarray  # effective: max(sync.read_position, acked)


def _a(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, np.int64)


def _lag(end: np.ndarray, pos: np.ndarray) -> np.ndarray:
    # an empty partition (end 0) has nothing to mirror: lag 0 even before any commit or sync exists for it
    return np.where(end == 0, 0, np.where((end >= 0) & (pos >= 0), np.maximum(end - pos, 0), UNKNOWN))


def mirror_lags(
    source_end: ArrayLike, committed: ArrayLike, sync_acked_next: ArrayLike, sync_read_position: ArrayLike
) -> Lags:
    """The three lags of each partition from the sampled positions (-1 = unknown)."""
    end, com, acked, read = _a(source_end), _a(committed), _a(sync_acked_next), _a(sync_read_position)
    acked = np.maximum(acked, com)  # -1 loses to any known value
    read = np.where(acked >= 0, np.maximum(read, acked), read)
    return Lags(_lag(end, com), _lag(end, read), _lag(end, acked), acked, read)


def plain_lag(source_end: ArrayLike, committed: ArrayLike) -> np.ndarray:
    """A watched (non-mirror) group: committed lag only, as Burrow and kafka-consumer-groups show."""
    return _lag(_a(source_end), _a(committed))


def target_side_acked_next(
    source_end: ArrayLike,
    committed: ArrayLike,
    sync_upstream: ArrayLike,
    sync_downstream: ArrayLike,
    sync_acked_next: ArrayLike,
    target_end: ArrayLike,
    one_to_one: ArrayLike = True,
    transactional: ArrayLike = False,
) -> np.ndarray:
    """A fresh, never-too-high ``acked_next`` per partition from the target's end offset (-1 = unknown).

    The newest OffsetSync says source offset ``u = sync_upstream`` sits on the target at ``d = sync_downstream``
    and everything below ``sync_acked_next`` is acknowledged. It is up to one sync interval old; the target's end
    offset ``T`` (sampled *before* ``source_end``) is fresh. Where the target partition holds only this mirror's
    copies, written in source order and one-to-one after ``d`` (``one_to_one``: the prefix policy, with the
    engine, before it sends anything of a partition assigned anew, publishing a sync without a mapping (``u`` and
    ``d`` -1, so this falls back to the positions) and then one for its first record: re-sent duplicates never
    sit after the newest ``d``, as long as the syncs are read after ``T``), the ``T − d − 1`` records after ``d``
    are the next source records after ``u``; source offsets are distinct and increasing, so the last of them is at
    offset ≥ ``u + (T − d − 1)`` and::

        acked_next_est = max(committed, sync_acked_next, min(u + (T − d), source_end))  ≤  true acked_next

    Bound: the estimate is low (lag over-reported) by the source offsets after ``u`` that carry no record on the
    target — transaction markers, aborted records, offsets compacted away — between ``u`` and the true
    ``acked_next``, i.e. the gaps since the newest sync (≤ one commit interval / ``offset_sync_every`` records
    of them); 0 on a source without gaps. Where ``one_to_one`` is False (identity: other writers share the
    target partition) the target end proves nothing and the sync-only value ``max(committed, sync_acked_next)``
    is returned. Capped at ``source_end``; an unknown ``T``/``u``/``d`` also falls back to the sync-only value.

    ``transactional`` (the target is written in transactions: our engine's ``delivery: exactly_once``, MirrorMaker 2
    with exactly-once source support; ``core.delivery.transactional_target``): ``target_end`` is then the last
    stable offset (a copy at or above it is not yet readable by a ``read_committed`` reader), and every transaction leaves a commit
    marker in the partition, and an aborted one leaves records no ``read_committed`` reader sees, each taking an
    offset. ``T − d`` then counts markers and aborted records as copies, so ``u + (T − d)`` could pass the true
    ``acked_next`` and under-report lag. There the target end is used only to prove the synced record itself is
    still there (``T > d``): ``max(committed, sync_acked_next, u + 1)``. ``u + 1`` is never too high: MM2 sends a
    sync from ``commitRecord``, which its exactly-once task calls only after the transaction committed (connect-runtime
    ``ExactlyOnceWorkerSourceTask.commitTransaction``), and our engine's sync claims ``acked_next ≥ u + 1`` itself;
    ``T > d`` with ``T`` the last stable offset proves the synced copy readable, not only written. Our engine's
    syncs and source commits claim only records of transactions whose markers are written (mirror/transactions.py
    holds them back one transaction), so ``committed`` and ``sync_acked_next`` are readable too.
    Bound: the estimate is as old as the newer of the sync and the commit (lag over-reported by what was mirrored
    since), never newer than the truth; exact again when the mirror is idle.
    """
    end, com, up, down = _a(source_end), _a(committed), _a(sync_upstream), _a(sync_downstream)
    acked, tend = _a(sync_acked_next), _a(target_end)
    conservative = np.maximum(acked, com)  # -1 loses to any known value
    usable = np.asarray(one_to_one, bool) & (up >= 0) & (down >= 0) & (tend > down)
    # past d, a transactional target's offsets are not all copies: only the synced record itself is proven there
    from_target = up + np.where(np.asarray(transactional, bool), 1, tend - down)
    from_target = np.where(end >= 0, np.minimum(from_target, end), from_target)
    return np.asarray(np.where(usable, np.maximum(conservative, from_target), conservative))


def records_lost(log_start: ArrayLike, position: ArrayLike) -> np.ndarray:
    """Records removed from the source before they reached where they were going: ``log_start − position`` where
    the position is below the log start (retention, DeleteRecords, a recreated topic), else 0; -1 unknown.

    The position is what the group surely has: for a mirror, ``acked_next`` (what the target surely holds: the
    monitor and ``mirror failover check`` both pass it, so a mirror whose commit trails its acknowledgements is
    not charged for records that are on the target); for a plain group, its committed offset.
    Counted in offsets: a removed transaction marker counts as a record (the count is exact on plain topics)."""
    start, com = _a(log_start), _a(position)
    return np.where((start >= 0) & (com >= 0), np.maximum(start - com, 0), UNKNOWN)


def target_behind(target_end: ArrayLike, sync_downstream: ArrayLike) -> np.ndarray:
    """True where the target's end offset is not past the record the newest sync says is there.

    A sync says source offset ``upstream_offset`` sits at ``downstream_offset`` on the target, so the target
    must end beyond ``downstream_offset``. This is the check that cannot give a false alarm; a stricter
    "downstream + (acked_next − upstream)" would, because source compaction and transaction markers leave
    source offsets with no target record. It catches a target that lost data (truncation, an unclean leader
    election, a recreated topic) that the sync still claims. On a transactional target the end offset also counts
    markers and aborted records: the check stays free of false alarms there and catches a loss that reaches back
    to ``downstream_offset`` itself.
    """
    end, down = _a(target_end), _a(sync_downstream)
    return (end >= 0) & (down >= 0) & (end <= down)


# ----------------------------------------------------------------------------- forecast


def rate(old_value: ArrayLike, old_ts_ms: int, new_value: ArrayLike, new_ts_ms: int) -> np.ndarray:
    """Records per second between two samples (NaN where either value is unknown or no time passed)."""
    old, new = _a(old_value), _a(new_value)
    dt = (new_ts_ms - old_ts_ms) / 1000.0
    if dt <= 0:
        return np.full(np.shape(new), np.nan)
    return np.where((old >= 0) & (new >= 0), (new - old) / dt, np.nan)


def catch_up_seconds(
    lag: ArrayLike, produce_rate: ArrayLike, mirror_rate: ArrayLike, keeping_up_lag: ArrayLike = 0
) -> np.ndarray:
    """Forecast time to catch up: lag / (mirror rate − produce rate); 0 when caught up; +inf when the mirror
    is not gaining on the producers; NaN when unknown.

    A mirror keeping pace with steady traffic holds a small lag it never "gains" on (the two rates are equal):
    where the lag is at most ``keeping_up_lag`` (the sampler passes the records produced in one monitor
    interval, which is also how much the lag figures may over-report) the forecast is the time the mirror
    needs for that lag at its own rate, ``lag / mirror rate``, not "not catching up"."""
    lag = np.asarray(lag, np.float64)
    mirror = np.asarray(mirror_rate, np.float64)
    gain = mirror - np.asarray(produce_rate, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        steady = (lag <= np.asarray(keeping_up_lag, np.float64)) & (mirror > 0)
        out = np.where(gain > 0, lag / gain, np.where(steady, lag / mirror, math.inf))
    out = np.where(np.isnan(gain), np.nan, out)
    out = np.where(lag == 0, 0.0, out)
    return np.where(lag < 0, np.nan, out)


def describe_forecast(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds):
        return "unknown"
    if math.isinf(seconds):
        return "not catching up"
    if seconds == 0:
        return "caught up"
    return f"~{format_duration(seconds)}"


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


# ----------------------------------------------------------------------------- a flow's own figures


@dataclass(frozen=True, slots=True)
class FlowFigures:
    """A flow's figures from its partitions', computed once per cycle (:func:`flow_figures`): the HTTP API's
    totals, the exporter's flow series, ``monitor lag``'s TOTAL line, the recent figures and the page all read
    these. None = no partition's value is known."""

    committed_lag: int | None  # sums of the partitions' known values
    read_lag: int | None
    true_lag: int | None
    records_lost: int | None
    rpo_seconds: float | None  # the flow's RPO: its worst partition's time lag (the oldest record not on the target)


def _known_sum(values: np.ndarray | None) -> int | None:
    if values is None:
        return None
    known = values[values >= 0]
    return int(known.sum()) if len(known) else None


def flow_figures(
    committed_lag: np.ndarray | None,
    read_lag: np.ndarray | None,
    true_lag: np.ndarray | None,
    records_lost: np.ndarray | None,
    time_lag_s: np.ndarray | None,
) -> FlowFigures:
    """The flow's figures: lags and records lost summed over the partitions that know theirs (-1 = unknown), and
    RPO as the largest known time lag (NaN = unknown)."""
    rpo = None
    if time_lag_s is not None and len(time_lag_s) and not np.isnan(time_lag_s).all():
        rpo = float(np.nanmax(time_lag_s))
    return FlowFigures(
        _known_sum(committed_lag), _known_sum(read_lag), _known_sum(true_lag), _known_sum(records_lost), rpo
    )


def slowest_catch_up(topic_catch_up_s: dict[str, float]) -> float | None:
    """The flow's catch-up forecast: its slowest topic's (+inf when one is not catching up); None when no topic's
    forecast is known. ``monitor lag``'s TOTAL line and the exporter's flow-level series read it."""
    known = [s for s in topic_catch_up_s.values() if not math.isnan(s)]
    return max(known) if known else None
