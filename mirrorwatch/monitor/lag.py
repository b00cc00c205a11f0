"""Lag math: committed, read and true lag of a mirror, the target cross-check, and the catch-up forecast.

Pure functions over numpy arrays (one element per partition, ``-1`` = unknown) so a cycle over many
partitions is a handful of vector operations; :func:`mirror_lag` is the same math for one partition.

Positions, from oldest to newest on the source log::

    committed  ≤  acked_next  ≤  read_position  ≤  source_end

- ``committed``: the mirror group's committed offset on the source (the engine commits only what the target
  acknowledged, so committed ≤ acked);
- ``acked_next``: last source offset acknowledged by the target + 1, from the newest OffsetSync;
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


def mirror_lags(source_end: ArrayLike, committed: ArrayLike, sync_acked_next: ArrayLike,
                sync_read_position: ArrayLike) -> Lags:
    """The three lags of each partition from the sampled positions (-1 = unknown)."""
    end, com, acked, read = _a(source_end), _a(committed), _a(sync_acked_next), _a(sync_read_position)
    acked = np.maximum(acked, com)  # -1 loses to any known value
    read = np.where(acked >= 0, np.maximum(read, acked), read)
    return Lags(_lag(end, com), _lag(end, read), _lag(end, acked), acked, read)


def plain_lag(source_end: ArrayLike, committed: ArrayLike) -> np.ndarray:
    """A watched (non-mirror) group: committed lag only, as Burrow and kafka-consumer-groups show."""
    return _lag(_a(source_end), _a(committed))


def mirror_lag(source_end: int | None, committed: int | None, sync_acked_next: int | None,
               sync_read_position: int | None) -> tuple[int | None, int | None, int | None]:
    """(committed_lag, read_lag, true_lag) of one partition; None = unknown."""
    def known(v: int | None) -> int:
        return UNKNOWN if v is None else v

    def lag(v: np.int64) -> int | None:
        return None if v < 0 else int(v)

    lags = mirror_lags([known(source_end)], [known(committed)], [known(sync_acked_next)], [known(sync_read_position)])
    return lag(lags.committed_lag[0]), lag(lags.read_lag[0]), lag(lags.true_lag[0])


def target_behind(target_end: ArrayLike, sync_downstream: ArrayLike) -> np.ndarray:
    """True where the target's end offset is not past the record the newest sync says is there.

    A sync says source offset ``upstream_offset`` sits at ``downstream_offset`` on the target, so the target
    must end beyond ``downstream_offset``. This is the check that cannot give a false alarm; a stricter
    "downstream + (acked_next − upstream)" would, because source compaction and transaction markers leave
    source offsets with no target record. It catches a target that lost data (truncation, an unclean leader
    election, a recreated topic) that the sync still claims.
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


def catch_up_seconds(lag: ArrayLike, produce_rate: ArrayLike, mirror_rate: ArrayLike) -> np.ndarray:
    """Forecast time to catch up: lag / (mirror rate − produce rate); 0 when caught up; +inf when the mirror
    is not gaining on the producers; NaN when unknown."""
    lag = np.asarray(lag, np.float64)
    gain = np.asarray(mirror_rate, np.float64) - np.asarray(produce_rate, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(gain > 0, lag / gain, math.inf)
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
