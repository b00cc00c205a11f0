"""The mirror engine: consume from the source, produce to the target, commit only what the target acknowledged.

Threads: the data path (consume, produce, delivery reports, commits, offset syncs) runs on the caller's
thread and owns the consumer; a topic thread lists, creates and syncs topics (admin calls block, so they stay
off the data path) and hands new subscriptions over; the heartbeat producer runs on its own.

How acknowledgements find their source offset without a closure per record: the idempotent producer
delivers reports in order per partition, so each partition keeps a FIFO of (source offset, state) it sent and
a report pops the oldest. The FIFO belongs to the producer side and outlives assignments: a report that
arrives after its partition was revoked or lost updates the detached state it was sent for, never the state
of a newer assignment (which would move acked_next past records not yet acknowledged).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ..core.clients import make_admin, make_consumer, make_producer
from ..core.config import Config
from ..core.naming import ReplicationPolicy, mirror_group, offset_syncs_topic
from ..core.records import PROVENANCE_HEADER, OffsetSync
from .heartbeat import HeartbeatProducer, ensure_heartbeats_topic
from .metrics import LatencyHistogram
from .topics import TargetTopics, TopicFilter, list_matching

log = logging.getLogger("mirrorwatch.mirror")


IDLE_FLUSH_S = 0.2  # this long without records (and nothing in flight) is idle: commit and sync exactly


class MirrorFailure(Exception):
    """A record that cannot be written to the target: the engine stopped rather than skip it."""


@dataclass
class PartitionState:
    read_next: int | None = None  # next source offset to fetch
    acked_next: int | None = None  # last source offset acknowledged by the target + 1
    committed: int | None = None  # last offset committed for the mirror group
    pending: int = 0  # records sent for this assignment, not yet acknowledged
    last_upstream: int = -1  # newest acknowledged source offset ...
    last_downstream: int = -1  # ... and its offset on the target
    failed_at: int | None = None  # a record here could not be written: never commit past it
    synced_acked: int | None = None  # acked_next at the last offset sync
    synced_read: int | None = None
    acked_since_sync: int = 0
    records: int = 0
    bytes: int = 0


class MirrorEngine:
    def __init__(self, config: Config, flow_name: str | None = None):
        self.flow_name, self.flow = config.flow(flow_name)
        self.config = config
        self.settings = config.mirror
        self.policy = ReplicationPolicy(self.flow.policy, self.flow.source, self.flow.target, self.flow.separator)
        self.group = mirror_group(self.flow.source, self.flow.target, self.flow.group)
        self.source_cluster = config.clusters[self.flow.source]
        self.target_cluster = config.clusters[self.flow.target]
        self.syncs_topic = offset_syncs_topic(self.flow.source)
        self.origin = self.flow.source.encode()
        self.loop_guard = self.flow.target.encode() if self.flow.policy == "identity" else None

        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.fifos: dict[tuple[str, int], deque] = {}  # (source offset, state) in send order, per partition
        self.target_names: dict[str, str] = {}  # source topic → target topic
        self.source_names: dict[str, str] = {}  # target topic → source topic (delivery reports name the target)
        self._clock = time.time()
        self.latency = LatencyHistogram()
        self.produce_errors: dict[tuple[str, bool], int] = {}
        self.in_flight = 0
        self.rebalances = 0
        self.heartbeats_sent = 0
        self.failures: list[tuple[str, int, int, str, int, KafkaError]] = []  # topic, partition, offset, target, size, error

        self._stop = threading.Event()
        self._pending_subscription: list[str] | None = None
        self._subscription_lock = threading.Lock()
        self._subscribed: list[str] = []

        producer_props = {
            "acks": "all", "enable.idempotence": True, "linger.ms": 5, "batch.size": 1_000_000,
            "queue.buffering.max.messages": max(self.settings.max_in_flight, 100_000),
            "queue.buffering.max.kbytes": 1_048_576, "message.max.bytes": 100_000_000,
            "compression.type": "none",  # the target topic's compression.type applies broker-side
        }
        producer_props.update(self.settings.producer)
        consumer_props = {
            "auto.offset.reset": "earliest", "enable.auto.offset.store": False,
            "partition.assignment.strategy": "cooperative-sticky", "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760, "queued.min.messages": 200_000,
            "topic.metadata.refresh.interval.ms": int(self.settings.refresh_interval_s * 1000),
            # a crashed worker's partitions move after this long (Kafka's default is 45 s)
            "session.timeout.ms": 10_000, "heartbeat.interval.ms": 2_000,
            "on_commit": self._committed,
        }
        if self.settings.instance_id:
            # static membership: a restarted worker with the same id takes its partitions back at once
            consumer_props["group.instance.id"] = self.settings.instance_id
        consumer_props.update(self.settings.consumer)
        self.producer = make_producer(self.target_cluster, f"mirrorwatch-mirror-{self.flow_name}", **producer_props)
        self.consumer = make_consumer(self.source_cluster, f"mirrorwatch-mirror-{self.flow_name}", self.group, **consumer_props)
        self.source_admin = make_admin(self.source_cluster, "mirrorwatch-mirror-admin")
        self.target_admin = make_admin(self.target_cluster, "mirrorwatch-mirror-admin")
        always = {self.settings.heartbeats_topic, config.canary.topic}
        self.topic_filter = TopicFilter(self.flow, self.policy, always)
        self.target_topics = TargetTopics(self.source_admin, self.target_admin, self.policy)
        self.heartbeats: HeartbeatProducer | None = None
        self.checkpoints = None

    # ------------------------------------------------------------------ topics
    def refresh_topics(self, with_configs: bool) -> None:
        topics = list_matching(self.source_admin, self.topic_filter)
        ready = self.target_topics.sync(topics, with_configs)
        for name in ready:
            self._name(name)
        with self._subscription_lock:
            if sorted(ready) != self._subscribed:
                self._pending_subscription = sorted(ready)

    def _name(self, source_topic: str) -> str:
        target_topic = self.policy.target_topic(source_topic)
        self.source_names[target_topic] = source_topic
        self.target_names[source_topic] = target_topic
        return target_topic

    def _topic_loop(self) -> None:
        last_config_sync = time.monotonic()
        while not self._stop.wait(self.settings.refresh_interval_s):
            with_configs = time.monotonic() - last_config_sync >= self.settings.config_sync_interval_s
            try:
                self.refresh_topics(with_configs)
                if with_configs:
                    last_config_sync = time.monotonic()
            except Exception as exc:  # a cluster away for a while: try again next round
                log.warning("topic refresh failed (will retry): %s", exc)

    def _apply_subscription(self) -> None:
        with self._subscription_lock:
            topics, self._pending_subscription = self._pending_subscription, None
        if topics is None:
            return
        added = sorted(set(topics) - set(self._subscribed))
        self._subscribed = topics
        if topics:
            self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
            log.info("mirroring %d topic(s)%s", len(topics), f"; new: {', '.join(added)}" if added else "")

    # ------------------------------------------------------------------ rebalances
    def _on_assign(self, consumer, partitions) -> None:
        # A rebalance callback must never raise: the exception would surface from consume() and end the engine.
        self.rebalances += 1
        if not partitions:
            return
        for tp in partitions:
            state = self.partitions[(tp.topic, tp.partition)] = PartitionState()
            state.read_next = state.acked_next = None  # learned below, or from the first fetched record
        try:
            for tp in consumer.committed(partitions, timeout=30):
                state = self.partitions[(tp.topic, tp.partition)]
                if tp.offset >= 0:
                    state.committed = state.read_next = state.acked_next = tp.offset
                else:
                    low, _ = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
                    state.read_next = state.acked_next = low
        except Exception as exc:  # a cluster restarting: the first fetched record tells where we start
            log.warning("could not look up start positions (%s); taking them from the first records", exc)
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions))

    def _on_revoke(self, consumer, partitions) -> None:
        self.rebalances += 1
        try:
            # hand the partitions over cleanly: everything sent must be acknowledged and committed first
            self._clock = time.time()
            self.producer.flush(30)
            self._commit([(tp.topic, tp.partition) for tp in partitions])
            self._emit_syncs([(tp.topic, tp.partition) for tp in partitions], force=True)
        except Exception as exc:  # never raise from a rebalance callback; the next owner resumes from the commit
            log.warning("handing over revoked partitions: %s", exc)
        for tp in partitions:
            self.partitions.pop((tp.topic, tp.partition), None)

    def _on_lost(self, consumer, partitions) -> None:
        self.rebalances += 1
        for tp in partitions:  # another worker owns them now: committing would be wrong
            self.partitions.pop((tp.topic, tp.partition), None)
        # their in-flight records still get reports; those update the detached states (see the FIFO note)

    # ------------------------------------------------------------------ delivery reports
    def _delivered(self, err, msg) -> None:
        # hot path: one call per record; plain dict lookups and int adds only
        key = (self.source_names[msg.topic()], msg.partition())
        self.in_flight -= 1
        source_offset, state = self.fifos[key].popleft()
        state.pending -= 1
        if err is not None:
            retriable = err.retriable()
            self.produce_errors[(key[0], retriable)] = self.produce_errors.get((key[0], retriable), 0) + 1
            if state.failed_at is None or source_offset < state.failed_at:
                state.failed_at = source_offset
            size = len(msg.value() or b"") + len(msg.key() or b"")
            self.failures.append((key[0], key[1], source_offset, msg.topic(), size, err))
            self._stop.set()
            return
        if state.failed_at is not None:
            return
        state.acked_next = source_offset + 1
        if not state.pending and state.read_next is not None:
            state.acked_next = state.read_next  # records skipped by the loop guard count as handled
        state.last_upstream, state.last_downstream = source_offset, msg.offset()
        state.acked_since_sync += 1
        if state.acked_since_sync >= self.settings.offset_sync_every:
            self._emit_syncs([key])  # dense syncs make checkpoint translation precise
        state.records += 1
        state.bytes += len(msg) + len(msg.key() or b"")
        ts_type, ts = msg.timestamp()
        if ts_type:
            # the clock is read once per poll, not per record: the error is one poll round (milliseconds)
            self.latency.observe(max(0.0, self._clock - ts / 1000.0))

    # ------------------------------------------------------------------ commits and syncs
    def _commit(self, keys=None, sync: bool = True) -> None:
        """Commit what the target acknowledged. Periodic commits under load are asynchronous (a synchronous
        round trip on the data path showed up in p99 latency); idle, revoke and shutdown commits are not."""
        offsets = []
        for key in keys if keys is not None else list(self.partitions):
            state = self.partitions.get(key)
            if state is None or state.acked_next is None:
                continue
            target = state.acked_next if state.failed_at is None else min(state.acked_next, state.failed_at)
            if state.committed is None or target > state.committed:
                offsets.append(TopicPartition(key[0], key[1], target))
        if not offsets:
            return
        if not sync:
            try:  # the outcome arrives in _committed (served inside consume())
                self.consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:
                log.warning("commit failed (will retry): %s", exc.args[0].str() if exc.args else exc)
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            log.warning("commit failed (will retry): %s", exc.args[0].str() if exc.args else exc)
            return
        for tp in offsets:
            state = self.partitions.get((tp.topic, tp.partition))
            if state is not None:
                state.committed = tp.offset

    def _committed(self, err, partitions) -> None:
        """The consumer's commit callback: record what the group coordinator confirmed."""
        if err is not None:
            log.warning("commit failed (will retry): %s", err.str())
            return
        for tp in partitions:
            state = self.partitions.get((tp.topic, tp.partition))
            if tp.error is None and state is not None and (state.committed is None or tp.offset > state.committed):
                state.committed = tp.offset

    def _emit_syncs(self, keys=None, force: bool = False) -> None:
        now = int(time.time() * 1000)
        for key in keys if keys is not None else list(self.partitions):
            state = self.partitions.get(key)
            if state is None or state.acked_next is None:
                continue
            moved = state.acked_next != state.synced_acked or state.read_next != state.synced_read
            if not (moved or force):
                continue
            sync = OffsetSync(key[0], key[1], state.last_upstream, state.last_downstream,
                              state.acked_next, state.read_next if state.read_next is not None else state.acked_next, now)
            self._produce_internal(self.syncs_topic, sync.key(), sync.to_value())
            state.synced_acked, state.synced_read, state.acked_since_sync = state.acked_next, state.read_next, 0

    def _produce_internal(self, topic: str, key: bytes, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value)
                return
            except BufferError:
                self.producer.poll(0.1)

    # ------------------------------------------------------------------ the data path
    def _send(self, messages) -> None:
        produce = self.producer.produce
        delivered = self._delivered
        origin = (PROVENANCE_HEADER, self.origin)
        loop_guard = self.loop_guard
        names = self.target_names
        partitions = self.partitions
        fifos = self.fifos
        for msg in messages:
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                log.warning("consume error: %s", msg.error().str())
                continue
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            state = partitions.get((topic, partition))
            if state is None:
                continue
            if state.acked_next is None:  # start position unknown at assignment: it is this record's offset
                state.acked_next = offset
            state.read_next = offset + 1
            headers = msg.headers()
            if loop_guard is not None and headers and (PROVENANCE_HEADER, loop_guard) in headers:
                if not state.pending:
                    state.acked_next = offset + 1
                continue  # it came from the target side originally: mirroring it back would loop
            if headers is None:
                headers = [origin]
            elif not any(h[0] == PROVENANCE_HEADER for h in headers):
                headers.append(origin)
            target_topic = names.get(topic) or self._name(topic)
            fifo = fifos.get((topic, partition))
            if fifo is None:
                fifo = fifos[(topic, partition)] = deque()
            fifo.append((offset, state))
            state.pending += 1
            self.in_flight += 1
            while True:
                try:
                    produce(target_topic, msg.value(), msg.key(), partition, on_delivery=delivered,
                            timestamp=msg.timestamp()[1], headers=headers)
                    break
                except BufferError:
                    self._clock = time.time()
                    self.producer.poll(0.05)
                except KafkaException as exc:
                    fifo.pop()
                    state.pending -= 1
                    self.in_flight -= 1
                    self._produce_rejected(exc, topic, partition, offset, target_topic)
                    break
            if self.in_flight >= self.settings.max_in_flight:
                self._clock = time.time()
                self.producer.poll(0.05)
        self._clock = time.time()
        self.producer.poll(0)

    def _produce_rejected(self, exc: KafkaException, topic: str, partition: int, offset: int, target_topic: str) -> None:
        err = exc.args[0]
        if err.code() == KafkaError._UNKNOWN_PARTITION:
            # the source grew partitions before our topic thread caught up: grow the target, then retry
            self.refresh_topics(with_configs=False)
            self.consumer.seek(TopicPartition(topic, partition, offset))
            self.partitions[(topic, partition)].read_next = offset
            time.sleep(0.5)
            return
        state = self.partitions[(topic, partition)]
        state.failed_at = offset if state.failed_at is None else min(state.failed_at, offset)
        self.produce_errors[(topic, err.retriable())] = self.produce_errors.get((topic, err.retriable()), 0) + 1
        self.failures.append((topic, partition, offset, target_topic, -1, err))
        self._stop.set()

    def failure_message(self) -> str | None:
        """One line naming the record that could not be written (the culprit, not its batch-mates)."""
        if not self.failures:
            return None
        topic, partition, offset, target_topic, size, err = self.failures[0]
        if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
            # the broker refuses the whole batch holding a too-large record: name the largest one
            topic, partition, offset, target_topic, size, err = max(self.failures, key=lambda f: f[4])
        detail = f" ({size} bytes)" if size >= 0 and err.code() == KafkaError.MSG_SIZE_TOO_LARGE else ""
        return (f"cannot mirror {topic}[{partition}] offset {offset}{detail} to {self.flow.target}:{target_topic}: "
                f"{err.str()} ({err.name()}); stopped without skipping it")

    def start_background(self) -> None:
        self.target_topics.ensure_internal()
        if self.settings.heartbeats:
            ensure_heartbeats_topic(self.source_cluster, self.settings.heartbeats_topic)
            self.heartbeats = HeartbeatProducer(self.source_cluster, self.settings.heartbeats_topic, self.flow.source,
                                                self.flow.target, self.settings.heartbeat_interval_s, self._heartbeat_sent)
            self.heartbeats.start()
        self.refresh_topics(with_configs=True)
        threading.Thread(target=self._topic_loop, name="topics", daemon=True).start()
        if self.flow.checkpoint_groups:
            from .checkpoints import CheckpointEmitter

            self.checkpoints = CheckpointEmitter(self.config, self.flow_name)
            self.checkpoints.start()

    def _heartbeat_sent(self) -> None:
        self.heartbeats_sent += 1

    def run(self) -> None:
        """Mirror until stop() or a record that cannot be written; raises MirrorFailure for the latter."""
        self.start_background()
        next_commit = time.monotonic() + self.settings.commit_interval_s
        batch = self.settings.batch_size
        idle_synced = False
        last_record = time.monotonic()
        try:
            while not self._stop.is_set():
                self._apply_subscription()
                if not self._subscribed:
                    self._stop.wait(0.2)
                    continue
                # a short wait: consume() holds a partial batch for the whole timeout, which is latency at
                # moderate rates (100 ms here cost p50 138 ms at 5k records/s)
                messages = self.consumer.consume(batch, 0.01)
                now = time.monotonic()
                if messages:
                    self._send(messages)
                    idle_synced = False
                    last_record = now
                else:
                    self._clock = time.time()
                    self.producer.poll(0.01 if self.in_flight else 0)
                now = time.monotonic()
                if not messages and self.in_flight == 0 and not idle_synced and now - last_record >= IDLE_FLUSH_S:
                    # idle flush: everything read is acknowledged; publish exact positions now
                    self._commit()
                    self._emit_syncs()
                    self.producer.poll(0)
                    idle_synced = True
                    next_commit = now + self.settings.commit_interval_s
                elif now >= next_commit:
                    self._commit(sync=False)
                    self._emit_syncs()
                    next_commit = now + self.settings.commit_interval_s
        finally:
            self._shutdown()
        if self.failures:
            raise MirrorFailure(self.failure_message())

    def stop(self) -> None:
        self._stop.set()

    def _shutdown(self) -> None:
        if self.heartbeats:
            self.heartbeats.stop()
        if self.checkpoints:
            self.checkpoints.stop()
        remaining = self.producer.flush(8)
        if remaining:
            log.warning("%d record(s) still unacknowledged at shutdown; they stay uncommitted and will be re-sent", remaining)
        self._commit()
        self._emit_syncs()
        self.producer.flush(2)
        try:
            self.consumer.close()
        except Exception as exc:
            log.warning("closing the consumer: %s", exc)
