"""The monitor's topic followers: each keeps the newest record per key of one topic, read continuously with an
assign()-only consumer (no group, nothing committed: the monitor must not show up as a consumer group or move
anybody's offsets). They follow our offset syncs, MirrorMaker 2's syncs, Connect offsets, Connect configs and
heartbeats, and both engines' checkpoints (for coverage): each with its own decoder. (It was named
OffsetSyncTracker, after the first topic it followed.)

A long-lived follower with its own loop, not core.offset_syncs.OffsetSyncReader (the one-shot readers' reader):
built on that reader, the tracker of MirrorMaker 2's 25-partition Connect offsets topic never caught up in the
real-MM2 tests (all positions stayed 0 for 20 s), so the monitor keeps this follower, which is caught up once
it has read each partition's end as of its assignment and tolerates a partition whose end it cannot ask."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from ..core.clients import make_consumer
from ..core.config import ClusterConfig
from ..core.records import OffsetSync, RecordFormatError

log = logging.getLogger("mirrorwatch.monitor.followers")

# confluent-kafka 2.16 refuses a Consumer without group.id even for assign()-only use. The monitor's readers
# assign(), never subscribe() and never commit, so this group is never joined and never has offsets.
UNUSED_GROUP = "mirrorwatch-monitor-assign-only"


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
TP = tuple[str, int]
Decoder = Callable[[Message], tuple[K, V] | None]
"""A follower's decoder: a record's (key, value), None to skip it, or RecordFormatError."""


def our_sync(msg: Message) -> tuple[TP, OffsetSync]:
    """The decoder of mirrorwatch's own offset syncs, keyed by source partition."""
    sync = OffsetSync.from_value(msg.value())
    return (sync.topic, sync.partition), sync


class TopicFollower(Generic[K, V]):
    """The newest record per key of a compacted topic. ``decode(msg)`` gives (key, value), None to skip a record,
    or raises RecordFormatError (:func:`our_sync` for mirrorwatch's OffsetSyncs keyed by source partition; every
    other topic the monitor follows comes with its own decoder)."""

    def __init__(
        self,
        cluster: ClusterConfig,
        topic: str,
        client_id: str,
        decode: Decoder[K, V],
        keep: Callable[[V], bool] | None = None,
    ) -> None:
        self.topic = topic
        self._decode = decode
        self._keep = keep  # also keeps the newest record per key that this accepts (kept())
        self._kept: dict[K, V] = {}
        self._cluster, self._client_id = cluster, client_id
        self._latest: dict[K, V] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._partitions = 0
        self._targets: dict[int, int] = {}  # partition → end offset when assigned (for caught_up)
        self.caught_up = threading.Event()  # set once everything present at start-up has been read
        self.bad_records = 0

    def start(self) -> TopicFollower[K, V]:
        self._thread = threading.Thread(target=self._run, name=f"syncs-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def latest(self) -> dict[K, V]:
        with self._lock:
            return dict(self._latest)

    def kept(self) -> dict[K, V]:
        """The newest record per key that ``keep`` accepted (an older one when the newest was not accepted)."""
        with self._lock:
            return dict(self._kept)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        consumer = make_consumer(
            self._cluster,
            self._client_id,
            group_id=UNUSED_GROUP,
            **{"enable.partition.eof": False, "reconnect.backoff.max.ms": 2000},
        )
        try:
            while not self._stop.is_set():
                if not self._assign_new_partitions(consumer):
                    self._stop.wait(1.0)
                    continue
                for msg in consumer.consume(1000, 0.5):
                    error = msg.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            log.debug("offset syncs: %s", error)
                        continue
                    self._apply(msg)
                    partition, offset = msg.partition(), msg.offset()
                    if partition is not None and offset is not None and self._targets.get(partition, -1) <= offset + 1:
                        self._targets.pop(partition, None)
                if not self._targets:
                    self.caught_up.set()
        except Exception:  # the tracker must never die silently; the sampler reads stale syncs meanwhile
            log.exception("offset sync tracker for %s stopped", self.topic)
        finally:
            consumer.close()

    _next_check = 0.0

    def _assign_new_partitions(self, consumer: Consumer) -> bool:
        """Assign partitions of the topic not yet assigned (the topic may appear or grow later)."""
        import time

        if self._partitions and time.monotonic() < self._next_check:
            return True
        self._next_check = time.monotonic() + 10.0
        try:
            md = consumer.list_topics(self.topic, timeout=5).topics.get(self.topic)
        except Exception:
            return self._partitions > 0
        count = len(md.partitions) if md is not None and md.error is None else 0
        if count == 0:
            self.caught_up.set()  # the cluster answered: no such topic yet, so nothing present at start-up to read
        if count > self._partitions:
            for p in range(self._partitions, count):
                try:
                    low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=5)
                except Exception:
                    low = high = 0
                if high > low:
                    self._targets[p] = high
            consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self._partitions, count)]
            )
            self._partitions = count
        return self._partitions > 0

    def _apply(self, msg: Message) -> None:
        if msg.value() is None:
            return  # a tombstone: compaction of a partition that is gone; keep what we have
        try:
            decoded = self._decode(msg)
        except RecordFormatError:
            self.bad_records += 1
            return
        if decoded is None:
            return
        with self._lock:
            self._latest[decoded[0]] = decoded[1]  # log order: the later record is the newer
            if self._keep is not None and self._keep(decoded[1]):
                self._kept[decoded[0]] = decoded[1]
