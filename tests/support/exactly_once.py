"""Reading a transactional target as a read_committed application does, and checking what it saw against the
numbered records the source was given (tests/support/helpers.produce_numbered: record i in partition i % n)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .helpers import end_offsets


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


def produce_paced(bootstrap: str, topic: str, total: int, partitions: int, rate: int, stop=None) -> None:
    """produce_numbered's records 0..total-1, at about ``rate`` records/s (faults happen while records flow)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    chunk = max(1, rate // 20)
    started = time.monotonic()
    errors: list = []
    for i in range(total):
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"k{i}".encode(),
                    value=f"v{i}".encode(),
                    partition=i % partitions,
                    on_delivery=lambda err, msg: errors.append(err) if err else None,
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % chunk == chunk - 1:
            producer.poll(0)
            ahead = (i + 1) / rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
            if stop is not None and stop.is_set():
                break
    assert producer.flush(60) == 0 and not errors, errors[:3]
