"""Checkpoints: source consumer groups' committed offsets translated to the target (MirrorMaker 2's idea).

Every interval: catch up on offset syncs, list the source groups matching the flow's checkpoint regexes,
translate their committed offsets conservatively (never past what is known to be on the target), write
Checkpoint records to the checkpoints topic on the target, and with ``sync_group_offsets`` also commit them
for the group on the target, but only while that group is not active there and only forward.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from ..core.access import Denied, is_denied, raise_if_denied
from ..core.clients import make_admin, make_producer
from ..core.config import ClusterConfig, Config, FlowConfig
from ..core.coordinator_calls import CoordinatorCalls, for_cluster
from ..core.naming import checkpoints_topic, mirror_group, offset_syncs_topic
from ..core.offset_syncs import OffsetSyncReader
from ..core.records import Checkpoint, OffsetSync, RecordFormatError
from ..core.topic_selection import TopicFilter, policy_of
from .failover.reads import CannotTell, group_is_active, read_whole_topic
from .offset_store import OffsetSyncStore, Translation

log = logging.getLogger("mirrorwatch.mirror.checkpoints")


def read_offset_syncs(
    cluster: ClusterConfig, topic: str, alias: str = "target", timeout_s: float = 20.0
) -> OffsetSyncStore:
    """The offset syncs on the target now (one-shot, for the failover tools): all of them, or CannotTell.
    Tombstones and undecodable records are skipped, as the engine's reader skips them."""
    store = OffsetSyncStore()
    for msg in read_whole_topic(cluster, alias, topic, "mirrorwatch-failover", timeout_s):
        value = msg.value()
        if value is None:
            continue
        try:
            store.add(OffsetSync.from_value(value))
        except RecordFormatError:
            log.warning("skipping a bad offset sync at %s[%d]@%d", topic, msg.partition(), msg.offset())
    return store


ADMIN_TIMEOUT_S = 30


def source_groups(admin: AdminClient, flow: FlowConfig, exclude: set[str]) -> list[str]:
    patterns = [re.compile(p) for p in flow.checkpoint_groups]
    listing = admin.list_consumer_groups().result(ADMIN_TIMEOUT_S)
    return sorted(
        g.group_id
        for g in listing.valid
        if g.group_id not in exclude
        and not g.group_id.startswith("mirrorwatch")
        and any(p.fullmatch(g.group_id) for p in patterns)
    )


def committed_offsets(
    admin: AdminClient, group: str, calls: CoordinatorCalls | None = None
) -> dict[tuple[str, int], int]:
    """``calls``: the cluster's coordinator-call helper, for the long-lived checkpointer (librdkafka 2.16 can abort
    the process on this request when a broker drops); one-shot commands ask directly."""
    # confluent-kafka 2.16 crashes the process in list_consumer_group_offsets when the group coordinator is
    # not there yet (a fresh cluster without __consumer_offsets): only ask for a group the cluster lists
    if not group_exists(admin, group):
        return {}
    if calls is not None:
        return calls.committed_offsets(group, ADMIN_TIMEOUT_S)
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request)[group].result(ADMIN_TIMEOUT_S)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def translate_group(store: OffsetSyncStore, committed: dict[tuple[str, int], int]) -> list[Translation]:
    out = []
    for (topic, partition), offset in sorted(committed.items()):
        translation = store.translate(topic, partition, offset)
        if translation is not None:
            out.append(translation)
    return out


def apply_offsets(
    admin: AdminClient,
    group: str,
    offsets: dict[tuple[str, int], int],
    forward_only: bool,
    calls: CoordinatorCalls | None = None,
) -> int:
    """Commit offsets for ``group`` (topic names as on that cluster). Returns how many were written."""
    if forward_only:
        current = committed_offsets(admin, group, calls)
        offsets = {k: v for k, v in offsets.items() if v > current.get(k, -1)}
    if not offsets:
        return 0
    if calls is not None:
        return calls.alter_offsets(group, offsets, ADMIN_TIMEOUT_S)
    tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(ADMIN_TIMEOUT_S)
    return len(tps)


def group_exists(admin: AdminClient, group: str) -> bool:
    listing = admin.list_consumer_groups().result(ADMIN_TIMEOUT_S)
    if any(g.group_id == group for g in listing.valid):
        return True
    if listing.errors:
        # a broker that did not answer may be the one that knows the group: not "no such group"
        raise CannotTell(f"whether group '{group}' exists", f"listing consumer groups failed: {listing.errors[0]}")
    return False


def all_checkpoints(
    cluster: ClusterConfig, source: str, alias: str = "target", timeout_s: float = 30
) -> dict[str, dict[tuple[str, int], Checkpoint]]:
    """group → (topic, partition) → newest checkpoint, from the checkpoints topic on the target: all of it, or
    CannotTell (a partial read could leave a partition without its checkpoint, or with an older one)."""
    out: dict[str, dict[tuple[str, int], Checkpoint]] = {}
    for msg in read_whole_topic(cluster, alias, checkpoints_topic(source), "mirrorwatch-failover-check", timeout_s):
        try:
            cp = Checkpoint.from_value(msg.value())
        except RecordFormatError:
            continue
        out.setdefault(cp.group, {})[(cp.topic, cp.partition)] = cp
    return out


