"""Reading a transactional target as a read_committed application does, and checking what it saw against the
numbered records the source was given (harness/helpers.produce_numbered: record i in partition i % n)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from harness.helpers import end_offsets


def read_committed(bootstrap: str, topic: str, timeout_s: float = 60) -> list:
    """Every committed record of the topic, up to its last stable offset now. Reading to the end offset would
    wait for ever on a transactional topic: its last offset is a commit marker, which no consumer receives."""
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-never-committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    records, at_end = [], set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < len(ends) and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 1.0):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise KafkaException(err)
                at_end.discard(msg.partition())
                records.append(msg)
    finally:
        consumer.close()
    assert len(at_end) == len(ends), f"{topic}: not at the end of every partition within {timeout_s} s"
    return records


@dataclass(frozen=True)
class Delivery:
    records: int
    lost: int
    duplicates: int
    order_violations: int

    @property
    def exact(self) -> bool:
        return self.lost == 0 and self.duplicates == 0 and self.order_violations == 0


def delivery(records: list, produced: int, partitions: int) -> Delivery:
    """What a reader of the mirrored topic saw, against records 0..produced-1 written by produce_numbered."""
    seen: dict[int, list[int]] = {p: [] for p in range(partitions)}
    for m in records:
        seen[m.partition()].append(int(m.key()[1:]))
    lost = duplicates = order = 0
    for p, numbers in seen.items():
        expected = set(range(p, produced, partitions))
        distinct = set(numbers)
        lost += len(expected - distinct)
        duplicates += len(numbers) - len(distinct)
        order += sum(1 for a, b in zip(numbers, numbers[1:]) if b <= a)
    return Delivery(len(records), lost, duplicates, order)


class PacedWriter(threading.Thread):
    """produce_numbered's records 0, 1, 2, … at about ``rate`` records/s until ``finish()`` (faults happen while
    records flow, however slow the machine); ``produced`` is then how many were written."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int, limit: int = 10_000_000) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.rate, self.limit = bootstrap, topic, partitions, rate, limit
        self.produced = 0
        self.errors: list = []
        self._finish = threading.Event()

    def finish(self, timeout: float = 120) -> int:
        self._finish.set()
        self.join(timeout)
        assert not self.is_alive() and not self.errors, self.errors[:3]
        return self.produced

    def run(self) -> None:
        from confluent_kafka import Producer

        props = {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
        producer = Producer(props)
        chunk = max(1, self.rate // 20)
        started = time.monotonic()
        i = 0
        while i < self.limit and not (i % chunk == 0 and self._finish.is_set()):
            try:
                producer.produce(
                    self.topic,
                    key=f"k{i}".encode(),
                    value=f"v{i}".encode(),
                    partition=i % self.partitions,
                    on_delivery=lambda err, msg: self.errors.append(err) if err else None,
                )
            except BufferError:
                producer.poll(0.05)
                continue
            i += 1
            if i % chunk == 0:
                producer.poll(0)
                ahead = i / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        if producer.flush(60):
            self.errors.append("records not flushed")
        self.produced = i
