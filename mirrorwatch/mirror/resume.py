"""At-least-once: where a newly assigned partition resumes (a mixin's helpers for ``rebalances.py``).

The later of two positions, both durable: the mirror group's commit on the source, and the target's own record of
progress, the newest offset sync of the partition (``acked_next``: everything below it was acknowledged by the
target when the sync was written, and syncs are written after acknowledgements, every ``offset_sync_every``
records and every sync interval). The commit alone is not enough: while the source's group coordinator is away
(the broker frozen, cut off) commits fail but records flow and syncs are written on the target; a mirror killed
then would send everything since its last successful commit again. From the sync, it sends again at most what was
acknowledged since the newest sync, plus what was in flight. MirrorMaker 2 keeps its positions on the target for
the same reason. A partition that left this process without a hand-over (lost: the coordinator was away past the
session; or the consumer replaced) is remembered with how far the target acknowledged it, once its records in flight
are reported (``rebalances._set_aside``); assigned here again, it resumes after them too (``known_progress``).

A sync is trusted only where it still describes this partition: ``acked_next`` not past the source's end (a
topic deleted and created again starts its offsets anew) and its downstream copy still on the target (the target
partition's end past it: a target topic created again). Anything unread or unclear falls back to the commit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from ..core.clients import list_offsets_fresh, make_consumer
from ..core.config import ClusterConfig
from ..core.reading import read_to_end
from ..core.records import OffsetSync, RecordFormatError

log = logging.getLogger("mirrorwatch.mirror")

Key = tuple[str, int]
SYNCS_TAIL = 20_000  # at most this many of the newest records of each offset-syncs partition read back
SYNCS_WINDOW = 2_000  # read back this many at a time, newest first
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


Progress = tuple[int, int]  # (acked_next, the downstream offset of the newest acknowledged record)


def known_progress(sync: OffsetSync | None, set_aside: Progress | None) -> Progress | None:
    """The later of what the newest offset sync and this process's own record of a partition that left it say the
    target acknowledged (pure); None when neither is known. Both are facts about the target, whoever wrote it."""
    seen = [(sync.acked_next, sync.downstream_offset)] if sync is not None else []
    if set_aside is not None:
        seen.append(set_aside)
    return max(seen) if seen else None


def newest_syncs(cluster: ClusterConfig, topic: str, keys: list[Key]) -> dict[Key, OffsetSync]:
    """The newest offset sync of each of these source partitions, read backwards from the topic's end in windows of
    SYNCS_WINDOW records until each has one, SYNCS_TAIL records back at most, within READ_TIMEOUT_S. The newest
    window comes first, so a read cut short by the time still has the newest syncs (the topic is shared by every
    flow from the source: reading a long tail forwards, a slow read ended on old ones)."""
    wanted, newest = set(keys), dict[Key, OffsetSync]()
    deadline = time.monotonic() + READ_TIMEOUT_S
    consumer = make_consumer(cluster, "mirrorwatch-mirror-resume", None, **{"enable.partition.eof": True})
    try:
        meta = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        for partition in meta.partitions:
            try:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=READ_TIMEOUT_S)
            except KafkaException as exc:  # its leader moving: the partitions it holds syncs of use their commits
                log.warning("offset syncs %s[%d] unread (%s)", topic, partition, exc)
                continue
            end = high
            while end > max(low, high - SYNCS_TAIL) and wanted - set(newest) and time.monotonic() < deadline:
                start = max(low, end - SYNCS_WINDOW)
                found = _window(consumer, topic, partition, start, end, deadline)
                for key, sync in found.items():  # a newer window's sync wins over an older one's
                    if key in wanted:
                        newest.setdefault(key, sync)
                end = start
    finally:
        consumer.close()
    return newest


def _window(
    consumer: Consumer, topic: str, partition: int, start: int, end: int, deadline: float
) -> dict[Key, OffsetSync]:
    """The newest sync per source partition among offsets [start, end) of one partition of the syncs topic."""
    consumer.assign([TopicPartition(topic, partition, start)])
    found: dict[Key, OffsetSync] = {}
    positions = {(topic, partition): start}
    for msg in read_to_end(consumer, positions, max(0.0, deadline - time.monotonic()), {(topic, partition): end}):
        value, offset = msg.value(), msg.offset()
        if value is None or offset is None or offset >= end:
            continue
        try:
            sync = OffsetSync.from_value(value)
        except RecordFormatError:
            continue
        if sync.mapped:
            found[(sync.topic, sync.partition)] = sync
    consumer.unassign()
    return found


def end_offsets(admin: AdminClient, partitions: list[Key]) -> dict[Key, int]:
    """End offsets of these partitions of the admin client's cluster, in one request (-1 where unread)."""
    if not partitions:
        return {}
    try:
        futures = list_offsets_fresh(
            admin,
            {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions},  # type: ignore[no-untyped-call]
            READ_TIMEOUT_S,
        )
    except KafkaException as exc:  # refused at once (the client's own state): every one unread
        log.debug("end offsets: %s", exc)
        return {key: -1 for key in partitions}
    out: dict[Key, int] = {}
    for tp, future in futures.items():
        try:
            out[(tp.topic, tp.partition)] = int(future.result(READ_TIMEOUT_S + 1).offset)
        except Exception as exc:  # unread: that partition's sync is not trusted
            log.debug("end offset of %s[%d]: %s", tp.topic, tp.partition, exc)
            out[(tp.topic, tp.partition)] = -1
    return out
