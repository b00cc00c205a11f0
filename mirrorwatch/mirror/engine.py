"""The mirror engine: consume from the source, produce to the target, commit only what the target acknowledged.

Threads: the data path (consume, produce, delivery reports, commits, offset syncs) runs on the caller's
thread and owns the consumer; a topic thread lists, creates and syncs topics (admin calls block, so they stay
off the data path) and hands new subscriptions over; the heartbeat producer runs on its own.

How acknowledgements find their source offset without a closure per record: the idempotent producer
delivers reports in order per partition, so each partition keeps a FIFO of the reports due and a report pops
the oldest. Only some records carry a report (``_send``: the last of each run of a partition in a consumed
batch, every ``offset_sync_every``-th, and every record under the loop guard); with
``enable.gapless.guarantee`` a successful report vouches for every record sent before it (docs/design.md,
"Acknowledgement per run"). Each assignment of a partition has its own state and FIFO, and its records carry
that state's own callback: a report that arrives after its partition was revoked or lost updates the detached
state it was sent for, never the state of a newer assignment (which would move acked_next past records not yet
acknowledged).

Per record the data path does as little Python as it can (the engine is CPU-bound on one core): no callback
for most records; a report only pops the FIFO, remembers the newest report and, for a sync-due record, has an
offset sync published for exactly that record; positions, counters and latency are settled once per poll
round for each partition that had reports (``reports.py``).

Beside it: ``partition_state.py`` (one assignment's positions and report callback), ``acknowledgement.py``
(where ``acked_next`` lands, what may be committed, and the failures the engine stops on; pure),
``reports.py`` (delivery reports, failures, the producer's fatal error), ``publisher.py`` (commits and offset syncs), ``client_settings.py`` (the producer's and consumer's properties),
``lifecycle.py`` (start-up, outages), ``subscription.py`` (the topic thread and the subscription it hands over), ``access_guard.py`` (credentials and ACLs), ``records_lost.py`` (records removed from the source before mirrored),
``rebalances.py`` (the source group's rebalances, at-least-once), ``transactions.py`` (exactly-once);
``engine_state.py`` declares what the mixins share.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from ..core.access import AccessProblem, Denied
from ..core.clients import make_admin, make_consumer, make_producer
from ..core.config import Config
from ..core.naming import mirror_group, offset_syncs_topic
from ..core.records import PROVENANCE_HEADER
from ..core.topic_selection import TopicFilter, policy_of
from .access_guard import EngineAccess
from .acknowledgement import MirrorFailure, RecordFailure, RecordsLost, failure_message
from .client_settings import consumer_properties, offset_sync_interval_s, producer_properties
from .commit_rounds import CommitRounds, source_backlog
from .consumer_guard import STATS_INTERVAL_MS, ConsumerGuard
from .lifecycle import EngineLifecycle
from .metrics import LatencyHistogram
from .outage import ClustersUnreachable
from .own_topics import internal_topic_names
from .partition_state import ConsumedRecord, FifoEntry, Header, PartitionState
from .publisher import PositionPublisher
from .rebalances import SourceGroupRebalances
from .records_lost import RecordsLostDetection
from .reports import DeliveryReports
from .subscription import EngineSubscription
from .topics import TargetTopics
from .transactions import ExactlyOnce, TransactionRefused

log = logging.getLogger("mirrorwatch.mirror")


IDLE_FLUSH_S = 0.2  # this long without records (and nothing in flight) is idle: commit and sync exactly


class MirrorEngine(
    DeliveryReports,
    EngineLifecycle,
    EngineSubscription,
    RecordsLostDetection,
    EngineAccess,
    ConsumerGuard,
    ExactlyOnce,
    SourceGroupRebalances,
):
    def __init__(self, config: Config, flow_name: str | None = None):
        self.flow_name, self.flow = config.flow(flow_name)
        self.config = config
        self.settings = config.mirror
        self.policy = policy_of(self.flow)
        self.group = mirror_group(self.flow.source, self.flow.target, self.flow.group, self.flow_name)
        self.source_cluster = config.clusters[self.flow.source]
        self.target_cluster = config.clusters[self.flow.target]
        self.syncs_topic = offset_syncs_topic(self.flow.source)
        self.origin = self.flow.source.encode()
        self.loop_guard = self.flow.target.encode() if self.flow.policy == "identity" else None
        provenance = self.settings.provenance_header
        self.add_origin = self.flow.policy == "identity" if provenance is None else provenance

        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.set_aside: dict[tuple[str, int], tuple[int, int]] = {}  # rebalances.SourceGroupRebalances._set_aside
        # commits and offset syncs; a refused commit or sync is an ACL missing (deny)
        self.publisher = PositionPublisher(self.partitions, self.syncs_topic, self._retrying, self.group, self.deny)
        self.owned: frozenset[tuple[str, int]] = frozenset()  # the keys of partitions, for other threads to read
        self.touched: list[PartitionState] = []  # states with delivery reports not yet settled
        self.target_names: dict[str, str] = {}  # source topic → target topic
        self.latency = LatencyHistogram()
        self.produce_errors: dict[tuple[str, bool], int] = {}
        self.rebalances = 0
        self.heartbeats_sent = 0
        self.failures: list[RecordFailure] = []
        self.fatal_error: KafkaError | None = None  # the producer's, once a record was refused (reports.py)
        self.lost: list[tuple[str, int, int, int]] = []  # topic, partition, [first, end) lost; the engine stops
        self.records_lost: dict[tuple[str, int], int] = {}  # counted under mirror.on_records_lost: continue
        self.access_problem: AccessProblem | None = None  # an ACL or credential problem: stop, say it, exit 1

        self._stop = threading.Event()
        self._pending_subscription: list[str] | None = None
        self._subscription_lock = threading.Lock()
        self._subscribed: list[str] = []

        self._init_exactly_once()  # mirror.delivery (transactions.py)
        self.producer = make_producer(
            self.target_cluster, f"mirrorwatch-mirror-{self.flow_name}", **self._producer_props()
        )
        self._init_consumer_guard()
        self.consumer = self._make_consumer()
        if self.exactly_once:  # the positions group on the target hands out the partitions
            self.members = self._make_members()
        self.publisher.bind(self.producer, self.consumer)
        self.source_admin = make_admin(self.source_cluster, "mirrorwatch-mirror-admin")
        self.target_admin = make_admin(self.target_cluster, "mirrorwatch-mirror-admin")
        self.internal_topics = internal_topic_names(config, self.flow)
        self.topic_filter = TopicFilter.of(config, self.flow)  # the same rule: internal topics only if it owns them
        self.target_topics = TargetTopics(self.source_admin, self.target_admin, self.policy)
        self._init_lifecycle()  # heartbeats, checkpoints, the cluster watch (lifecycle.py)

    def _producer_props(self) -> dict[str, Any]:
        return producer_properties(self.settings, self._transactional_properties() if self.exactly_once else None)

    def _make_consumer(self) -> Consumer:
        props = consumer_properties(self.settings, on_commit=self.publisher.committed)
        if not self.exactly_once:  # exactly-once: assign() only, no membership to watch on the source
            props.setdefault("statistics.interval.ms", STATS_INTERVAL_MS)
            props.setdefault("stats_cb", self._on_stats)  # the group state, for consumer_guard.py
        return make_consumer(self.source_cluster, f"mirrorwatch-mirror-{self.flow_name}", self.group, **props)

    # ------------------------------------------------------------------ the data path
    def _send(self, messages: Sequence[ConsumedRecord]) -> None:
        """Produce one consumed batch. Messages come in runs per partition; per-partition work happens once per run.

        Only some records carry a delivery report: the last record of each run, every ``offset_sync_every``-th
        record of the assignment (its report publishes an offset sync) and, under the identity policy's loop
        guard, every record. The idempotent producer with ``enable.gapless.guarantee`` delivers a partition's
        records in order and turns any failure into a fatal error that fails every later record too, so a
        successful report acknowledges its whole segment (docs/design.md, "Acknowledgement per run")."""
        # produce() takes its arguments by position here: (topic, value, key, partition, callback, on_delivery,
        # timestamp, headers). Keyword arguments cost the client's C argument parser ~0.8–1 µs more per call (a
        # micro-benchmark of produce() alone), and the engine's CPU per million 100 B records fell from 7.0–8.1 s
        # to 6.0–6.1 s in one sitting (BENCHMARKS.md). None for a callback means none, as when it is left out.
        produce = self.producer.produce
        add_origin = self.add_origin
        origin = (PROVENANCE_HEADER, self.origin)
        # shared by every record without headers of its own (produce() only reads it)
        origin_only: list[Header] | None = [origin] if add_origin else None
        loop_guard = self.loop_guard
        every_record = loop_guard is not None  # a skipped record may end a run: then nothing would report it
        guard_header = (PROVENANCE_HEADER, loop_guard)
        sync_every = self.settings.offset_sync_every
        partitions = self.partitions
        run_topic: str | None = None
        run_partition = -1
        state: PartitionState | None = None
        # set with each run's state, and read only while it is set
        fifo: deque[FifoEntry]
        delivered: Callable[[KafkaError | None, Message], None]
        target_topic: str
        sent_records = sent_bytes = unmarked = 0
        segment_start = 0  # index in ``messages`` of the first record the next report will acknowledge
        sync_mark = 0
        expected = -1  # the offset the run's next record should have; a higher one is a jump (see _jumped)
        reseeked: set[tuple[str, int]] = set()
        count = len(messages)
        if not count:
            return
        self._produced_since_commit = True  # exactly-once: the open transaction has records (transactions.py)
        # one message ahead, so the last record of a run is known when it is produced (each accessor once)
        nxt = messages[0]
        next_err, next_topic, next_partition = nxt.error(), nxt.topic(), nxt.partition()
        for i in range(count):
            msg, err, topic, partition = nxt, next_err, next_topic, next_partition
            if i + 1 < count:
                nxt = messages[i + 1]
                next_err, next_topic, next_partition = nxt.error(), nxt.topic(), nxt.partition()
                last_of_run = next_err is not None or next_partition != partition or next_topic != topic
            else:
                last_of_run = True
            if err is not None:
                if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    self.deny(Denied("READ", "group", self.group, "source"))
                elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    self.deny(Denied("READ", "topic", topic or ", ".join(self._subscribed), "source"))
                elif err.code() != KafkaError._PARTITION_EOF:
                    log.warning("consume error: %s", err.str())
                    if not self.exactly_once:  # exactly-once reads by assign(): no membership to lose
                        self._note_consumer_error(err)
                continue
            if partition != run_partition or topic != run_topic:
                if state is not None:
                    state.sent_records, state.sent_bytes, state.unmarked = sent_records, sent_bytes, unmarked
                    state.sync_mark = sync_mark
                run_topic, run_partition = topic, partition
                state = partitions.get((topic, partition))
                if state is None or (topic, partition) in reseeked:
                    state = None
                    continue
                fifo, delivered = state.fifo, state.delivered
                sent_records, sent_bytes, unmarked = state.sent_records, state.sent_bytes, state.unmarked
                sync_mark = state.sync_mark
                segment_start = i
                target_topic = self.target_names.get(topic) or self._name(topic)
                if state.acked_next is None:  # start position unknown at assignment: it is this record's offset
                    state.acked_next = msg.offset()
                expected = state.read_next if state.read_next is not None else -1
            elif state is None:
                continue
            offset = msg.offset()
            if offset > expected >= 0 and self._jumped(state, expected, offset):
                state.sent_records, state.sent_bytes, state.unmarked = sent_records, sent_bytes, unmarked
                state.sync_mark = sync_mark
                state = None  # stopping: nothing of this partition is sent past the lost records
                continue
            expected = offset + 1
            state.read_next = expected
            headers = msg.headers()
            if headers is None:
                headers = origin_only
            else:
                if loop_guard is not None and guard_header in headers:
                    if not fifo and not unmarked:
                        state.acked_next = offset + 1
                    segment_start = i + 1
                    continue  # it came from the target side originally: mirroring it back would loop
                if add_origin and not any(h[0] == PROVENANCE_HEADER for h in headers):
                    headers.append(origin)
            key = msg.key()
            size = len(msg) + (len(key) if key else 0)
            sent_records += 1
            sent_bytes += size
            report = last_of_run or every_record or sent_records >= sync_mark
            while True:
                try:
                    if report:
                        produce(target_topic, msg.value(), key, partition, delivered, None, msg.timestamp()[1], headers)
                        fifo.append((offset, sent_records, sent_bytes, messages, segment_start, i))
                        segment_start, unmarked = i + 1, 0
                        if sent_records >= sync_mark:
                            sync_mark = sent_records + sync_every
                    else:
                        produce(target_topic, msg.value(), key, partition, None, None, msg.timestamp()[1], headers)
                        unmarked += 1
                    break
                except BufferError:
                    # this record counts as in flight while reports are served (it is sent right after): its offset
                    # is already read_next, so with nothing else in flight a report would acknowledge it unsent
                    state.sent_records, state.sent_bytes = sent_records - 1, sent_bytes - size
                    state.unmarked = unmarked + 1
                    self._serve(0.05)
                    state.unmarked = unmarked
                except KafkaException as exc:
                    sent_records, sent_bytes = sent_records - 1, sent_bytes - size
                    if self._produce_rejected(exc, topic, partition, offset, target_topic):
                        reseeked.add((topic, partition))  # the rest of this run comes again after the seek
                        state.sent_records, state.sent_bytes, state.unmarked = sent_records, sent_bytes, unmarked
                        state.sync_mark = sync_mark
                        state = None
                    break
        if state is not None:
            state.sent_records, state.sent_bytes, state.unmarked = sent_records, sent_bytes, unmarked
            state.sync_mark = sync_mark
        self._serve(0)

    def _commit_positions(self, sync: bool = True, hold_s: float = 0.0) -> None:
        """Publish what the target has: the group's commit and offset syncs, or under exactly-once the syncs and
        the open transaction with the positions it reaches (transactions.py; ``hold_s`` there)."""
        if self.exactly_once:
            self.publisher.emit_syncs()
            self._commit_transaction(hold_s)
            return
        self.publisher.commit(sync=sync)
        self.publisher.emit_syncs()

    def _produce_rejected(
        self, exc: KafkaException, topic: str, partition: int, offset: int, target_topic: str
    ) -> bool:
        """Returns True when the partition was sought back to ``offset`` (its later records come again)."""
        err = exc.args[0]
        if err.code() == KafkaError._UNKNOWN_PARTITION:
            # the source grew partitions before our topic thread caught up: grow the target, then retry
            self.refresh_topics(with_configs=False)
            self.consumer.seek(TopicPartition(topic, partition, offset))
            self.partitions[(topic, partition)].read_next = offset
            time.sleep(0.5)
            return True
        if self.exactly_once and self._transaction_doomed(err):
            return False  # the open transaction is aborted (or its producer replaced) before any commit: read again
        self._failed(self.partitions[(topic, partition)], offset, target_topic, -1, err)
        return False

    def failure_message(self) -> str | None:
        """One line naming the record that could not be written (the culprit, not its batch-mates)."""
        message = self.denied_write_message(self.failures) or failure_message(self.failures, self.flow.target)
        if message is None and self.fatal_error is not None:  # no report named a record (none was served)
            message = f"cannot mirror to {self.flow.target}: {self.fatal_error.str()}; stopped without skipping"
        return message

    def run(self) -> None:
        """Mirror until stop() or a record that cannot be written; raises MirrorFailure for the latter."""
        rounds = self._commit_rounds()
        committed_at = time.monotonic()  # when the last commit ended
        batch, max_in_flight = self.settings.batch_size, self.settings.max_in_flight
        idle_synced = False
        last_record = time.monotonic()
        sync_interval = offset_sync_interval_s(self.settings, self.flow.policy)
        next_sync = time.monotonic() + sync_interval
        try:
            # inside the try: a start refused (credentials, ACLs) still closes the clients before the exit
            if not self.start_background():
                self._stop.set()  # stopped, or gave up on a cluster that stayed away, before the start-up steps
            while not self._stop.is_set():
                self.probes.tick("data path")  # /healthz (lifecycle.py)
                if self.outside_group_since is not None or self.group_failed is not None:
                    self._guard_consumer()
                if self.exactly_once:
                    self._serve_members()
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
                read = None if messages is None else len(messages)
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
                    self._commit_positions()
                    self._serve(0)
                    idle_synced = True
                    committed_at = time.monotonic()
                elif rounds.due(now - committed_at, self._produced_since_commit, read, batch, self._source_backlog):
                    if not messages and self.in_flight == 0:
                        # still idle: a commit marker written after the idle flush moved the position since
                        self._advance_idle()
                    self._commit_positions(sync=False, hold_s=self._transaction_hold(now - committed_at, rounds))
                    committed_at = time.monotonic()
                    next_sync = now + sync_interval
                elif now >= next_sync:
                    # fresher in time than the commits: what the monitor's true lag and RPO seconds rest on
                    # under the identity policy (see docs/monitor.md)
                    self.publisher.emit_syncs()
                    next_sync = now + sync_interval
        finally:
            self._shutdown()
        if self.access_problem is not None:
            raise self.access_problem
        if self.failures or self.fatal_error is not None:
            raise MirrorFailure(self.failure_message())
        if self.lost:
            raise RecordsLost(self.lost_message())
        if self.gave_up:
            raise ClustersUnreachable(self.gave_up)
        if self.transaction_refused:
            raise TransactionRefused(self.transaction_refused)

    def _commit_rounds(self) -> CommitRounds:
        """Exactly-once: a transaction commits the records and the positions together, as soon as the reader has
        caught up (commit_rounds.py); at-least-once: the source group's commit, on a timer."""
        s = self.settings
        if self.exactly_once:
            shortest = min(s.transaction_min_interval_s, s.transaction_interval_s)
            return CommitRounds(s.transaction_interval_s, shortest, when_caught_up=True)
        return CommitRounds(s.commit_interval_s, s.commit_interval_s, when_caught_up=False)

    def _source_backlog(self) -> int:
        return source_backlog(self.consumer, self.partitions)

    def _read(self, batch: int, wait: float) -> list[ConsumedRecord]:
        """The next records: wait for the first one, then take what is already fetched without waiting.

        consume(n, timeout) holds a partial batch until the timeout, which is latency at moderate rates (a 100 ms
        timeout cost p50 138 ms at 5k records/s, a 10 ms one still ~5 ms); poll() returns with the first record.
        The wait is short while reports are due (they are served between reads)."""
        first = self.consumer.poll(wait)
        if first is None:
            return []
        messages = self.consumer.consume(batch - 1, 0) if batch > 1 else []
        messages.insert(0, first)
        return cast("list[ConsumedRecord]", messages)  # topic, partition, offset read only once error() is None

    def stop(self) -> None:
        self._stop.set()

    @property
    def in_flight(self) -> int:
        """Records handed to the producer and not yet reported (offset syncs included); safe from any thread."""
        return len(self.producer)
