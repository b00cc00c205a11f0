"""Burrow-style evaluation of a consumer group's committed offsets (DESIGN.md rules, in that order).

Two implementations of the same rules:
- :func:`partition_status` evaluates one partition's window given as plain Python values. It is the readable
  reference, used by the tests' rule table and by nothing that must be fast.
- :class:`WindowSet` keeps every partition's window of one group in fixed-size numpy arrays and evaluates all
  of them at once, so a cycle over 100,000 partitions costs a few milliseconds and no per-partition objects.
  The tests run the same table through both and compare them on random windows.

How sampling stands in for Burrow's commit stream. Burrow sees every commit (from ``__consumer_offsets``);
the monitor samples committed offsets every interval instead, and the admin API gives no commit time. A
sample is *stored* in the window when the committed offset changed, or when the consumer is evidently alive
(the group has members, or for a mirror the engine published a new offset sync) — an alive consumer that
keeps committing the same offset is what Burrow sees as repeated commits (→ STALL); a dead one adds nothing
and its newest stored commit ages (→ STOP). Samples closer than ``min_distance_ms`` to the newest stored one
overwrite it (offset and lag) and keep its time, so a fast committer still fills the window at that pace.

Two known Burrow complaints, handled here:
- lag that only updates on commit: the current lag is recomputed every sample from the *sampled* source end
  offset and the newest committed offset, whether or not a commit arrived;
- false STOP on quiet topics: rule 2 only fires if no recent source end offset was ≤ the newest committed
  offset. "Recent" means within the window's time span: the staleness clock starts at the later of the
  newest commit and the last sample that found the consumer caught up, so a consumer that was idle because
  there was no data gets the same grace from the moment data arrives as it would from a commit.
- a window that spans almost no time (one stored sample, or commits in a burst) would make rule 2 fire on
  any delay: ``stop_grace_ms`` is a floor for the span rule 2 compares with. The sampler sets it to the
  consumer's commit interval (the engine's ``mirror.commit_interval_s``; ``monitor.group_commit_interval_s``
  for plain groups) or ``monitor.stop_grace_s`` if larger: nobody is stopped before missing one commit.
- rules 5 (STALL) and 6 (WARN) need at least two stored samples: one says nothing about movement.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core.status import GroupStatus, PartitionStatus, group_status_of

NEVER = np.iinfo(np.int64).min // 4  # "no such time"; far in the past but safe to subtract from


@dataclass(frozen=True, slots=True)
class Commit:
    """One stored sample of the window: committed offset, when it was stored, lag then (None = unknown)."""

    offset: int
    ts_ms: int
    lag: int | None


def partition_status(
    window: Sequence[Commit],
    current_lag: int | None,
    now_ms: int,
    allowed_lag: int = 0,
    caught_up_ms: int | None = None,
    stop_grace_ms: int = 0,
) -> int:
    """The partition status code for a window (oldest first). Reference implementation of DESIGN.md's rules."""
    if not window:
        return PartitionStatus.OK  # nothing stored yet: nothing to judge
    if current_lag is None:
        current_lag = window[-1].lag
    # 1. caught up (within the allowed lag) now
    if current_lag is not None and current_lag <= allowed_lag:
        return PartitionStatus.OK
    # 2. stopped: silent for longer than the window spans, and not merely idle on a quiet topic
    newest, oldest = window[-1].ts_ms, window[0].ts_ms
    since = max(newest, caught_up_ms if caught_up_ms is not None else newest)
    if now_ms - since > max(newest - oldest, stop_grace_ms):
        return PartitionStatus.STOP
    # 3. rewound, unless a later offset climbed back to the pre-rewind offset
    offsets = [c.offset for c in window]
    for i in range(1, len(offsets)):
        if offsets[i] < offsets[i - 1] and max(offsets[i:]) < offsets[i - 1]:
            return PartitionStatus.REWIND
    # 4. lag was within the allowance somewhere in the window
    known = [c.lag for c in window if c.lag is not None]
    if any(lag <= allowed_lag for lag in known):
        return PartitionStatus.OK
    # 5. and 6. judge movement over time, which one stored sample cannot show
    if len(window) < 2:
        return PartitionStatus.OK
    # 5. stalled: the offset never moved
    if all(o == offsets[0] for o in offsets):
        return PartitionStatus.STALL
    # 6. lag never strictly decreases between consecutive known lags
    if all(b >= a for a, b in zip(known, known[1:])):
        return PartitionStatus.WARN
    return PartitionStatus.OK


