"""Reading a flow's offset-syncs topic on the target into an OffsetSyncStore (assign()-only, no group)."""

from __future__ import annotations

import logging

from confluent_kafka import KafkaException, TopicPartition

from ..core.access import is_denied
from ..core.clients import make_consumer
from ..core.config import ClusterConfig
from ..core.reading import read_to_end
from ..core.records import OffsetSync, RecordFormatError
from .offset_store import OffsetSyncStore

log = logging.getLogger("mirrorwatch.mirror.syncs")


class OffsetSyncReader:
    def __init__(self, cluster: ClusterConfig, topic: str, store: OffsetSyncStore | None = None):
        self.topic = topic
        self.store = store or OffsetSyncStore()
        self._consumer = make_consumer(cluster, "mirrorwatch-syncs-reader", **{"enable.partition.eof": True})
        self._positions: dict[tuple[str, int], int] | None = None  # next offset per partition, once assigned

    def catch_up(self, timeout_s: float = 10.0) -> OffsetSyncStore:
        """Read what arrived since the last call, up to the topic's current end (bounded by ``timeout_s``)."""
        if self._positions is None:
            md = self._consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
            if md is not None and md.error is not None and is_denied(md.error):
                raise KafkaException(md.error)  # not "no syncs yet": the principal may not see the topic
            if md is None or md.error is not None:
                return self.store  # no syncs yet
            self._positions = {(self.topic, p): 0 for p in md.partitions}
            self._consumer.assign([TopicPartition(self.topic, p, 0) for p in md.partitions])
        for msg in read_to_end(self._consumer, self._positions, timeout_s):
            try:
                self.store.add(OffsetSync.from_value(msg.value()))
            except RecordFormatError as exc:
                log.warning("skipping a bad offset sync at %s[%d]@%d: %s", self.topic, msg.partition(), msg.offset(), exc)
        return self.store

    def close(self) -> None:
        self._consumer.close()
