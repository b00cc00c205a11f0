"""A transactional target for the figures' tests and bench, until the engine's exactly-once mode lands (issue 28):
a small mirror that writes the target in transactions as an exactly-once mirror does, and an independent
read_committed counter of what is really on the target.

``TransactionalMirror`` copies a source topic to a target topic partition for partition, one transaction every
``interval_s`` (source CreateTime kept, value = the source offset, so a reader can tell which record a copy is). Every
``abort_every``-th transaction is aborted after its records were written (they stay in the log, with an abort
marker, invisible to read_committed) and its records are sent again in the next one. After each commit it publishes
what our engine publishes (core/records.py OffsetSync: the last committed copy's source → target offsets, acked_next,
read position) to the flow's offset-syncs topic and commits the mirror group's offsets on the source: so the
monitor's real sampling code watches it as a flow of our engine with ``mirror.delivery: exactly_once``. Like the
engine, it claims only copies a read_committed reader can already see: commit_transaction() returns once the
coordinator has decided, and the markers that make the copies readable follow, so it first waits for the last stable
offset to pass them (the engine holds its claims back one transaction instead; mirror/transactions.py). Claiming at
once put the monitor's true lag below the truth whenever the markers were slow (a loaded machine).
Every committed transaction leaves a commit marker in each partition it wrote: the target's end offset runs ahead
of its records.

``CommittedCounter`` reads the target topic with read_committed from the start and keeps the offsets of the data
records it saw; ``count_below(p, lso)`` after ``caught_up`` is how many records a read_committed reader finds below
a last stable offset: the ground truth ``target_end − local`` stands for on a plain target.
"""

from __future__ import annotations

import threading
import time
import uuid
from bisect import bisect_left
from contextlib import contextmanager

from confluent_kafka import OFFSET_BEGINNING, Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from mirrorwatch.core.reading import end_offsets
from mirrorwatch.core.records import OffsetSync


def ensure_syncs_topic(bootstrap: str, topic: str) -> None:
    client = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client fails its pending futures
    futures = client.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])
    try:
        futures[topic].result(30)
    except KafkaException as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


class TransactionalMirror(threading.Thread):
    def __init__(
        self,
        source: str,
        target: str,
        topic: str,
        target_topic: str,
        partitions: int,
        group: str,
        syncs_topic: str,
        interval_s: float = 0.1,
        abort_every: int = 5,
        max_records: int = 100_000,
    ):
        super().__init__(daemon=True, name="transactional-mirror")
        self.topic, self.target_topic, self.partitions = topic, target_topic, partitions
        self.syncs_topic, self.interval_s, self.abort_every = syncs_topic, interval_s, abort_every
        self.max_records = max_records  # per transaction: a small one gives many syncs (and markers) on little data
        self.consumer = Consumer(
            {
                "bootstrap.servers": source,
                "group.id": group,
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 20,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.producer = Producer(
            {"bootstrap.servers": target, "transactional.id": f"tx-mirror-{uuid.uuid4().hex[:8]}", "linger.ms": 5}
        )
        self.syncs = Producer({"bootstrap.servers": target, "acks": "all"})
        # the last stable offsets of the target partitions (a read_committed consumer's high watermark)
        self.stable = Consumer(
            {"bootstrap.servers": target, "group.id": "tx-mirror-unused", "isolation.level": "read_committed"}
        )
        self.stop_event = threading.Event()
        self.committed = self.aborted = 0  # transactions
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.producer.init_transactions(30)
            while not self.stop_event.is_set():
                self._one_transaction()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc
        finally:
            self.consumer.close()
            self.stable.close()

    def _one_transaction(self) -> None:
        first: dict[int, int] = {}  # partition → first source offset in this transaction
        copied: dict[int, tuple[int, int]] = {}  # partition → (source offset, target offset) of the last copy
        self.producer.begin_transaction()
        deadline, count = time.monotonic() + self.interval_s, 0
        while time.monotonic() < deadline and count < self.max_records:
            for msg in self.consumer.consume(min(500, self.max_records - count), max(0.0, deadline - time.monotonic())):
                count += 1
                if msg.error():
                    continue
                p, offset = msg.partition(), msg.offset()
                first.setdefault(p, offset)

                def delivered(err, m, offset=offset):
                    if err is None:
                        copied[m.partition()] = max(copied.get(m.partition(), (-1, -1)), (offset, m.offset()))

                self.producer.produce(
                    self.target_topic,
                    value=str(offset).encode(),
                    partition=p,
                    timestamp=msg.timestamp()[1],
                    on_delivery=delivered,
                )
                self.producer.poll(0)
        self.producer.flush(30)  # delivery reports: where each copy landed
        if first and (self.committed + self.aborted + 1) % self.abort_every == 0:
            self.producer.abort_transaction(30)
            self.aborted += 1
            for p, offset in first.items():  # sent again in the next transaction
                self.consumer.seek(TopicPartition(self.topic, p, offset))
            return
        self.producer.commit_transaction(30)
        self.committed += 1
        if not copied:
            return
        self._wait_readable(copied)
        now = int(time.time() * 1000)
        positions = {
            tp.partition: tp.offset for tp in self.consumer.position([TopicPartition(self.topic, p) for p in copied])
        }
        for p, (upstream, downstream) in copied.items():
            sync = OffsetSync(self.topic, p, upstream, downstream, upstream + 1, max(positions[p], upstream + 1), now)
            self.syncs.produce(self.syncs_topic, key=sync.key(), value=sync.to_value())
        self.syncs.flush(10)
        self.consumer.commit(
            offsets=[TopicPartition(self.topic, p, u + 1) for p, (u, _) in copied.items()], asynchronous=False
        )

    def _wait_readable(self, copied: dict[int, tuple[int, int]], timeout_s: float = 30.0) -> None:
        """Until every partition's last stable offset is past its last copy: the commit's markers are written."""
        last = {(self.target_topic, p): downstream for p, (_, downstream) in copied.items()}
        deadline = time.monotonic() + timeout_s
        while any(end <= last[key] for key, end in end_offsets(self.stable, list(last)).items()):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.target_topic}: copies {last} not readable {timeout_s:g} s after their commit"
                )
            time.sleep(0.005)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(60)
        if self.error is not None:
            raise self.error


