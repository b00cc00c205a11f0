"""The mirror engine: consume from the source, produce to the target, commit only what the target acknowledged.

Threads: the data path (consume, produce, delivery reports, commits, offset syncs) runs on the caller's
thread and owns the consumer; a topic thread lists, creates and syncs topics (admin calls block, so they stay
off the data path) and hands new subscriptions over; the heartbeat producer runs on its own.

How acknowledgements find their source offset without a closure per record: the idempotent producer
delivers reports in order per partition, so each partition keeps a FIFO of (source offset, state) it sent and
a report pops the oldest. Each assignment of a partition has its own state and FIFO, and its records carry
that state's own callback: a report that arrives after its partition was revoked or lost updates the detached
state it was sent for, never the state of a newer assignment (which would move acked_next past records not yet
acknowledged).

Per record the data path does as little Python as it can (the engine is CPU-bound on one core): the report
callback only pops the FIFO, remembers the newest report and, every ``offset_sync_every`` records, has an
offset sync published for exactly that record; positions, counters and latency are settled once per poll round
for each partition that had reports (``_finish_round``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

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

    exit_code = 1


class RecordsLost(MirrorFailure):
    """The source log start passed the engine's position (retention, DeleteRecords, a recreated topic): records
    were removed before they were mirrored, and ``mirror.on_records_lost`` is ``stop``."""

    exit_code = 4


class PartitionState:
    """One assignment of one source partition. Records sent under it report back to its ``delivered``."""

    __slots__ = ("key", "engine", "read_next", "acked_next", "committed", "fifo", "sent_records", "sent_bytes",
                 "records", "bytes", "last_upstream", "last_downstream", "failed_at", "synced_acked", "synced_read",
                 "next_sync_at", "round_msg", "round_entry")

    def __init__(self, key: tuple[str, int], engine: "MirrorEngine") -> None:
        self.key = key
        self.engine = engine
        self.read_next: int | None = None  # next source offset to fetch
        self.acked_next: int | None = None  # last source offset acknowledged by the target + 1
        self.committed: int | None = None  # last offset committed for the mirror group
        # in flight, in send order: (source offset, records sent through it, key+value bytes sent through it)
        self.fifo: deque[tuple[int, int, int]] = deque()
        self.sent_records = 0
        self.sent_bytes = 0
        self.records = 0  # acknowledged by the target
        self.bytes = 0
        self.last_upstream = -1  # newest acknowledged source offset ...
        self.last_downstream = -1  # ... and its offset on the target
        self.failed_at: int | None = None  # a record here could not be written: never commit past it
        self.synced_acked: int | None = None  # acked_next at the last offset sync
        self.synced_read: int | None = None
        # an offset sync when the report of this many records' last one arrives. The first record of an
        # assignment gets one at once: records re-sent after a restart or rebalance sit on the target after the
        # newest sync's downstream offset only as long as no sync maps past them (the monitor's target-side
        # estimate counts the target records after that offset as distinct source records)
        self.next_sync_at = 1
        self.round_msg = None  # the newest report of this poll round, settled by the engine's _finish_round
        self.round_entry: tuple[int, int, int] | None = None

    def delivered(self, err, msg) -> None:
        # hot path: one call per record. Reports come in send order per partition (idempotent producer).
        entry = self.fifo.popleft()
        if err is not None:
            self.engine._delivery_failed(self, entry[0], err, msg)
            return
        if self.round_msg is None:
            self.engine.touched.append(self)
        self.round_msg = msg
        self.round_entry = entry
        if entry[1] >= self.next_sync_at:  # exactly every N records, mid-round: checkpoint translation needs them dense
            self.engine._sync_due(self, entry, msg)

    def acknowledged(self, source_offset: int, downstream_offset: int) -> None:
        """The target acknowledged everything sent through ``source_offset`` (``downstream_offset`` there)."""
        self.last_upstream, self.last_downstream = source_offset, downstream_offset
        acked_next = source_offset + 1
        if not self.fifo and self.read_next is not None:
            acked_next = max(acked_next, self.read_next)  # records skipped by the loop guard count as handled
        if self.acked_next is not None:
            acked_next = max(acked_next, self.acked_next)  # a loop-guard skip may have moved it further
        if self.failed_at is not None:
            acked_next = min(acked_next, self.failed_at)
        self.acked_next = acked_next

    def failed(self, source_offset: int) -> None:
        """A record here could not be written: commits and syncs stop below it."""
        self.failed_at = source_offset if self.failed_at is None else min(self.failed_at, source_offset)


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
        provenance = self.settings.provenance_header
        self.add_origin = self.flow.policy == "identity" if provenance is None else provenance

        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.owned: frozenset[tuple[str, int]] = frozenset()  # the keys of partitions, for other threads to read
        self.touched: list[PartitionState] = []  # states with delivery reports not yet settled
        self.target_names: dict[str, str] = {}  # source topic → target topic
        self.latency = LatencyHistogram()
        self.produce_errors: dict[tuple[str, bool], int] = {}
        self.rebalances = 0
        self.heartbeats_sent = 0
        self.failures: list[tuple[str, int, int, str, int, KafkaError]] = []  # topic, partition, offset, target, size, error
        self.lost: list[tuple[str, int, int, int]] = []  # topic, partition, [first, end) lost; the engine stops
        self.records_lost: dict[tuple[str, int], int] = {}  # counted under mirror.on_records_lost: continue

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
            key = (tp.topic, tp.partition)
            # read_next and acked_next are learned below, or from the first fetched record
            self.partitions[key] = PartitionState(key, self)
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
        self.owned = frozenset(self.partitions)
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions))

    def _on_revoke(self, consumer, partitions) -> None:
        self.rebalances += 1
        try:
            # hand the partitions over cleanly: everything sent must be acknowledged and committed first
            self._flush(30)
            self._commit([(tp.topic, tp.partition) for tp in partitions])
            self._emit_syncs([(tp.topic, tp.partition) for tp in partitions], force=True)
        except Exception as exc:  # never raise from a rebalance callback; the next owner resumes from the commit
            log.warning("handing over revoked partitions: %s", exc)
        for tp in partitions:
            self.partitions.pop((tp.topic, tp.partition), None)
        self.owned = frozenset(self.partitions)

    def _on_lost(self, consumer, partitions) -> None:
        self.rebalances += 1
        for tp in partitions:  # another worker owns them now: committing would be wrong
            self.partitions.pop((tp.topic, tp.partition), None)
        self.owned = frozenset(self.partitions)
        # their in-flight records still get reports; those update the detached states (see the module note)

    # ------------------------------------------------------------------ delivery reports
    def _delivery_failed(self, state: PartitionState, source_offset: int, err, msg) -> None:
        self._failed(state, source_offset, msg.topic(), len(msg.value() or b"") + len(msg.key() or b""), err)

    def _failed(self, state: PartitionState, source_offset: int, target_topic: str, size: int, err: KafkaError) -> None:
        """A record the target refused (size -1 = unknown): count it, never commit past it, stop."""
        topic, partition = state.key
        retriable = err.retriable()
        self.produce_errors[(topic, retriable)] = self.produce_errors.get((topic, retriable), 0) + 1
        state.failed(source_offset)
        self.failures.append((topic, partition, source_offset, target_topic, size, err))
        self._stop.set()

    def _sync_due(self, state: PartitionState, entry: tuple[int, int, int], msg) -> None:
        """The report of every N-th record: publish an offset sync for exactly that record."""
        state.next_sync_at = entry[1] + self.settings.offset_sync_every
        if self.partitions.get(state.key) is not state:
            return  # a revoked or lost assignment: its new owner publishes syncs
        state.acknowledged(entry[0], msg.offset())
        self._emit_syncs([state.key])

    def _serve(self, timeout: float) -> None:
        """Serve delivery reports, then settle them."""
        self.producer.poll(timeout)
        if self.touched:
            self._finish_round()

    def _flush(self, timeout: float) -> int:
        remaining = self.producer.flush(timeout)
        if self.touched:
            self._finish_round()
        return remaining

    def _finish_round(self) -> None:
        """Settle this poll round's reports, once per partition that had any: positions, counters, latency.

        Latency: the round's newest report stands for the round's records (weighted by their count); records of
        one round were acknowledged within milliseconds of each other."""
        now = time.time()
        touched, observe = self.touched, self.latency.observe
        for state in touched:
            msg, (source_offset, records, nbytes) = state.round_msg, state.round_entry
            state.round_msg = state.round_entry = None
            acked_now = records - state.records
            state.records, state.bytes = records, nbytes
            state.acknowledged(source_offset, msg.offset())
            ts_type, ts = msg.timestamp()
            if ts_type:
                observe(max(0.0, now - ts / 1000.0), acked_now)
        touched.clear()

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
            state.synced_acked, state.synced_read = state.acked_next, state.read_next

    def _produce_internal(self, topic: str, key: bytes, value: bytes) -> None:
        while True:
            try:
                self.producer.produce(topic, key=key, value=value)
                return
            except BufferError:
                self.producer.poll(0.1)  # reports served here are settled by the caller's round

    # ------------------------------------------------------------------ the data path
    def _send(self, messages) -> None:
        """Produce one consumed batch. Messages come in runs per partition; per-partition work happens once per run."""
        produce = self.producer.produce
        add_origin = self.add_origin
        origin = (PROVENANCE_HEADER, self.origin)
        # shared by every record without headers of its own (produce() only reads it)
        origin_only = [origin] if add_origin else None
        loop_guard = self.loop_guard
        guard_header = (PROVENANCE_HEADER, loop_guard)
        partitions = self.partitions
        run_topic, run_partition = None, -1
        state = fifo = delivered = target_topic = None
        sent_records = sent_bytes = 0
        expected = -1  # the offset the run's next record should have; a higher one is a jump (see _jumped)
        reseeked: set[tuple[str, int]] = set()
        for msg in messages:
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("consume error: %s", msg.error().str())
                continue
            topic, partition = msg.topic(), msg.partition()
            if partition != run_partition or topic != run_topic:
                if state is not None:
                    state.sent_records, state.sent_bytes = sent_records, sent_bytes
                run_topic, run_partition = topic, partition
                state = partitions.get((topic, partition))
                if state is None or (topic, partition) in reseeked:
                    state = None
                    continue
                fifo, delivered = state.fifo, state.delivered
                sent_records, sent_bytes = state.sent_records, state.sent_bytes
                target_topic = self.target_names.get(topic) or self._name(topic)
                if state.acked_next is None:  # start position unknown at assignment: it is this record's offset
                    state.acked_next = msg.offset()
                expected = state.read_next if state.read_next is not None else -1
            elif state is None:
                continue
            offset = msg.offset()
            if offset > expected >= 0 and self._jumped(state, expected, offset):
                state.sent_records, state.sent_bytes = sent_records, sent_bytes
                state = None  # stopping: nothing of this partition is sent past the lost records
                continue
            expected = offset + 1
            state.read_next = expected
            headers = msg.headers()
            if headers is None:
                headers = origin_only
            else:
                if loop_guard is not None and guard_header in headers:
                    if not fifo:
                        state.acked_next = offset + 1
                    continue  # it came from the target side originally: mirroring it back would loop
                if add_origin and not any(h[0] == PROVENANCE_HEADER for h in headers):
                    headers.append(origin)
            key = msg.key()
            size = len(msg) + (len(key) if key else 0)
            sent_records += 1
            sent_bytes += size
            fifo.append((offset, sent_records, sent_bytes))
            while True:
                try:
                    produce(target_topic, msg.value(), key, partition, on_delivery=delivered,
                            timestamp=msg.timestamp()[1], headers=headers)
                    break
                except BufferError:
                    state.sent_records, state.sent_bytes = sent_records, sent_bytes
                    self._serve(0.05)
                except KafkaException as exc:
                    fifo.pop()
                    sent_records, sent_bytes = sent_records - 1, sent_bytes - size
                    if self._produce_rejected(exc, topic, partition, offset, target_topic):
                        reseeked.add((topic, partition))  # the rest of this run comes again after the seek
                        state.sent_records, state.sent_bytes = sent_records, sent_bytes
                        state = None
                    break
        if state is not None:
            state.sent_records, state.sent_bytes = sent_records, sent_bytes
        self._serve(0)

    # ------------------------------------------------------------------ records lost before they were mirrored
    def _jumped(self, state: PartitionState, expected: int, offset: int) -> bool:
        """The source skipped from ``expected`` to ``offset``. Transaction markers, aborted records and compaction
        do that harmlessly; records lost to the log start (retention, DeleteRecords, a recreated topic: the
        consumer's offset went out of range and auto.offset.reset moved it) do not. The log start the fetch
        responses carry (librdkafka's cached low watermark; no request) tells them apart. Returns True when
        the engine stops (``mirror.on_records_lost: stop``)."""
        topic, partition = state.key
        low = self._log_start(topic, partition, cached=True)
        if low <= expected:
            return False
        return self._records_lost(state, expected, min(low, offset))

    def _log_start(self, topic: str, partition: int, cached: bool) -> int:
        try:
            low, _high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5,
                                                             cached=cached)
        except KafkaException as exc:
            log.warning("cannot read the log start of %s[%d]: %s", topic, partition, exc)
            return -1
        return low if low is not None else -1

    def _records_lost(self, state: PartitionState, first: int, end: int) -> bool:
        """Source offsets [first, end) were removed before the engine read them."""
        topic, partition = state.key
        count = end - first
        if self.settings.on_records_lost == "stop":
            state.failed(first)  # nothing is committed past the gap: the group still shows where it stopped
            self.lost.append((topic, partition, first, end))
            self._stop.set()
            return True
        self.records_lost[state.key] = self.records_lost.get(state.key, 0) + count
        log.error("records lost before they were mirrored: %s[%d] offsets %d-%d (%d record(s)) were removed from "
                  "the source (retention, DeleteRecords or a recreated topic); continuing at %d "
                  "(mirror.on_records_lost: continue)", topic, partition, first, end - 1, count, end)
        return False

    def lost_message(self) -> str | None:
        if not self.lost:
            return None
        topic, partition, first, end = self.lost[0]
        more = f" (and {len(self.lost) - 1} more partition(s))" if len(self.lost) > 1 else ""
        return (f"records lost before they were mirrored: {topic}[{partition}] offsets {first}-{end - 1} "
                f"({end - first} record(s)) are gone from the source (retention, DeleteRecords or a recreated "
                f"topic){more}; stopped without committing past them. To accept the loss, set "
                f"mirror.on_records_lost: continue (counted in mirrorwatch_mirror_records_lost_total)")

    def _advance_idle(self) -> None:
        """Idle with nothing in flight: move each partition's read and acked positions to the consumer's position.

        After a transaction's commit marker (or aborted records, or a compacted tail) the position is past
        offsets that no consumer ever receives; publishing the last record + 1 would leave true lag ≥ 1 on an
        idle transactional topic forever. A position past the log start's jump is checked like a jump in _send.
        """
        states = [st for st in self.partitions.values()
                  if st.read_next is not None and not st.fifo and st.failed_at is None]
        if not states:
            return
        try:
            positions = self.consumer.position([TopicPartition(*st.key) for st in states])
        except KafkaException as exc:
            log.debug("consumer position: %s", exc)
            return
        for st, tp in zip(states, positions):
            if tp.offset < 0 and tp.error is None:
                # no record fetched since the assignment: a log start past our offset with nothing after it
                # (every record deleted) shows only in the cached low watermark
                low = self._log_start(tp.topic, tp.partition, cached=True)
                if low > st.read_next and not self._jumped(st, st.read_next, low):
                    st.read_next = st.acked_next = low
                continue
            if tp.offset > st.read_next and tp.error is None:
                if self._jumped(st, st.read_next, tp.offset):
                    continue
                st.read_next = tp.offset
                if st.acked_next is None or st.acked_next < tp.offset:
                    st.acked_next = tp.offset

    def _produce_rejected(self, exc: KafkaException, topic: str, partition: int, offset: int, target_topic: str) -> bool:
        """Returns True when the partition was sought back to ``offset`` (its later records come again)."""
        err = exc.args[0]
        if err.code() == KafkaError._UNKNOWN_PARTITION:
            # the source grew partitions before our topic thread caught up: grow the target, then retry
            self.refresh_topics(with_configs=False)
            self.consumer.seek(TopicPartition(topic, partition, offset))
            self.partitions[(topic, partition)].read_next = offset
            time.sleep(0.5)
            return True
        self._failed(self.partitions[(topic, partition)], offset, target_topic, -1, err)
        return False

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

            self.checkpoints = CheckpointEmitter(self.config, self.flow_name, owned=lambda: self.owned)
            self.checkpoints.start()

    def _heartbeat_sent(self) -> None:
        self.heartbeats_sent += 1

    def run(self) -> None:
        """Mirror until stop() or a record that cannot be written; raises MirrorFailure for the latter."""
        self.start_background()
        next_commit = time.monotonic() + self.settings.commit_interval_s
        batch, max_in_flight = self.settings.batch_size, self.settings.max_in_flight
        idle_synced = False
        last_record = time.monotonic()
        sync_interval = self.sync_interval_s
        next_sync = time.monotonic() + sync_interval
        try:
            while not self._stop.is_set():
                self._apply_subscription()
                if not self._subscribed:
                    self._stop.wait(0.2)
                    continue
                in_flight = self.in_flight
                if in_flight >= max_in_flight:
                    messages = None  # back-pressure: let the target catch up before reading more
                    self._serve(0.05)
                else:
                    messages = self._read(batch, 0.005 if in_flight else 0.05)
                now = time.monotonic()
                if messages:
                    self._send(messages)
                    idle_synced = False
                    last_record = now
                else:
                    self._serve(0.01 if self.in_flight else 0)
                now = time.monotonic()
                if not messages and self.in_flight == 0 and not idle_synced and now - last_record >= IDLE_FLUSH_S:
                    # idle flush: everything read is acknowledged; publish exact positions now
                    self._advance_idle()
                    self._commit()
                    self._emit_syncs()
                    self._serve(0)
                    idle_synced = True
                    next_commit = now + self.settings.commit_interval_s
                elif now >= next_commit:
                    if not messages and self.in_flight == 0:
                        # still idle: a commit marker written after the idle flush moved the position since
                        self._advance_idle()
                    self._commit(sync=False)
                    self._emit_syncs()
                    next_commit = now + self.settings.commit_interval_s
                    next_sync = now + sync_interval
                elif now >= next_sync:
                    # fresher in time than the commits: what the monitor's true lag and RPO seconds rest on
                    # under the identity policy (see docs/monitor.md)
                    self._emit_syncs()
                    next_sync = now + sync_interval
        finally:
            self._shutdown()
        if self.failures:
            raise MirrorFailure(self.failure_message())
        if self.lost:
            raise RecordsLost(self.lost_message())

    def _read(self, batch: int, wait: float) -> list:
        """The next records: wait for the first one, then take what is already fetched without waiting.

        consume(n, timeout) holds a partial batch until the timeout, which is latency at moderate rates (a 100 ms
        timeout cost p50 138 ms at 5k records/s, a 10 ms one still ~5 ms); poll() returns with the first record.
        The wait is short while reports are due (they are served between reads)."""
        first = self.consumer.poll(wait)
        if first is None:
            return []
        messages = self.consumer.consume(batch - 1, 0) if batch > 1 else []
        messages.insert(0, first)
        return messages

    def stop(self) -> None:
        self._stop.set()

    @property
    def sync_interval_s(self) -> float:
        """Offset syncs of moved partitions at least this often (``mirror.offset_sync_interval_s``; by default
        0.1 s under the identity policy, where the monitor cannot read progress off the shared target topic,
        and the commit interval under prefix, where the target's end offset already tells it)."""
        if self.settings.offset_sync_interval_s is not None:
            return self.settings.offset_sync_interval_s
        return 0.1 if self.flow.policy == "identity" else self.settings.commit_interval_s

    @property
    def in_flight(self) -> int:
        """Records handed to the producer and not yet reported (offset syncs included); safe from any thread."""
        return len(self.producer)

    def _shutdown(self) -> None:
        if self.heartbeats:
            self.heartbeats.stop()
        if self.checkpoints:
            self.checkpoints.stop()
        remaining = self._flush(8)
        if remaining:
            log.warning("%d record(s) still unacknowledged at shutdown; they stay uncommitted and will be re-sent", remaining)
        self._commit()
        self._emit_syncs()
        self.producer.flush(2)
        try:
            self.consumer.close()
        except Exception as exc:
            log.warning("closing the consumer: %s", exc)
