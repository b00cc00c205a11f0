"""Reading assigned partitions up to their end offsets as they are now (offset syncs, checkpoints, heartbeats).

The end is each partition's high watermark when the read starts. Waiting for end-of-partition events instead
goes wrong on a consumer that reads again later: the event comes once per arrival at the end, so a second read
with nothing new waits out its whole timeout (that once made checkpoints run every ~10 s).
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator

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


def what_stands_at(wanted: int, offset: int, end_of_partition: bool) -> bool | None:
    """What one delivery tells of offset ``wanted`` of a consumer assigned there: True, the record at it was
    delivered; False, a later record, or the partition's end past it, came first, so no record the consumer may
    read stands there (a transaction marker, or for a read_committed consumer a record of an aborted transaction);
    None, nothing told yet (an end at the offset itself, or an earlier offset)."""
    if offset > wanted:
        return False
    if offset == wanted and not end_of_partition:
        return True
    return None


def read_at_offsets(
    consumer: Consumer, wanted: dict[tuple[str, int], int], timeout_s: float, poll_s: float = 0.5
) -> Generator[tuple[tuple[str, int] | None, bool | KafkaError], None, None]:
    """Assign ``consumer`` at one offset per partition and yield, once per partition, what stands there
    (:func:`what_stands_at`: True a record, False nothing readable), or the error the client gave for it, after which
    that partition is not read further. Errors without a partition (client-level) are yielded with key None.
    Partitions not told by ``timeout_s`` are not yielded. The consumer needs ``enable.partition.eof`` (an offset at the
    end is told by the end event). It is unassigned when the generator ends or is closed: a caller that stops early
    closes it (``contextlib.closing``) before it closes or keeps the consumer."""
    pending = dict(wanted)
    if not pending:
        return
    consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in pending.items()])
    deadline = time.monotonic() + timeout_s
    try:
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(len(pending), min(poll_s, max(0.0, deadline - time.monotonic()))):
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                key = (topic, partition) if topic is not None and partition is not None else None
                err = msg.error()
                at_end = err is not None and err.code() == KafkaError._PARTITION_EOF
                if err is not None and not at_end:
                    if key is not None:
                        if key not in pending:
                            continue
                        del pending[key]
                    yield key, err
                    continue
                if key is None or key not in pending or offset is None:
                    continue
                told = what_stands_at(pending[key], offset, at_end)
                if told is not None:
                    del pending[key]
                    yield key, told
    finally:
        consumer.unassign()
