"""The fault soak's checker: the mirror group's commits and the source's end, both sides read back, and what a
reader of the target saw against what was written (lost, duplicates, per-key order)."""

from __future__ import annotations

import time
from collections import defaultdict

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

GROUP, TOPIC, PARTITIONS = "mirrorwatch-soak", "soak", 6
# The soak's own clients see the restarts it causes: their connection-refused lines (one per client per second)
# filled CI's output tail and hid the failure's own message, which says more.
QUIET = {"log_level": 0}


def _committed_and_end(source: str) -> tuple[dict[int, int], dict[int, int]]:
    consumer = Consumer({"bootstrap.servers": source, "group.id": GROUP, "enable.auto.commit": False, **QUIET})
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        for attempt in range(30):  # the coordinator moves while a cluster restarts: retry what is retriable
            try:
                committed = {tp.partition: max(0, tp.offset) for tp in consumer.committed(tps, timeout=30)}
                ends = {
                    p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                    for p in range(PARTITIONS)
                }
                return committed, ends
            except KafkaException as exc:
                if not exc.args[0].retriable() and exc.args[0].code() != KafkaError.NOT_COORDINATOR or attempt == 29:
                    raise
                time.sleep(1)
    finally:
        consumer.close()


def _read(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes, bytes]]]:
    """Every committed record of the topic, read as a read_committed application reads it, to the end of each
    partition (partition EOF: on a transactional target the last offset is a commit marker no consumer gets)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "soak-checker",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            **QUIET,
        }
    )
    out: dict[int, list] = defaultdict(list)
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        at_end: set[int] = set()
        deadline = time.monotonic() + 600
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 1.0):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                out[m.partition()].append((m.offset(), m.key(), m.value()))
    finally:
        consumer.close()
    return out


def check(source_records, target_records, windows) -> tuple[int, int, int, int]:
    """(lost, duplicates, duplicates outside in-flight windows, per-key order violations)."""
    source_offset = {(key, value): (p, off) for p, recs in source_records.items() for off, key, value in recs}
    seen: dict[tuple[bytes, bytes], int] = defaultdict(int)
    order_violations, last_first = 0, {}
    for recs in target_records.values():
        for _, key, value in recs:
            seen[(key, value)] += 1
            if seen[(key, value)] == 1:  # order of first occurrences per key
                seq = int(value)
                if seq <= last_first.get(key, -1):
                    order_violations += 1
                last_first[key] = seq
    lost = sum(1 for record in source_offset if record not in seen)
    duplicates = outside = 0
    for record, count in seen.items():
        if count > 1:
            duplicates += count - 1
            p, off = source_offset[record]
            if not any(c[p] <= off < e[p] for c, e in windows):
                outside += count - 1
    return lost, duplicates, outside, order_violations


def wait_settled(bootstrap: str, topic: str, timeout_s: float = 120) -> str | None:
    """Wait until no transaction is open on the topic (each partition's last stable offset is its end offset);
    None then, else what was still open.
    A mirror killed and not restarted leaves its transaction open until the target times it out, and until then a
    read_committed reader stops before records committed after it: reading then would count them lost."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET})
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
    deadline = time.monotonic() + timeout_s
    said = "no answer"
    while time.monotonic() < deadline:
        try:
            ends = {tp.partition: f.result(30).offset for tp, f in admin.list_offsets(request).items()}
            stable = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED)
            stables = {tp.partition: f.result(30).offset for tp, f in stable.items()}
            if stables == ends:
                return None
            said = ", ".join(
                f"[{p}] stable {stables[p]} < end {ends[p]}" for p in sorted(ends) if stables[p] != ends[p]
            )
        except KafkaException as exc:
            said = str(exc)  # a broker restarting: ask again
        time.sleep(1)
    return said
