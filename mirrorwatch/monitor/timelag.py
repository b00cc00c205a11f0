"""Time lag: the age of the oldest source record not yet on the target (the record at ``acked_next``).

Two modes (``monitor.time_lag_mode``):

- ``exact``: read that one record's timestamp from the source (:class:`RecordTimestampReader`, an
  assign()-only consumer, no group, nothing committed). Error: the record timestamp's own (CreateTime is
  the producer's clock; LogAppendTime the broker's), plus the age of the sample (≤ one interval).
- ``interpolate``: for users who may not read data. The monitor keeps sampled (source_end, time) pairs per
  partition and estimates when the record at ``acked_next`` was produced, as Kafka Lag Exporter does:
  record ``o`` with ``end_i ≤ o < end_{i+1}`` was produced in ``(t_i, t_{i+1}]``; linear interpolation puts
  it inside that interval, so the error is at most one sampling interval (less under steady traffic, up to
  the whole interval under bursts). A record older than the oldest pair is extrapolated backwards at the
  table's average rate and is at least ``now − t_oldest`` old; that estimate is a lower bound.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt
from confluent_kafka import Consumer, TopicPartition

from ..core.rpo import rpo_seconds

log = logging.getLogger("mirrorwatch.monitor.timelag")


def produced_at(points: Sequence[tuple[int, int]], offset: int) -> tuple[float | None, bool]:
    """Estimated production time (ms) of the record at ``offset`` from (end_offset, ts_ms) pairs, oldest first.

    Returns (time, is_lower_bound_estimate). (None, False) when the record did not exist at the newest pair
    (nothing is behind) or there are no pairs.
    """
    if not points or offset >= points[-1][0]:
        return None, False
    if offset < points[0][0]:
        (e0, t0), (e1, t1) = points[0], points[-1]
        if e1 > e0 and t1 > t0:
            per_record = (t1 - t0) / (e1 - e0)
            return t0 - (e0 - offset) * per_record, True
        return float(t0), True
    for (e0, t0), (e1, t1) in zip(points, points[1:]):
        if e0 <= offset < e1:
            return t0 + (offset - e0 + 1) / (e1 - e0) * (t1 - t0), False
    return None, False  # unreachable with non-decreasing ends; ends that fell (topic recreated) give no answer


def time_lag_interpolated(points: Sequence[tuple[int, int]], acked_next: int | None, now_ms: int) -> float | None:
    """Seconds; 0 when nothing is behind; None when unknown."""
    if acked_next is None or acked_next < 0 or not points:
        return None
    at, _bound = produced_at(points, acked_next)
    if at is None:
        return 0.0
    return float(rpo_seconds([1], [at], now_ms)[0])  # the RPO's one arithmetic (docs/metrics.md)


def arrival_age_bound(
    samples: Iterable[tuple[int, npt.ArrayLike]], acked_next: npt.ArrayLike, now_ms: int
) -> np.ndarray:
    """Seconds the record at ``acked_next`` can at most have been on the source, per partition (inf = no bound).

    ``samples``: earlier (ts_ms, source_end array) pairs, oldest first. At the newest sample whose source end
    was ≤ ``acked_next`` that record was not on the source yet, so it arrived after that sample's time. The
    sampler caps the exact time lag with this: a record created long before it reached the source (queued in a
    slow producer after a burst) is old by its CreateTime, but the mirror can only have kept it from the
    target since it arrived. Both are upper bounds of that time, so their minimum is too.
    """
    acked = np.asarray(acked_next, np.int64)
    out = np.full(acked.shape, np.inf)
    for ts_ms, end in samples:
        end = np.asarray(end, np.int64)
        if end.shape != acked.shape:
            continue  # another partition layout
        out[(end >= 0) & (acked >= 0) & (end <= acked)] = max(0.0, (now_ms - ts_ms) / 1000.0)
    return out


class OffsetTimeTable:
    """Per-partition (source_end, time) pairs for interpolation, at most ``size`` of them."""

    def __init__(self, size: int = 60):
        self.size = size
        self._points: dict[tuple[str, int], deque[tuple[int, int]]] = {}

    def add(self, key: tuple[str, int], end: int, ts_ms: int) -> None:
        if end < 0:
            return
        points = self._points.get(key)
        if points is None:
            points = self._points[key] = deque(maxlen=self.size)
        if points and end < points[-1][0]:
            points.clear()  # the log went backwards (topic recreated): old pairs describe another log
        if len(points) >= 2 and points[-1][0] == end and points[-2][0] == end:
            # a quiet partition: keep when this end was first seen and move "last seen" forward, which keeps
            # both the older records' interval and the next records' interval as tight as the samples allow
            points[-1] = (end, ts_ms)
        else:
            points.append((end, ts_ms))

    def points(self, key: tuple[str, int]) -> list[tuple[int, int]]:
        return list(self._points.get(key, ()))


class RecordTimestampReader:
    """Reads the timestamp of one record per partition (exact time lag), caching by (topic, partition, offset):
    the record at an offset never changes, so a stuck mirror costs one read, not one per cycle."""

    def __init__(self, consumer_factory: Callable[[], Consumer], timeout_s: float = 5.0, cache_size: int = 100_000):
        self._factory = consumer_factory
        self._consumer: Consumer | None = None
        self._timeout_s = timeout_s
        self._cache: dict[tuple[str, int, int], int] = {}
        self._cache_size = cache_size

    def timestamps(self, wanted: Iterable[tuple[str, int, int]]) -> dict[tuple[str, int, int], int]:
        """{(topic, partition, offset): ts_ms of the first record at or after offset}; missing = not read."""
        wanted = list(wanted)
        out = {k: self._cache[k] for k in wanted if k in self._cache}
        todo = {(t, p): o for t, p, o in wanted if (t, p, o) not in out}
        if not todo:
            return out
        if self._consumer is None:
            self._consumer = self._factory()
        consumer = self._consumer
        consumer.assign([TopicPartition(t, p, o) for (t, p), o in todo.items()])
        deadline = time.monotonic() + self._timeout_s
        try:
            while todo and time.monotonic() < deadline:
                for msg in consumer.consume(min(len(todo), 1000), 0.5):
                    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                    if msg.error() or topic is None or partition is None or offset is None:
                        continue
                    key = (topic, partition)
                    if key in todo and offset >= todo[key]:
                        _kind, ts = msg.timestamp()
                        out[(key[0], key[1], todo[key])] = ts
                        self._remember((key[0], key[1], todo.pop(key)), ts)
                        consumer.incremental_unassign([TopicPartition(*key)])
        finally:
            consumer.unassign()
        return out

    def _remember(self, key: tuple[str, int, int], ts: int) -> None:
        if len(self._cache) >= self._cache_size:
            self._cache.clear()  # crude but bounded; entries are cheap to re-read
        self._cache[key] = ts

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
