"""Small Kafka helpers for tests: create topics, produce numbered records, read a topic back whole."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

# ``auth``: extra client properties (SASL_SSL credentials for the tests/support/sasl.py clusters); none for PLAINTEXT.


def admin(bootstrap: str, auth: dict | None = None) -> AdminClient:
    return AdminClient({**(auth or {}), "bootstrap.servers": bootstrap})


def create_topic(
    bootstrap: str, name: str, partitions: int = 6, config: dict | None = None, auth: dict | None = None
) -> None:
    client = admin(bootstrap, auth)  # keep a reference: a collected client fails its pending futures
    client.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(30)
    wait_for_topic(bootstrap, name, partitions, auth=auth)


def wait_for_topic(
    bootstrap: str, name: str, partitions: int | None = None, timeout_s: float = 60, auth: dict | None = None
) -> int:
    a = admin(bootstrap, auth)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = a.list_topics(name, timeout=5).topics.get(name)
        if (
            md is not None
            and md.error is None
            and md.partitions
            and (partitions is None or len(md.partitions) >= partitions)
        ):
            return len(md.partitions)
        time.sleep(0.2)
    raise AssertionError(f"topic {name} did not appear on {bootstrap} within {timeout_s}s")


def produce_numbered(
    bootstrap: str,
    topic: str,
    count: int,
    partitions: int = 6,
    start: int = 0,
    value_size: int = 0,
    headers: bool = False,
    **extra,
) -> None:
    """Records key=f"k{i}", value=f"v{i}" padded, into partition i % partitions, acks=all."""
    props = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    props.update(extra)
    producer = Producer(props)
    errors: list = []
    for i in range(start, start + count):
        value = f"v{i}".encode().ljust(value_size, b".")
        kwargs = {"headers": [("h", f"{i}".encode())]} if headers else {}
        while True:
            try:
                producer.produce(
                    topic,
                    key=f"k{i}".encode(),
                    value=value,
                    partition=i % partitions,
                    on_delivery=lambda err, msg: errors.append(err) if err else None,
                    **kwargs,
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0 and not errors, f"produce failed: {errors[:3]} ({remaining} unflushed)"


def end_offsets(bootstrap: str, topic: str, auth: dict | None = None) -> dict[int, int]:
    consumer = Consumer(
        {
            **(auth or {}),
            "bootstrap.servers": bootstrap,
            "group.id": "unused-never-committed",
            "enable.auto.commit": False,
        }
    )
    try:
        for attempt in range(40):  # a just-created topic's partitions may not have a leader yet
            try:
                md = consumer.list_topics(topic, timeout=10).topics[topic]
                return {
                    p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions
                }
            except KafkaException as exc:
                if (
                    not exc.args[0].retriable()
                    and exc.args[0].code()
                    not in (
                        KafkaError.UNKNOWN_TOPIC_OR_PART,
                        KafkaError._UNKNOWN_PARTITION,
                        KafkaError.LEADER_NOT_AVAILABLE,
                        KafkaError.NOT_LEADER_FOR_PARTITION,
                        # a broker just thawed: the client dropped its handle to it and makes a new one
                        KafkaError._DESTROY_BROKER,
                        KafkaError._TRANSPORT,
                    )
                    or attempt == 39
                ):
                    raise
                time.sleep(0.25)
    finally:
        consumer.close()


def read_all(
    bootstrap: str, topic: str, timeout_s: float = 60, expect: int | None = None, auth: dict | None = None
) -> list:
    """Every record of the topic (all partitions, from the start up to the end offsets seen now)."""
    ends = end_offsets(bootstrap, topic, auth)
    if expect is not None:
        deadline = time.monotonic() + timeout_s
        while sum(ends.values()) < expect and time.monotonic() < deadline:
            time.sleep(0.5)
            ends = end_offsets(bootstrap, topic, auth)
    consumer = Consumer(
        {
            **(auth or {}),
            "bootstrap.servers": bootstrap,
            "group.id": "unused-never-committed",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
    records, seen = [], {p: 0 for p in ends}
    deadline = time.monotonic() + timeout_s
    try:
        while any(seen[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 1.0):
                if msg.error():
                    raise KafkaException(msg.error())
                records.append(msg)
                seen[msg.partition()] = msg.offset() + 1
    finally:
        consumer.close()
    return records


def kafka_error_code(call) -> int | str:
    """The Kafka error code ``call()`` raises, or "answered" when it answers."""
    try:
        call()
    except KafkaException as exc:
        return exc.args[0].code()
    return "answered"
