"""Offset translation through offset syncs (pure: no I/O).

A sync (U, D) says: source offset U is on the target at offset D. A consumer group that committed C on the
source (C = next offset it will read) has consumed everything below C. On the target it may resume at D + 1
for the newest sync with U < C: records U+1 … C−1 are re-delivered (duplicates, at most C−1−U of them), and
nothing is skipped. When U + 1 == C the translation is exact. Without a sync below C there is no safe answer.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass

from ..core.records import OffsetSync


@dataclass(frozen=True)
class Translation:
    topic: str
    partition: int
    upstream_committed: int  # the group's offset on the source
    downstream_offset: int  # where to resume on the target
    duplicates: int  # records re-delivered at most by resuming there (0 = exact)


class OffsetSyncStore:
    """Recent syncs per source partition, kept sorted by upstream offset (bounded per partition)."""

    def __init__(self, per_partition: int = 2000):
        self._limit = per_partition
        self._upstream: dict[tuple[str, int], list[int]] = defaultdict(list)
        self._downstream: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.latest: dict[tuple[str, int], OffsetSync] = {}

    def add(self, sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        self.latest[key] = sync
        if not sync.mapped:  # a position report only
            return
        ups, downs = self._upstream[key], self._downstream[key]
        if ups and sync.upstream_offset <= ups[-1]:
            # the mirror restarted from an older commit and re-sent: the newer mapping wins from here on
            cut = bisect.bisect_left(ups, sync.upstream_offset)
            del ups[cut:], downs[cut:]
        ups.append(sync.upstream_offset)
        downs.append(sync.downstream_offset)
        if len(ups) > self._limit:
            # keep the newest syncs dense and thin the older half, so far-behind groups still translate
            half = len(ups) // 2
            ups[:half] = ups[:half:2]
            downs[:half] = downs[:half:2]

    def translate(self, topic: str, partition: int, committed: int) -> Translation | None:
        key = (topic, partition)
        ups = self._upstream.get(key)
        if not ups:
            return None
        i = bisect.bisect_left(ups, committed) - 1  # newest sync with upstream < committed
        if i < 0:
            return None
        upstream, downstream = ups[i], self._downstream[key][i]
        return Translation(topic, partition, committed, downstream + 1, committed - 1 - upstream)

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self.latest)
