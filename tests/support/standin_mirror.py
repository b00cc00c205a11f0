"""A stand-in for the mirror engine in the monitor's tests: the test commits the mirror group's offsets on the source,
copies records to the target and writes OffsetSync records by hand, so every expected lag is known exactly."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from harness.helpers import admin, create_topic
from mirrorwatch.core.naming import mirror_group, offset_syncs_topic
from mirrorwatch.core.records import OffsetSync

GROUP = mirror_group("east", "west", flow="ew")  # the flow below is "ew": its default group is per flow


PARTS = 3


def ensure_syncs_topic(bootstrap: str) -> None:
    name = offset_syncs_topic("east")
    client = admin(bootstrap)  # keep a reference: a collected client fails its pending futures
    try:
        client.create_topics([NewTopic(name, 1, 1, config={"cleanup.policy": "compact"})])[name].result(30)
    except KafkaException as exc:
        if "already exists" not in str(exc).lower() and "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for attempt in range(20):  # a freshly started cluster answers NOT_COORDINATOR / LOAD_IN_PROGRESS a while
            try:
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
                return
            except KafkaException as exc:
                if attempt == 19 or not exc.args[0].retriable() and "coordinator" not in str(exc).lower():
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def write_syncs(bootstrap: str, syncs: list[OffsetSync]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors = []
    for s in syncs:
        producer.produce(
            offset_syncs_topic("east"),
            key=s.key(),
            value=s.to_value(),
            on_delivery=lambda err, msg: errors.append(err) if err else None,
        )
    assert producer.flush(30) == 0 and not errors, errors


class StandInMirror:
    """What the engine would publish, set by hand: commits, target copies, offset syncs."""

    def __init__(self, source, target, topic):
        self.source, self.target, self.topic = source, target, topic
        create_topic(source.bootstrap, topic, PARTS)
        create_topic(target.bootstrap, f"east.{topic}", PARTS)
        ensure_syncs_topic(target.bootstrap)

    def state(
        self,
        committed: int | None,
        acked: int,
        read: int,
        target_records: int | None = None,
        downstream: int | None = None,
    ) -> None:
        """Every partition: committed offset, acked_next and read position as given."""
        if committed is not None:
            commit(self.source.bootstrap, GROUP, self.topic, {p: committed for p in range(PARTS)})
        write_syncs(
            self.target.bootstrap,
            [
                OffsetSync(
                    self.topic,
                    p,
                    max(acked - 1, 0),
                    downstream if downstream is not None else max(acked - 1, 0),
                    acked,
                    read,
                    int(time.time() * 1000),
                )
                for p in range(PARTS)
            ],
        )