class WindowSet:
    """The windows of ``size`` partitions of one group, evaluated together.

    Layout: arrays of shape (window, size) — one row per window slot, one column per partition, newest slot
    last, unfilled slots first. Rules then run as ``window`` whole-row numpy operations over contiguous
    memory into preallocated buffers (a Python loop of 10, not of 100,000), and storing a sample for every
    partition is one memmove. Unfilled offsets and unknown lags are -1 (real ones are ≥ 0), so the rewind and
    WARN tests need no masks: -1 never exceeds a real value.
    """

    def __init__(self, size: int, window: int, min_distance_ms: int = 0, allowed_lag: int = 0, stop_grace_ms: int = 0):
        if window < 2:
            raise ValueError("window must hold at least 2 samples")
        self.size, self.window = size, window
        self.min_distance_ms, self.allowed_lag = int(min_distance_ms), int(allowed_lag)
        self.stop_grace_ms = int(stop_grace_ms)
        self.offsets = np.full((window, size), -1, np.int64)
        self.times = np.zeros((window, size), np.int64)
        self.lags = np.full((window, size), -1, np.int64)
        self.count = np.zeros(size, np.int64)
        self.caught_up = np.full(size, NEVER, np.int64)
        self.current_lag = np.full(size, -1, np.int64)
        self.status = np.zeros(size, np.int8)
        self._cols = np.arange(size)
        # scratch buffers reused by every evaluate()
        self._i64 = np.empty((2, size), np.int64)
        self._b = np.empty((6, size), bool)

    # ------------------------------------------------------------------ update

    def observe(
        self,
        ts_ms: int,
        committed: np.ndarray,
        source_end: np.ndarray,
        alive: bool | np.ndarray,
        repeat_after_ms: int = 0,
    ) -> None:
        """One sample of every partition: committed offsets and source end offsets (-1 = unknown).

        ``alive`` (bool or bool array): the consumer is evidently running, so an unchanged offset counts as a
        repeated commit — once ``repeat_after_ms`` (its commit interval) has passed since the newest stored
        sample: sampling faster than the consumer commits must not invent repeated commits (false STALL).
        """
        committed = np.asarray(committed, np.int64)
        source_end = np.asarray(source_end, np.int64)
        has = committed >= 0
        newest = self.offsets[-1]
        filled = self.count > 0
        changed = has & (~filled | (committed != newest))
        repeated = has & filled & np.asarray(alive, bool) & (ts_ms - self.times[-1] >= repeat_after_ms)
        store = changed | repeated
        close = store & filled & (ts_ms - self.times[-1] < self.min_distance_ms)
        shift = store & ~close
        rewound = has & filled & (committed < newest)
        lag_now = np.where(has & (source_end >= 0), np.maximum(source_end - committed, 0), -1)

        if shift.all():  # the common case: every partition gets a sample; one memmove per array
            for arr in (self.offsets, self.times, self.lags):
                arr[:-1] = arr[1:]
            self.offsets[-1] = committed
            self.times[-1] = ts_ms
            self.lags[-1] = lag_now
            np.minimum(self.count + 1, self.window, out=self.count)
        elif shift.any():
            idx = np.flatnonzero(shift)
            for arr in (self.offsets, self.times, self.lags):
                arr[:-1, idx] = arr[1:, idx]
            self.offsets[-1, idx] = committed[idx]
            self.times[-1, idx] = ts_ms
            self.lags[-1, idx] = lag_now[idx]
            self.count[idx] = np.minimum(self.count[idx] + 1, self.window)
        if close.any():
            idx = np.flatnonzero(close)
            self.offsets[-1, idx] = committed[idx]
            self.lags[-1, idx] = lag_now[idx]
        # after a rewind the old "caught up" moment says nothing about the new offset
        self.caught_up[rewound] = NEVER

        filled = self.count > 0
        newest = self.offsets[-1]
        end_known = filled & (source_end >= 0)
        # current lag from the sampled end offset, every sample (not only when a commit arrives)
        self.current_lag[:] = np.where(end_known, np.maximum(source_end - newest, 0), self.lags[-1])
        self.caught_up[end_known & (source_end <= newest)] = ts_ms

    # ---------------------------------------------------------------- evaluate

    def evaluate(self, now_ms: int) -> np.ndarray:
        """Status code of every partition (the rules of :func:`partition_status`); returns ``self.status``."""
        w, allowed = self.window, self.allowed_lag
        off, lags, times, count = self.offsets, self.lags, self.times, self.count
        run, tmp = self._i64
        stop, rewind, any_low, moved, decrease, scratch = self._b

        # rule 2: silent (since the later of newest commit and last caught-up sample) longer than the span
        oldest_ts = times[np.minimum(w - count, w - 1), self._cols]
        np.subtract(times[-1], oldest_ts, out=tmp)
        np.maximum(tmp, self.stop_grace_ms, out=tmp)
        np.maximum(times[-1], self.caught_up, out=run)
        np.subtract(now_ms, run, out=run)
        np.greater(run, tmp, out=stop)

        # rule 3: an unrecovered rewind at slot i means max(off[i:]) < off[i-1] (walk from the newest slot)
        rewind.fill(False)
        run[:] = off[-1]
        for i in range(w - 1, 0, -1):
            np.maximum(run, off[i], out=run)
            np.less(run, off[i - 1], out=scratch)
            rewind |= scratch

        # rule 4: some known lag within the allowance;  rule 5: offsets never moved;
        # rule 6: known lags never strictly decrease, i.e. each is ≥ the running max of those before it
        np.greater_equal(lags[0], 0, out=any_low)
        any_low &= lags[0] <= allowed
        moved.fill(False)
        decrease.fill(False)
        run[:] = lags[0]
        for i in range(1, w):
            lag_i = lags[i]
            np.less_equal(lag_i, allowed, out=scratch)
            scratch &= lag_i >= 0
            any_low |= scratch
            np.not_equal(off[i], off[i - 1], out=scratch)
            # the step from an unfilled slot into the first filled one is not a move
            scratch &= off[i - 1] >= 0
            moved |= scratch
            np.less(lag_i, run, out=scratch)
            scratch &= lag_i >= 0
            decrease |= scratch
            np.maximum(run, lag_i, out=run)

        # apply the rules from last to first, so the first that fires wins
        status = self.status
        status.fill(PartitionStatus.OK)
        judged = count >= 2  # rules 5 and 6 judge movement over time, which one sample cannot show
        status[~decrease & judged] = PartitionStatus.WARN
        status[~moved & judged] = PartitionStatus.STALL
        status[any_low] = PartitionStatus.OK
        status[rewind] = PartitionStatus.REWIND
        status[stop] = PartitionStatus.STOP
        cur = self.current_lag
        status[((cur >= 0) & (cur <= allowed)) | (count == 0)] = PartitionStatus.OK
        return status

    # ----------------------------------------------------------------- reshape

    def remapped(self, old_keys: Sequence[Hashable], new_keys: Sequence[Hashable]) -> WindowSet:
        """A WindowSet for ``new_keys`` keeping the state of partitions whose key is also in ``old_keys``."""
        fresh = WindowSet(len(new_keys), self.window, self.min_distance_ms, self.allowed_lag, self.stop_grace_ms)
        where = {k: i for i, k in enumerate(old_keys)}
        pairs = [(j, where[k]) for j, k in enumerate(new_keys) if k in where]
        if pairs:
            dst, src = (np.array(x, np.int64) for x in zip(*pairs))
            for name in ("offsets", "times", "lags"):
                getattr(fresh, name)[:, dst] = getattr(self, name)[:, src]
            for name in ("count", "caught_up", "current_lag"):
                getattr(fresh, name)[dst] = getattr(self, name)[src]
        return fresh

    def memory_bytes(self) -> int:
        arrays = (
            self.offsets,
            self.times,
            self.lags,
            self.count,
            self.caught_up,
            self.current_lag,
            self.status,
            self._cols,
            self._i64,
            self._b,
        )
        return sum(a.nbytes for a in arrays)


@dataclass(frozen=True, slots=True)
class GroupSummary:
    status: int  # group status code (status.G_*)
    complete: float  # share of partitions whose window is full
    totallag: int
    maxlag_row: int | None  # row of the partition with the largest current lag
    maxlag: int


def summarize(ws: WindowSet, statuses: np.ndarray) -> GroupSummary:
    if ws.size == 0:
        return GroupSummary(GroupStatus.OK, 0.0, 0, None, 0)
    status = group_status_of(statuses)
    lag = ws.current_lag
    known = lag >= 0
    total = int(lag[known].sum()) if known.any() else 0
    row = int(np.argmax(lag)) if known.any() else None  # ties: the first row (topic, partition order) wins
    return GroupSummary(
        status, float((ws.count == ws.window).mean()), total, row, int(lag[row]) if row is not None else 0
    )
