"""Reading a flow's offset-syncs topic on the target: the reader of the mirror's checkpoints and (through
``mirror.checkpoints.read_offset_syncs``) the failover tools. The monitor follows the topic with a tracker of its
own (``monitor/syncs.py`` says why).

An assign()-only consumer (no group joined, nothing committed: readers must not show up as a consumer group or
move anybody's offsets) reads every partition from its start. ``catch_up`` reads what arrived since the last call,
up to the ends as they are now (a one-shot tool calls it once, the checkpoint emitter every interval). The topic
may appear, or grow partitions, after the reader starts: its partitions are looked up again on every call before
there are any, and every ``recheck_s`` after that.
Tombstones are skipped (compaction of a partition that is gone); undecodable records are counted and skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, KafkaException, Message, TopicPartition

from .access import is_denied
from .clients import make_consumer
from .config import ClusterConfig
from .reading import end_offsets, read_to_end
from .records import OffsetSync, RecordFormatError

log = logging.getLogger("mirrorwatch.core.offset_syncs")


class OffsetSyncReader:
    def __init__(
        self,
        cluster: ClusterConfig,
        topic: str,
        on_sync: Callable[[OffsetSync], None],
        client_id: str = "mirrorwatch-syncs-reader",
        group_id: str | None = None,
        recheck_s: float = 10.0,
    ):
        self.topic = topic
        self.on_sync = on_sync
        self.bad_records = 0
        self.recheck_s = recheck_s
        # partition EOF events mark a compacted tail as read (read_to_end); reconnect quickly after an outage; a
        # short fetch long-poll, because catch_up() asks each partition's end on this fetching consumer and every
        # such query waits behind the poll (core.reading.end_offsets)
        self._consumer = make_consumer(
            cluster,
            client_id,
            group_id=group_id,
            **{"enable.partition.eof": True, "reconnect.backoff.max.ms": 2000, "fetch.wait.max.ms": 50},
        )
        self._positions: dict[tuple[str, int], int] = {}  # next offset per assigned partition
        self._next_check = 0.0

    @property
    def partitions(self) -> int:
        return len(self._positions)

    def catch_up(self, timeout_s: float = 10.0) -> bool:
        """Read what arrived since the last call, up to the topic's current end (bounded by ``timeout_s``).
        True when every partition was read to its end (False: no such topic yet, or the time ran out)."""
        deadline = time.monotonic() + timeout_s
        if not self._assign_new_partitions(timeout_s):
            return False
        try:
            ends = end_offsets(self._consumer, list(self._positions), max(0.1, deadline - time.monotonic()))
        except KafkaException as exc:
            log.debug("offset syncs %s: end offsets: %s", self.topic, exc)
            return False
        for msg in read_to_end(self._consumer, self._positions, max(0.0, deadline - time.monotonic()), ends):
            self._apply(msg)
        return all(self._positions[key] >= end for key, end in ends.items())

    def close(self) -> None:
        self._consumer.close()

    def _assign_new_partitions(self, timeout_s: float) -> bool:
        """Assign partitions of the topic not yet assigned; True when any are assigned."""
        if self._positions and time.monotonic() < self._next_check:
            return True
        self._next_check = time.monotonic() + self.recheck_s
        try:
            md = self._consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
        except Exception as exc:  # a cluster away for a while: read what we have, try again later
            log.debug("offset syncs %s: listing partitions failed: %s", self.topic, exc)
            return bool(self._positions)
        if md is not None and md.error is not None and is_denied(md.error):
            raise KafkaException(md.error)  # not "no syncs yet": the principal may not see the topic (no DESCRIBE)
        count = len(md.partitions) if md is not None and md.error is None else 0
        new = [p for p in range(count) if (self.topic, p) not in self._positions]
        if new:
            self._consumer.incremental_assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in new])
            self._positions.update({(self.topic, p): 0 for p in new})
        return bool(self._positions)

    def _apply(self, msg: Message) -> None:
        value = msg.value()
        if value is None:
            return  # a tombstone: compaction of a partition that is gone; keep what we have
        try:
            self.on_sync(OffsetSync.from_value(value))
        except RecordFormatError as exc:
            self.bad_records += 1
            log.warning("skipping a bad offset sync at %s[%d]@%d: %s", self.topic, msg.partition(), msg.offset(), exc)
