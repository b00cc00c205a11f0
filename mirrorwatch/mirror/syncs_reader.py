"""Reading a flow's offset-syncs topic on the target into an OffsetSyncStore (assign()-only, no group)."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, TopicPartition

from ..core.clients import make_consumer
from ..core.config import ClusterConfig
from ..core.records import OffsetSync, RecordFormatError
from .offset_store import OffsetSyncStore

log = logging.getLogger("mirrorwatch.mirror.syncs")


class OffsetSyncReader:
    def __init__(self, cluster: ClusterConfig, topic: str, store: OffsetSyncStore | None = None):
        self.topic = topic
        self.store = store or OffsetSyncStore()
        self._consumer = make_consumer(cluster, "mirrorwatch-syncs-reader", **{"enable.partition.eof": True})
        self._assigned = False

    def catch_up(self, timeout_s: float = 10.0) -> OffsetSyncStore:
        """Read everything up to the topic's current end offsets (bounded by ``timeout_s``).

        The end is taken from the watermarks at the start of the call: waiting for end-of-partition events
        instead would wait the whole timeout whenever a partition got nothing new since the last call (the
        event comes once per arrival at the end), which made checkpoints run every ~10 s whatever their interval."""
        if not self._assigned:
            md = self._consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
            if md is None or md.error is not None:
                return self.store  # no syncs yet
            self._partitions = sorted(md.partitions)
            self._consumer.assign([TopicPartition(self.topic, p, 0) for p in self._partitions])
            self._next = {p: 0 for p in self._partitions}
            self._assigned = True
        ends = {p: self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=timeout_s)[1]
                for p in self._partitions}
        deadline = time.monotonic() + timeout_s
        while any(self._next[p] < end for p, end in ends.items()) and time.monotonic() < deadline:
            for msg in self._consumer.consume(1000, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:  # the end (past compacted tails or markers)
                        self._next[msg.partition()] = max(self._next[msg.partition()], msg.offset())
                    continue
                self._next[msg.partition()] = msg.offset() + 1
                try:
                    self.store.add(OffsetSync.from_value(msg.value()))
                except RecordFormatError as exc:
                    log.warning("skipping a bad offset sync at %s[%d]@%d: %s", self.topic, msg.partition(), msg.offset(), exc)
        return self.store

    def close(self) -> None:
        self._consumer.close()
