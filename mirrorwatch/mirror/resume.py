"""At-least-once: where a newly assigned partition resumes (a mixin's helpers for ``rebalances.py``).

The later of two positions, both durable: the mirror group's commit on the source, and the target's own record of
progress, the newest offset sync of the partition (``acked_next``: everything below it was acknowledged by the
target when the sync was written, and syncs are written after acknowledgements, every ``offset_sync_every``
records and every sync interval). The commit alone is not enough: while the source's group coordinator is away
(the broker frozen, cut off) commits fail but records flow and syncs are written on the target; a mirror killed
then would send everything since its last successful commit again. From the sync, it sends again at most what was
acknowledged since the newest sync, plus what was in flight. MirrorMaker 2 keeps its positions on the target for
the same reason.

A sync is trusted only where it still describes this partition: ``acked_next`` not past the source's end (a
topic deleted and created again starts its offsets anew) and its downstream copy still on the target (the target
partition's end past it: a target topic created again). Anything unread or unclear falls back to the commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from ..core.config import ClusterConfig
from ..core.offset_syncs import OffsetSyncReader
from ..core.records import OffsetSync

log = logging.getLogger("mirrorwatch.mirror")

Key = tuple[str, int]
SYNCS_TAIL = 20_000  # the newest records of each offset-syncs partition read back on an assignment
READ_TIMEOUT_S = 5.0  # within a rebalance callback: what is not read by then falls back to the commit


@dataclass(frozen=True)
class Resume:
    position: int  # the next source offset to send; -1: the commit is unknown and no sync holds (the caller's rule)
    from_sync: bool  # True when the offset sync is later than the commit


def resume_position(
    committed: int, sync_acked_next: int, sync_downstream: int, source_end: int, target_end: int
) -> Resume:
    """The later of the commit and the sync, where the sync still describes the partition (pure; -1 = unknown)."""
    sync_holds = (
        sync_acked_next >= 0
        and sync_downstream >= 0
        and 0 <= sync_acked_next <= source_end
        and target_end > sync_downstream
    )
    if sync_holds and sync_acked_next > committed:
        return Resume(sync_acked_next, True)
    return Resume(committed, False)


def newest_syncs(cluster: ClusterConfig, topic: str, keys: list[Key]) -> dict[Key, OffsetSync]:
    """The newest offset sync of each of these source partitions among the last SYNCS_TAIL of the topic (what is read
    within READ_TIMEOUT_S: every sync read is valid, a missing one only means more is sent again)."""
    wanted, newest = set(keys), {}

    def keep(sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        if key in wanted and sync.upstream_offset >= 0:
            newest[key] = sync

    reader = OffsetSyncReader(cluster, topic, keep, client_id="mirrorwatch-mirror-resume", tail=SYNCS_TAIL)
    try:
        reader.catch_up(READ_TIMEOUT_S)
    finally:
        reader.close()
    return newest


def target_ends(admin: AdminClient, partitions: list[Key]) -> dict[Key, int]:
    """End offsets of these target partitions (-1 where unread)."""
    if not partitions:
        return {}
    futures = admin.list_offsets(
        {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions},  # type: ignore[no-untyped-call]
        request_timeout=READ_TIMEOUT_S,
    )
    out: dict[Key, int] = {}
    for tp, future in futures.items():
        try:
            out[(tp.topic, tp.partition)] = int(future.result(READ_TIMEOUT_S + 1).offset)
        except Exception as exc:  # unread: that partition's sync is not trusted
            log.debug("target end of %s[%d]: %s", tp.topic, tp.partition, exc)
            out[(tp.topic, tp.partition)] = -1
    return out
