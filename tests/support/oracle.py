"""The fault suite's independent oracle: what a plain application reading the target saw, against what the source
acknowledged. It shares no code with the engine (no mirrorwatch import): a confluent_kafka producer numbers each
key's records 0, 1, 2, ... in the value, and a confluent_kafka consumer (read_committed) reads the target back.

The verdict, per key (each key lives in one partition, so its records have an order):
- lost: an acknowledged (key, sequence number) never seen on the target;
- duplicates: every copy beyond the first;
- order violations: a record seen for the first time after a record of the same key with a higher number had
  already been seen for the first time (a replay of earlier records after later ones is duplicates, not disorder);
- gaps: holes in a key's numbers that a reader stepped over: a run of missing numbers below a number seen later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec

QUIET = {"log_level": 0}


@dataclass(frozen=True)
class Verdict:
    records: int
    lost: int
    duplicates: int
    order_violations: int
    gaps: int
    examples: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.lost == 0 and self.duplicates == 0 and self.order_violations == 0 and self.gaps == 0

    def __str__(self) -> str:
        said = f"{self.records} records: {self.lost} lost, {self.duplicates} duplicates, "
        said += f"{self.order_violations} out of order, {self.gaps} gaps"
        return said + (f" (e.g. {'; '.join(self.examples[:5])})" if self.examples else "")


def judge(acknowledged: Mapping[str, int], received: Iterable[tuple[str, int]]) -> Verdict:
    """``acknowledged``: key → how many records of it the source acknowledged (numbers 0..n-1); ``received``: the
    target's (key, number) pairs in the order a reader saw them (each partition in offset order)."""
    seen: dict[str, set[int]] = {}
    highest: dict[str, int] = {}
    records = duplicates = order = 0
    examples: list[str] = []
    for key, number in received:
        records += 1
        numbers = seen.setdefault(key, set())
        if number in numbers:
            duplicates += 1
            continue
        numbers.add(number)
        if number < highest.get(key, -1):
            order += 1
            examples.append(f"{key}#{number} after #{highest[key]}")
        highest[key] = max(number, highest.get(key, -1))
    lost = gaps = 0
    for key, count in acknowledged.items():
        numbers = seen.get(key, set())
        missing = [n for n in range(count) if n not in numbers]
        lost += len(missing)
        if missing:
            examples.append(f"{key} lost {len(missing)} from #{missing[0]}")
        top = highest.get(key, -1)
        holes = [n for n in missing if n < top]
        gaps += sum(1 for i, n in enumerate(holes) if i == 0 or holes[i - 1] != n - 1)
    unexpected = [f"{k}#{n}" for k, ns in seen.items() for n in ns if n >= acknowledged.get(k, 0)]
    examples += [f"never acknowledged: {', '.join(unexpected[:3])}"] if unexpected else []
    return Verdict(records, lost, duplicates, order, gaps, examples)


def parse(value: bytes) -> tuple[str, int]:
    """A record's (key, number) from its value ``<key>:<number>`` (padding after a space ignored)."""
    key, _, rest = value.decode().partition(":")
    return key, int(rest.split(" ", 1)[0])


class Unbroken:
    """Per key, the count of numbers received from 0 without a hole, kept as records arrive: so a wait for "nothing
    lost yet" costs the new records only, not a judge() of all of them each time it asks."""

    def __init__(self) -> None:
        self._unbroken: dict[str, int] = {}
        self._ahead: dict[str, set[int]] = {}  # numbers received above a key's first hole

    def add(self, key: str, number: int) -> None:
        ahead = self._ahead.setdefault(key, set())
        ahead.add(number)
        unbroken = self._unbroken.get(key, 0)
        while unbroken in ahead:
            ahead.discard(unbroken)
            unbroken += 1
        self._unbroken[key] = unbroken

    def holds_all(self, acknowledged: Mapping[str, int]) -> bool:
        """``judge(acknowledged, received).lost == 0`` for what was added (tests/test_oracles.py checks they agree)."""
        return all(self._unbroken.get(key, 0) >= count for key, count in acknowledged.items())


