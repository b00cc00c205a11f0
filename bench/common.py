"""Shared pieces for the benchmarks: fresh local clusters, raw produce/consume rates."""

from __future__ import annotations

import os
import platform
import tempfile
import time
from types import SimpleNamespace

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorwatch.core.reading import end_offsets
from mirrorwatch.localkafka import LocalClusters


def machine() -> str:
    return f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"


# "east=HOST:PORT@PID,west=HOST:PORT@PID": run on these running clusters (the broker's pid for the scripts that read
# its CPU) instead of starting two. The suite's smoke runs (tests/test_bench_smoke.py) pass its own pair: starting
# clusters per script would cost more than the runs. Figures from shared clusters mean nothing; the line's shape does.
CLUSTERS_ENV = "MIRRORWATCH_BENCH_CLUSTERS"


class GivenClusters:
    """Running clusters named in ``CLUSTERS_ENV``, used as a started ``LocalClusters`` is (``["east"].bootstrap``,
    ``.proc.pid``, ``with``); nothing to stop."""

    def __init__(self, spec: str):
        self.clusters = {}
        for item in spec.split(","):
            alias, _, where = item.partition("=")
            bootstrap, _, pid = where.partition("@")
            self.clusters[alias.strip()] = SimpleNamespace(
                bootstrap=bootstrap.strip(), proc=SimpleNamespace(pid=int(pid) if pid else None)
            )

    def __getitem__(self, alias: str) -> SimpleNamespace:
        return self.clusters[alias]

    def __enter__(self) -> GivenClusters:
        return self

    def __exit__(self, *exc) -> None:
        pass

    def stop(self) -> None:
        pass


def fresh_clusters() -> LocalClusters | GivenClusters:
    given = os.environ.get(CLUSTERS_ENV)
    if given:
        return GivenClusters(given)
    return LocalClusters(["east", "west"], tempfile.mkdtemp(prefix="mw-bench-")).start()


def warm_up(east: str, west: str, records: int = 400_000) -> None:
    """Write and read a few hundred thousand records on both clusters first: a fresh broker's JIT is cold, and
    whichever phase ran first would otherwise pay for it (we saw the same mirror run 30 % faster once warm)."""
    for bootstrap in (east, west):
        create_topic(bootstrap, "bench-warm-up", 6)
        produce_rate(bootstrap, "bench-warm-up", records, 100, 6)
        consume_rate(bootstrap, "bench-warm-up", records, 6)
    client_floor_rate(east, west, "bench-warm-up", records, 6)  # the target's write path as a mirror drives it


def warm_up_transactions(bootstrap: str, transactions: int = 300, partitions: int = 6) -> None:
    """Commit a few hundred small transactions with offsets on a cluster first: the first transactional producer on
    a fresh cluster pays for creating ``__transaction_state`` (50 partitions) and its coordinator's first loads,
    which issue 28's first sitting charged to whichever exactly-once run came first (0.54x at-least-once's records/s
    cold, 0.83x warm)."""
    topic = "bench-warm-up-transactions"
    create_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench-warm-up", "linger.ms": 5})
    group = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-warm-up-transactions"})
    producer.init_transactions(60)
    for i in range(transactions):
        producer.begin_transaction()
        for p in range(partitions):
            producer.produce(topic, b"x" * 100, partition=p)
        offsets = [TopicPartition(topic, p, i + 1) for p in range(partitions)]
        producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
    group.close()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce_rate(bootstrap: str, topic: str, count: int, size: int, partitions: int) -> float:
    """Records/s for a tuned producer (acks=all, idempotent, batching) — the broker's write ceiling here."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 10,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 500_000,
            "compression.type": "none",
        }
    )
    value = b"x" * size
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value, None, i % partitions)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    return count / (time.perf_counter() - started)


def assigned_reader(bootstrap: str, topic: str, partitions: int, group: str) -> Consumer:
    """A consumer tuned for large fetches (as the engine's), assigned to every partition of ``topic`` from 0."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 10_485_760,
            "queued.min.messages": 200_000,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


def consume_rate(bootstrap: str, topic: str, count: int, partitions: int) -> float:
    """Records/s reading the topic whole with no processing — the read ceiling here."""
    consumer = assigned_reader(bootstrap, topic, partitions, "bench-raw")
    seen, started = 0, time.perf_counter()
    while seen < count:
        seen += sum(1 for m in consumer.consume(10_000, 1.0) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


def client_floor_rate(
    east: str, west: str, topic: str, count: int, partitions: int, linger_ms: int = 5
) -> tuple[float, float]:
    """Records/s of the least a correct mirror must do per record with this client library, in one process:
    consume, produce with the source timestamp, and a delivery report per record (without reports nothing could
    be committed safely). No headers, no bookkeeping, no commits: the floor of the engine's cost, for comparison.
    Also its CPU seconds per million records (this process, every thread, while the loop runs: nothing else
    of the benchmark runs meanwhile)."""
    target = f"floor.{topic}"
    create_topic(west, target, partitions)
    consumer = assigned_reader(east, topic, partitions, "bench-floor")
    producer = Producer(
        {
            "bootstrap.servers": west,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 200_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "compression.type": "none",
        }
    )
    acked = [0]

    def delivered(err, msg) -> None:
        acked[0] += 1

    seen, started, cpu_started = 0, time.perf_counter(), time.process_time()
    while seen < count:
        for m in consumer.consume(5000, 0.01):
            if m.error():
                continue
            seen += 1
            while True:
                try:
                    # by position, as the engine does: keyword names cost the client's C parser ~1 µs per call
                    producer.produce(target, m.value(), m.key(), m.partition(), delivered, None, m.timestamp()[1])
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    consumer.close()
    return count / elapsed, cpu * 1e6 / count


def end_total(bootstrap: str, topic: str, partitions: int, consumer: Consumer | None = None) -> int:
    """The sum of the topic's end offsets. Pass a long-lived ``consumer`` to ask often: a new client per look
    loads the broker and the cores an engine under measurement runs on."""
    client = consumer or Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-raw"})
    try:
        return sum(end_offsets(client, [(topic, p) for p in range(partitions)]).values())
    finally:
        if consumer is None:
            client.close()
