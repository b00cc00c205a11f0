"""Keeps the newest OffsetSync per source partition, following the offset-syncs topic on the target cluster
(core.offset_syncs.OffsetSyncReader: assign()-only, no group, nothing committed) on a thread of its own."""

from __future__ import annotations

import logging
import threading
from typing import Any

from confluent_kafka import Message

from ..core.config import ClusterConfig
from ..core.offset_syncs import OffsetSyncReader
from ..core.records import OffsetSync

log = logging.getLogger("mirrorwatch.monitor.syncs")

# confluent-kafka 2.16 refuses a Consumer without group.id even for assign()-only use. The monitor's readers
# assign(), never subscribe() and never commit, so this group is never joined and never has offsets.
UNUSED_GROUP = "mirrorwatch-monitor-assign-only"


def _our_sync(msg):
    sync = OffsetSync.from_value(msg.value())
    return (sync.topic, sync.partition), sync


class OffsetSyncTracker:
    """The newest record per key of a compacted topic. ``decode(msg)`` gives (key, value), None to skip a record,
    or raises RecordFormatError; by default the records are mirrorwatch's OffsetSyncs keyed by source partition
    (MirrorMaker 2's syncs, Connect offsets and heartbeats use the same tracker with their own decoder)."""

    def __init__(self, cluster: ClusterConfig, topic: str, client_id: str = "mirrorwatch-monitor-syncs", decode=None):
        self.topic = topic
        self._decode = decode or _our_sync
        self._cluster, self._client_id = cluster, client_id
        self._latest: dict[tuple[str, int], Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reader: OffsetSyncReader | None = None
        self.caught_up = threading.Event()  # set once everything present at start-up has been read

    @property
    def bad_records(self) -> int:
        return self._reader.bad_records if self._reader is not None else 0

    def start(self) -> OffsetSyncTracker:
        self._thread = threading.Thread(target=self._run, name=f"syncs-{self.topic}", daemon=True)
        self._thread.start()
        return self

    def latest(self) -> dict[tuple[str, int], Any]:
        with self._lock:
            return dict(self._latest)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        reader = self._reader = OffsetSyncReader(
            self._cluster,
            self.topic,
            lambda _sync: None,
            self._client_id,
            UNUSED_GROUP,
            on_message=self._keep,
            raise_denied=False,
        )
        try:
            while not self._stop.is_set() and not self.caught_up.is_set():
                if reader.catch_up(5.0):
                    self.caught_up.set()
                elif not reader.partitions:
                    self._stop.wait(1.0)  # no topic yet
            while not self._stop.is_set():
                reader.poll(0.5)
        except Exception:  # the tracker must never die silently; the sampler reads stale syncs meanwhile
            log.exception("offset sync tracker for %s stopped", self.topic)
        finally:
            reader.close()

    def _keep(self, msg: Message) -> None:
        decoded = self._decode(msg)
        if decoded is None:
            return
        with self._lock:
            self._latest[decoded[0]] = decoded[1]  # log order: the later record is the newer