class NumberedWriter(threading.Thread):
    """Writes ``keys`` keys round-robin at about ``rate`` records/s, in ``bursts_per_s`` bursts, each key's records
    numbered 0, 1, 2, ... and sent to partition ``key index % partitions``, until ``finish()``; ``acknowledged`` counts
    per key what the source acknowledged (an idempotent producer, acks=all, retried for as long as the fault suite's
    faults last)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        rate: int,
        keys: int = 60,
        value_size: int = 100,
        bursts_per_s: int = 20,
    ) -> None:
        super().__init__(daemon=True, name=f"writer-{topic}")
        self.bootstrap, self.topic, self.partitions, self.rate = bootstrap, topic, partitions, rate
        self.keys, self.value_size, self.bursts_per_s = keys, value_size, bursts_per_s
        self.acknowledged: dict[str, int] = {}
        self.sent = 0
        self.errors: list[str] = []
        self._finish = threading.Event()
        self._lock = threading.Lock()

    def finish(self, timeout: float = 180) -> dict[str, int]:
        self._finish.set()
        self.join(timeout)
        assert not self.is_alive() and not self.errors, f"{self.topic}: {self.errors[:3]}"
        return dict(self.acknowledged)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        key, number = parse(msg.value() or b"")
        with self._lock:  # callbacks of one partition come in order: the count is the next number expected
            if number != self.acknowledged.get(key, 0):
                self.errors.append(f"{key}#{number} acknowledged out of order")
            self.acknowledged[key] = number + 1

    def run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "delivery.timeout.ms": 300_000,
                **QUIET,
            }
        )
        numbers = [0] * self.keys
        chunk = max(1, self.rate // self.bursts_per_s)
        started = time.monotonic()
        i = 0
        while not (i % chunk == 0 and self._finish.is_set()):
            k = i % self.keys
            value = f"k{k}:{numbers[k]} ".encode().ljust(self.value_size, b".")
            try:
                producer.produce(
                    self.topic,
                    value=value,
                    key=f"k{k}".encode(),
                    partition=k % self.partitions,
                    on_delivery=self._delivered,
                )
            except BufferError:
                producer.poll(0.05)
                continue
            numbers[k] += 1
            i += 1
            if i % chunk == 0:
                producer.poll(0)
                ahead = i / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        if producer.flush(300):
            self.errors.append("records not flushed")
        self.sent = i


class TargetReader:
    """Reads a target topic from the start as a read_committed application does, a little more at each ``advance()``
    (up to each partition's end, its last stable offset, as it is then); ``received`` keeps all, in order."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.topic, self.partitions = topic, partitions
        self.received: dict[int, list[tuple[str, int]]] = {p: [] for p in range(partitions)}
        self.offsets: dict[int, list[int]] = {p: [] for p in range(partitions)}  # each received record's offset
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"oracle-{topic}",  # never committed: assigned, not subscribed
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                **QUIET,
            }
        )
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self._admin_config: dict[str, str | int | float | bool] = {"bootstrap.servers": bootstrap, **QUIET}
        self._next = [0] * partitions  # one past the last record read
        self._unbroken = Unbroken()
        self._eof_at = [0] * partitions  # the fetch position at the last end reached (past trailing markers)

    def holds_all(self, acknowledged: Mapping[str, int]) -> bool:
        """Whether every record ``acknowledged`` counts has been read: ``judge(...).lost == 0``, from what
        ``advance`` kept (tests/test_oracles.py checks the two agree)."""
        return self._unbroken.holds_all(acknowledged)

    def advance(self, timeout_s: float = 120) -> None:
        """Read every partition up to its last stable offset as it was when the call started."""
        deadline = time.monotonic() + timeout_s
        stable = self._stable_ends(deadline)
        while True:
            behind = [p for p in range(self.partitions) if self.read_to(p) < stable[p]]
            if not behind:
                return
            if time.monotonic() > deadline:
                where = ", ".join(f"[{p}] at {self.read_to(p)} of {stable[p]}" for p in behind)
                raise AssertionError(f"{self.topic}: not read to the stable end within {timeout_s:.0f} s: {where}")
            for msg in self._consumer.consume(10_000, 1.0):
                err, p = msg.error(), msg.partition() or 0
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        self._eof_at[p] = max(self._eof_at[p], msg.offset() or 0)  # the fetch position, past markers
                        continue
                    if err.retriable() or err.code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                        continue  # a broker away: the consumer reconnects
                    raise KafkaException(err)
                key, number = parse(msg.value() or b"")
                self.received[p].append((key, number))
                self._unbroken.add(key, number)
                self.offsets[p].append(msg.offset() or 0)
                self._next[p] = (msg.offset() or 0) + 1

    def _stable_ends(self, deadline: float) -> list[int]:
        """Each partition's last stable offset now (its end when no transaction is open on it)."""
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # confluent-kafka ships it unannotated
        request = {TopicPartition(self.topic, p): latest for p in range(self.partitions)}
        said = ""
        while time.monotonic() < deadline:
            # a new client each time: a long-lived one kept answering FENCED_LEADER_EPOCH from stale metadata for
            # minutes after a target node's restart
            admin = AdminClient(self._admin_config)
            try:
                futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10)
                ends = [0] * self.partitions
                for tp, future in futures.items():
                    ends[tp.partition] = future.result(15).offset
                return ends
            except KafkaException as exc:  # a leader moving: ask again
                said = str(exc)
                time.sleep(0.5)
        raise AssertionError(f"{self.topic}: could not read the last stable offsets: {said}")

    def read_to(self, partition: int) -> int:
        """Everything below this offset of ``partition`` has been read (records, markers, aborted records)."""
        return max(self._next[partition], self._eof_at[partition])

    def all(self) -> list[tuple[str, int]]:
        return [record for p in range(self.partitions) for record in self.received[p]]

    def close(self) -> None:
        self._consumer.close()