class CheckpointEmitter(threading.Thread):
    """Checkpoints for the groups that consume the flow's topics, every ``checkpoint_interval_s``.

    ``owned`` (from the engine) gives the source partitions this worker mirrors now: with several workers in a
    flow, each checkpoints only its own partitions, so together they cover the flow once."""

    def __init__(
        self,
        config: Config,
        flow_name: str,
        owned: Callable[[], AbstractSet[tuple[str, int]]] | None = None,
        all_up: Callable[[], bool] | None = None,
        on_denied: Callable[[Denied], None] | None = None,
    ):
        super().__init__(name="checkpoints", daemon=True)
        self.owned = owned
        self.all_up = all_up or (
            lambda: True
        )  # the engine's cluster watch: while a cluster is away, retries are not news
        self.on_denied = on_denied
        self.flow_name, self.flow = config.flow(flow_name)
        self.topic_filter = TopicFilter.of(config, self.flow)  # another flow of this pair shares the offset-syncs topic
        self.interval_s = config.mirror.checkpoint_interval_s
        self.policy = policy_of(self.flow)
        self.own_group = mirror_group(self.flow.source, self.flow.target, self.flow.group, self.flow_name)
        self.source_admin = make_admin(config.clusters[self.flow.source], "mirrorwatch-checkpoints")
        self.target_admin = make_admin(config.clusters[self.flow.target], "mirrorwatch-checkpoints")
        # group describes and offsets through each cluster's coordinator-call helper (core.coordinator_calls)
        self.source_calls = for_cluster(config.clusters[self.flow.source])
        self.target_calls = for_cluster(config.clusters[self.flow.target])
        self.store = OffsetSyncStore()
        self.reader = OffsetSyncReader(
            config.clusters[self.flow.target], offset_syncs_topic(self.flow.source), self.store.add
        )
        self.producer = make_producer(config.clusters[self.flow.target], "mirrorwatch-checkpoints", **{"acks": "all"})
        self.topic = checkpoints_topic(self.flow.source)
        self._stopping = threading.Event()  # not _stop: threading.Thread.join calls its own _stop()
        self.emitted = 0
        self.admin_timeout_s = float(ADMIN_TIMEOUT_S)  # how long the group sync waits to learn a group is idle

    def run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            try:
                self.emit_once()
            except Denied as denied:
                if self.on_denied is None:
                    raise
                self.on_denied(denied)
                return
            except Exception as exc:  # a cluster away: checkpoints resume when it returns
                log.log(
                    logging.WARNING if self.all_up() else logging.DEBUG, "checkpointing failed (will retry): %s", exc
                )
        self.producer.flush(5)

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None and is_denied(err) and self.on_denied is not None:
            self.on_denied(Denied("WRITE", "topic", self.topic, "target"))

    def emit_once(self) -> int:
        try:
            self.reader.catch_up()
        except Exception as exc:
            raise_if_denied(exc, "READ", "topic", self.reader.topic, "target")
            raise
        store = self.store
        mirrored = {topic for topic, _ in store.partitions() if self.topic_filter.matches(topic)}
        now = int(time.time() * 1000)
        count = 0
        owned = self.owned() if self.owned is not None else None
        for group in source_groups(self.source_admin, self.flow, {self.own_group}):
            committed = {
                k: v
                for k, v in committed_offsets(self.source_admin, group, self.source_calls).items()
                if k[0] in mirrored and (owned is None or k in owned)
            }
            translations = translate_group(store, committed)
            for t in translations:
                cp = Checkpoint(
                    group, t.topic, t.partition, t.upstream_committed, t.downstream_offset, now, t.duplicates
                )
                self.producer.produce(self.topic, key=cp.key(), value=cp.to_value(), on_delivery=self._delivered)
                count += 1
            if self.flow.sync_group_offsets and translations:
                self._sync_group(group, translations)
        self.producer.flush(10)
        self.emitted += count
        return count

    def _sync_group(self, group: str, translations: list[Translation]) -> None:
        """Commit the translated offsets for ``group`` on the target, only while nobody consumes with it there;
        when that cannot be told, this round leaves the group alone and says why."""
        try:
            if group_is_active(self.target_admin, group, self.flow.target, self.admin_timeout_s, self.target_calls):
                return
        except CannotTell as exc:
            log.warning("not syncing group %s's offsets to the target this round: %s", group, exc)
            return
        apply_offsets(
            self.target_admin,
            group,
            {(self.policy.target_topic(t.topic), t.partition): t.downstream_offset for t in translations},
            forward_only=True,
            calls=self.target_calls,
        )

    def stop(self) -> None:
        self._stopping.set()
