"""Reading assigned partitions up to their end offsets as they are now (offset syncs, checkpoints, heartbeats).

The end is each partition's high watermark when the read starts. Waiting for end-of-partition events instead
goes wrong on a consumer that reads again later: the event comes once per arrival at the end, so a second read
with nothing new waits out its whole timeout (that once made checkpoints run every ~10 s).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from .clients import make_consumer
from .config import ClusterConfig


def end_offsets(
    consumer: Consumer, partitions: list[tuple[str, int]], timeout_s: float = 10.0
) -> dict[tuple[str, int], int]:
    """End offsets, one query per partition: the high watermark, or under read_committed (librdkafka's default and
    every consumer of ours) the last stable offset, which a still-open transaction holds back. Ask before assign(): on a consumer that is fetching, each query
    waits behind the broker's long-poll fetch on the same connection (up to fetch.wait.max.ms, 500 ms by
    default), so reading MirrorMaker 2's 25-partition Connect offsets topic took 8 s instead of 0.2 s."""
    return {(t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=timeout_s)[1] for t, p in partitions}


def read_topic(cluster: ClusterConfig, topic: str, client_id: str, timeout_s: float = 20.0) -> list[Message]:
    """Every record of ``topic`` now, from offset 0 (empty if it does not exist), with a one-shot consumer.

    The ends are asked before assign() (see ``end_offsets``)."""
    consumer = make_consumer(cluster, client_id, None, **{"enable.partition.eof": True})
    try:
        md = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None or not md.partitions:
            return []
        positions = {(topic, p): 0 for p in md.partitions}
        ends = end_offsets(consumer, list(positions), timeout_s)
        consumer.assign([TopicPartition(topic, p, 0) for p in md.partitions])
        return list(read_to_end(consumer, positions, timeout_s, ends))
    finally:
        consumer.close()


def read_to_end(
    consumer: Consumer,
    positions: dict[tuple[str, int], int],
    timeout_s: float,
    ends: dict[tuple[str, int], int] | None = None,
) -> Iterator[Message]:
    """Yield the records of the consumer's assigned partitions from ``positions`` (next offset to read, per
    (topic, partition); updated as records come) up to the end offsets at the start (or ``ends``, when the
    caller has them already), or until ``timeout_s``.

    The caller assigns the partitions at those positions once; a long-lived reader keeps ``positions`` and
    calls again to read what arrived since. Records past the end taken at the start are yielded too (they
    arrived meanwhile); an end-of-partition event marks a partition done even when its last offsets hold no
    record (a compacted tail, transaction markers)."""
    if ends is None:
        ends = end_offsets(consumer, list(positions), timeout_s)
    deadline = time.monotonic() + timeout_s
    while any(positions[key] < end for key, end in ends.items()) and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.2):
            topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            if topic is None or partition is None or offset is None:
                continue  # a client-level error event: no partition to move
            key = (topic, partition)
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF and key in positions:
                    positions[key] = max(positions[key], offset)
                elif err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise KafkaException(err)  # no ACL to read: waiting out the timeout would only hide it
                continue
            positions[key] = offset + 1
            yield msg
