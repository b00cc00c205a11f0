"""core.reading.read_to_end on a real cluster: a long-lived reader reads what is new, and never waits out its
timeout when nothing is (it once did, which made checkpoints run every ~10 s)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from harness.helpers import create_topic, produce_numbered
from mirrorwatch.core.reading import read_to_end


def test_a_long_lived_reader_reads_only_what_is_new_and_returns_at_the_end(source, topic_name):
    create_topic(source.bootstrap, topic_name, 3)
    produce_numbered(source.bootstrap, topic_name, 10, partitions=2)  # partition 2 stays empty
    consumer = Consumer(
        {
            "bootstrap.servers": source.bootstrap,
            "group.id": "unused-never-committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        positions = {(topic_name, p): 0 for p in range(3)}
        consumer.assign([TopicPartition(topic_name, p, 0) for p in range(3)])
        first = sorted(m.value() for m in read_to_end(consumer, positions, 30))
        assert first == sorted(f"v{i}".encode() for i in range(10))
        assert positions == {(topic_name, 0): 5, (topic_name, 1): 5, (topic_name, 2): 0}

        started = time.monotonic()
        assert list(read_to_end(consumer, positions, 30)) == []
        assert time.monotonic() - started < 15, "waited out the timeout with nothing new to read"

        produce_numbered(source.bootstrap, topic_name, 4, partitions=3, start=10)
        assert sorted(m.value() for m in read_to_end(consumer, positions, 30)) == [b"v10", b"v11", b"v12", b"v13"]
    finally:
        consumer.close()