class CommittedCounter(threading.Thread):
    """The independent read_committed reader of a target topic (its own consumer, from the beginning)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__(daemon=True, name="committed-counter")
        self.topic, self.partitions = topic, partitions
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "committed-counter-unused",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 10,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.offsets: list[list[int]] = [[] for _ in range(partitions)]  # data records' target offsets, in order
        self.values: list[list[bytes]] = [[] for _ in range(partitions)]
        self.read_to = [0] * partitions  # everything below was read (past a trailing marker via the EOF event)
        self.redelivered = [0] * partitions  # records handed out again at an offset already counted: not recounted
        self.stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self.stop_event.is_set():
            for msg in self.consumer.consume(1000, 0.05):
                p = msg.partition()
                with self._lock:
                    if msg.error():  # partition EOF: its offset is the fetch position, past any marker
                        self.read_to[p] = max(self.read_to[p], msg.offset())
                        continue
                    if self.offsets[p] and msg.offset() <= self.offsets[p][-1]:
                        # offsets only grow within a partition: a record at or below the last one counted is one
                        # already counted, handed out again; counting it twice would inflate the truth's count
                        self.redelivered[p] += 1
                        continue
                    self.offsets[p].append(msg.offset())
                    self.values[p].append(msg.value())
                    self.read_to[p] = max(self.read_to[p], msg.offset() + 1)
        self.consumer.close()

    def stable_ends(self) -> list[int]:
        """Last stable offsets now (a read_committed reader's end)."""
        futures = self.admin.list_offsets(
            {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(self.partitions)},
            isolation_level=IsolationLevel.READ_COMMITTED,
            request_timeout=10,
        )
        out = [0] * self.partitions
        for tp, f in futures.items():
            out[tp.partition] = f.result(15).offset
        return out

    def count_below(self, ends: list[int], timeout_s: float = 30) -> list[int]:
        """Records a read_committed reader finds below ``ends`` per partition (waits until it has read that far)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                if all(self.read_to[p] >= ends[p] for p in range(self.partitions)):
                    return [bisect_left(self.offsets[p], ends[p]) for p in range(self.partitions)]
            if time.monotonic() > deadline:
                raise TimeoutError(f"the counter read to {self.read_to}, not {ends}")
            time.sleep(0.01)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)


@contextmanager
def harness_or_engine(harness: TransactionalMirror | None, counter: CommittedCounter | None, engine):
    """The harness (started, stopped after), or the real engine (``engine()``: a ``MirrorProcess``, yielded); the
    counter, when there is one, runs alongside either."""
    if counter is not None:
        counter.start()
    try:
        if harness is None:
            with engine() as mirror:
                yield mirror
            return
        harness.start()
        try:
            yield None
        finally:
            harness.stop()
    finally:
        if counter is not None:
            counter.stop()
