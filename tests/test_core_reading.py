"""core.reading on a real cluster: read_to_end's long-lived reader reads what is new, and never waits out its
timeout when nothing is (it once did, which made checkpoints run every ~10 s); read_at_offsets tells a record from
a marker or an aborted record at an offset (the monitor's marker look and the mirror's claim read-back share it)."""

from __future__ import annotations

import time
from contextlib import closing

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from harness.helpers import create_topic, produce_numbered
from mirrorwatch.core.reading import read_at_offsets, read_to_end, what_stands_at


@pytest.mark.parametrize(
    "wanted, offset, end_of_partition, told",
    [
        (5, 5, False, True),  # the record at the offset
        (5, 7, False, False),  # a later record first: nothing readable at 5
        (5, 6, True, False),  # the end past it: nothing readable at 5 (a marker at the partition's end)
        (5, 5, True, None),  # the end at the offset itself: nothing there yet
        (5, 4, False, None),  # an earlier offset tells nothing of 5
    ],
)
def test_what_one_delivery_tells_of_an_offset(wanted, offset, end_of_partition, told):
    assert what_stands_at(wanted, offset, end_of_partition) is told


def test_read_at_offsets_tells_records_from_markers_and_aborted_records(source, topic_name):
    """Three transactions on one partition: a b c committed (marker at 3), d e aborted (marker at 6), g committed
    (marker at 8). read_committed finds a record at 1 and 7 and nothing readable at 3, 4, 6 and 8; read_uncommitted
    sees the aborted 4, never a marker; an offset past the end is the client's error."""
    create_topic(source.bootstrap, topic_name, 1)
    txn = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": f"{topic_name}-tx"})
    txn.init_transactions(30)
    for values, commit in ((("a", "b", "c"), True), (("d", "e"), False), (("g",), True)):
        txn.begin_transaction()
        for value in values:
            txn.produce(topic_name, value.encode(), partition=0)
        assert txn.flush(30) == 0  # written before the abort (an abort drops what is still queued)
        txn.commit_transaction(30) if commit else txn.abort_transaction(30)
    probe = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "unused", "isolation.level": "read_committed"})
    try:
        # the last marker is written after the commit returns: wait until the last stable offset reaches it
        deadline = time.monotonic() + 30
        while probe.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)[1] < 9:
            assert time.monotonic() < deadline, "the last commit's marker was not written"
            time.sleep(0.2)
    finally:
        probe.close()

    def told(isolation: str, offset: int):
        consumer = Consumer(
            {
                "bootstrap.servers": source.bootstrap,
                "group.id": "unused-never-committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
                "isolation.level": isolation,
            }
        )
        try:
            with closing(read_at_offsets(consumer, {(topic_name, 0): offset}, 20)) as answers:
                return [(key, s if isinstance(s, bool) else s.code()) for key, s in answers if key is not None]
        finally:
            consumer.close()

    key = (topic_name, 0)
    committed = {offset: told("read_committed", offset) for offset in (1, 3, 4, 6, 7, 8)}
    readable = {1: True, 3: False, 4: False, 6: False, 7: True, 8: False}
    assert committed == {offset: [(key, stands)] for offset, stands in readable.items()}
    assert told("read_uncommitted", 4) == [(key, True)] and told("read_uncommitted", 3) == [(key, False)]
    assert told("read_committed", 100) == [(key, KafkaError._AUTO_OFFSET_RESET)]  # past the end: the client's error


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
