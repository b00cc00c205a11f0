"""bench.mm2's engines and how one run of one is measured (a helper module of bench/mm2.py, not a script).

A *variant* is an engine with its delivery setting: our engine at-least-once or exactly-once (at a transaction
interval), the real MirrorMaker 2 at-least-once or with exactly-once source support. Every reader here reads the
target with ``isolation.level=read_committed``, for every variant alike: on a transactional target that is when
a record is there for an application, and on any other target it changes nothing.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from mirrorwatch.core.reading import end_offsets
from mirrorwatch.localkafka.mm2 import LocalMirrorMaker2, mm2_properties
from mirrorwatch.localkafka.process import free_port

from .common import end_total, produce_rate

PARTITIONS = 6
CLK_TCK = os.sysconf("SC_CLK_TCK")
LAST = b"L"  # first byte of each partition's last throughput record (the others are b"x" * size)


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()  # fields after the command name


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system, every thread) of process ``pid`` and all its descendants, live or reaped: an
    engine that forked helpers is charged for them, and nothing else on the machine is."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])
            except (OSError, IndexError, ValueError):
                pass  # gone since listed
    tree, grew = {pid}, True
    while grew:
        found = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= found
        grew = bool(found)
    ticks = 0
    for member in tree:
        try:
            fields = _stat(member)
        except OSError:
            continue
        # utime + stime, plus cutime + cstime: children that already exited and were reaped
        ticks += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
    return ticks / CLK_TCK


def mb_per_core_s(record_bytes: int, cpu_s_per_million: float) -> float:
    """MB (10^6 bytes of record values) moved per engine CPU second = MB/s per fully used core."""
    return record_bytes / cpu_s_per_million if cpu_s_per_million > 0 else float("nan")


@dataclass(frozen=True)
class Variant:
    """One engine as measured: ``name`` is its key in the figures (``ours``, ``mm2``, ``ours_eos``, ``mm2_eos``,
    ``ours_eos_500ms``, ``ours_eos_timer``); ``transaction_interval_s`` is ours' ``mirror.transaction_interval_s``
    (exactly-once)."""

    name: str
    engine: str  # "ours" or "mm2"
    exactly_once: bool = False
    transaction_interval_s: float | None = None
    # ours' mirror.transaction_min_interval_s (None: its default); equal to the interval, a fixed timer
    transaction_min_interval_s: float | None = None
    transaction_hold_s: float | None = None  # ours' mirror.transaction_hold_s (None: its default)

    def start(self, east: str, west: str, topic: str, workdir: Path) -> subprocess.Popen:
        if self.engine == "mm2":
            return start_mm2(east, west, topic, workdir, self.exactly_once)
        if not self.exactly_once:
            return start_ours(east, west, topic, workdir)
        shortest: dict[str, float] = {}
        if self.transaction_min_interval_s is not None:
            shortest["transaction_min_interval_s"] = self.transaction_min_interval_s
        if self.transaction_hold_s is not None:
            shortest["transaction_hold_s"] = self.transaction_hold_s
        return start_ours(
            east,
            west,
            topic,
            workdir,
            delivery="exactly_once",
            transaction_interval_s=self.transaction_interval_s,
            **shortest,
        )


def start_ours(east: str, west: str, topics: str, workdir: Path, **mirror) -> subprocess.Popen:
    """`mirror run` on its defaults (plus ``mirror`` settings), metrics and heartbeats off, topics refreshed every
    2 s. Its log is ``ours-<topic>.log`` in ``workdir`` (kept: a run's errors are read there)."""
    config = {
        "clusters": {"east": {"bootstrap.servers": east}, "west": {"bootstrap.servers": west}},
        "flows": {"ew": {"source": "east", "target": "west", "topics": [topics], "group": f"ours-{topics}"}},
        "mirror": {
            "metrics_port": None,
            "heartbeats": False,
            "checkpoint_interval_s": 3600,
            "refresh_interval_s": 2,
            **mirror,
        },
    }
    path = workdir / f"ours-{topics}.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "mirror"), "run", "--config", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / f"ours-{topics}.log", "w"),
    )


def mm2_exactly_once_settings() -> dict[str, str]:
    """What MM2 4.3 in dedicated mode needs for exactly-once (connect/mirror/README.md, "Exactly-once"; KIP-618,
    KIP-710), each checked against the connect-mirror 4.3.1 classes:
    - ``west.exactly.once.source.support``: a worker setting, and MirrorMakerConfig.workerConfig builds the
      worker's config from the TARGET cluster's prefixed keys (a bare key is not passed on). The connector's own
      ``exactly.once.support`` can stay at its default, ``requested``: the worker then runs the tasks
      transactionally; MirrorSourceConnector reports SUPPORTED only with a read_committed source consumer.
    - ``east.consumer.isolation.level = read_committed``: as our engine reads (librdkafka's default), so neither
      mirrors aborted source records, and the comparison is like for like.
    - the records and the source offsets are committed in one transaction, so the offsets topic must be on the
      target: in dedicated mode the worker's offsets topic always is (mm2-offsets.<source>.internal there).
      Its own Connect group and internal topics here: a Connect cluster that ran without exactly-once must go
      through ``preparing`` first, and the at-least-once MM2 runs of the same sitting use the default ones.
    - internal REST (``dedicated.mode.enable.internal.rest``): documented as necessary; with one node it is its
      own leader and never forwards a fencing request, but the measured setup is the documented one."""
    return {
        "west.exactly.once.source.support": "enabled",
        "east.consumer.isolation.level": "read_committed",
        "west.group.id": "east-mm2-eos",
        "offset.storage.topic": "mm2-offsets.east-eos.internal",
        "config.storage.topic": "mm2-configs.east-eos.internal",
        "status.storage.topic": "mm2-status.east-eos.internal",
        "dedicated.mode.enable.internal.rest": "true",
        "listeners": f"http://127.0.0.1:{free_port()}",
    }


def start_mm2(east: str, west: str, topics: str, workdir: Path, exactly_once: bool = False) -> subprocess.Popen:
    props = mm2_properties(
        {"east": east, "west": west},
        "east",
        "west",
        topics,
        **{
            "refresh.topics.interval.seconds": "2",
            "tasks.max": "2",
            "emit.heartbeats.enabled": "false",
            "emit.checkpoints.enabled": "false",
            **(mm2_exactly_once_settings() if exactly_once else {}),
        },
    )
    return LocalMirrorMaker2(workdir / f"mm2-{topics}", props, heap="-Xms512m -Xmx1g").start(die_with_parent=False).proc


def produce_numbered_last(east: str, topic: str, count: int, size: int) -> float:
    """``count`` records of ``size`` bytes, round-robin over the partitions; each partition's last one starts
    with ``LAST`` (so a reader knows it has everything without counting offsets, which markers inflate). Returns
    the records/s of the bulk (bench.common.produce_rate: the broker's write ceiling)."""
    rate = produce_rate(east, topic, count - PARTITIONS, size, PARTITIONS)
    producer = Producer({"bootstrap.servers": east, "acks": "all", "enable.idempotence": True})
    for p in range(PARTITIONS):
        producer.produce(topic, LAST * size, None, p)
    if producer.flush(30):
        raise RuntimeError(f"{topic}: the last records were not acknowledged")
    return rate


def read_committed_consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            **extra,
        }
    )


def throughput(
    west: str, proc: subprocess.Popen, target: str, count: int, timeout_s: float = 600
) -> tuple[float, float]:
    """Records/s on the target from its first record until a read_committed reader has each partition's last
    record, and the engine's CPU seconds per million records over the same span.

    The end offsets (asked every 50 ms through one long-lived client) say when the first record came, and when a
    partition holds at least its share: on a transactional target they also count commit markers, so they
    cannot say when every record is readable. From then a read_committed reader reads that partition's tail,
    from offset share - 1 (the last record is at or above it: markers only push records up), until the record
    starting with LAST arrives. It asks no end offset (those wait behind its fetches), and never waits for an
    offset: the last offset of a transactional partition is a marker, which no consumer receives."""
    share = count // PARTITIONS
    watcher = Consumer({"bootstrap.servers": west, "group.id": "bench-watch"})
    tail = read_committed_consumer(west, "bench-tail", **{"fetch.wait.max.ms": 10})
    first, waiting, done = None, set(range(PARTITIONS)), set()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"engine exited with {proc.returncode}")
            if waiting:
                try:
                    ends = end_offsets(watcher, [(target, p) for p in range(PARTITIONS)])
                except Exception:
                    ends = {}  # the target topic does not exist yet
                if first is None and sum(ends.values()) > 0:
                    first, first_count, cpu_first = time.perf_counter(), sum(ends.values()), cpu_seconds(proc.pid)
                ready = {p for p in waiting if ends.get((target, p), 0) >= share}
                if ready:
                    tail.incremental_assign([TopicPartition(target, p, share - 1) for p in ready])
                    waiting -= ready
            if len(waiting) < PARTITIONS:
                for m in tail.consume(1000, 0.05):
                    if m.error() is None and m.value()[:1] == LAST:
                        done.add(m.partition())
                if len(done) == PARTITIONS:
                    now = time.perf_counter()
                    spent = max(1, count - first_count)
                    return spent / (now - first), (cpu_seconds(proc.pid) - cpu_first) * 1e6 / spent
            else:
                time.sleep(0.05)
    finally:
        watcher.close()
        tail.close()
    raise RuntimeError(
        f"{target}: timed out after {timeout_s:.0f} s: {PARTITIONS - len(waiting)} of {PARTITIONS} partitions hold "
        f"their share, a read_committed reader has the last record of {len(done)}"
    )


def records_readable(west: str, topic: str, timeout_s: float = 120) -> int:
    """How many records a read_committed reader finds in ``topic`` now, reading each partition to its end (the
    client's partition-EOF event, not an offset: see ``throughput``). Equals the records written when the engine
    neither lost nor duplicated any."""
    reader = read_committed_consumer(
        west, "bench-count", **{"enable.partition.eof": True, "fetch.max.bytes": 52_428_800}
    )
    reader.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen, at_end = 0, set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for m in reader.consume(10_000, 1.0):
                if m.error() is None:
                    seen += 1
                    at_end.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
    finally:
        reader.close()
    if len(at_end) < PARTITIONS:
        raise RuntimeError(f"{topic}: not at the end of every partition within {timeout_s} s")
    return seen


def paced_writer(east: str, topic: str, rate: int, total: int, elapsed_s=None) -> None:
    """Write ``total`` 100 B records at ``rate``/s (run in its own process: see ``latency``); the seconds it took
    go to ``elapsed_s`` (a shared value), so a writer that could not keep the rate shows."""
    producer = Producer({"bootstrap.servers": east, "linger.ms": 1, "acks": "all"})
    started = time.perf_counter()
    for i in range(total):
        while True:
            try:
                producer.produce(topic, b"x" * 100, None, i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 100 == 0:
            producer.poll(0)
            pause = started + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
    producer.flush(30)
    if elapsed_s is not None:
        elapsed_s.value = time.perf_counter() - started


def latency(east: str, west: str, source_topic: str, target_topic: str, rate: int, seconds: float) -> dict:
    """p50/p99 milliseconds from source timestamp to arrival on the target, at a fixed produce rate, as a
    read_committed reader sees it (on a transactional target a record arrives when its transaction commits).
    The reader waits for a number of records, not for an offset, and gives up 30 s after the writer ends. The
    writer is a separate process: at 50k/s a writer thread would hold this process's GIL while the reader waits
    to stamp arrivals, and that wait would count as replication latency."""
    consumer = read_committed_consumer(west, "bench-latency", **{"fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(target_topic, p), timeout=10)[1] for p in range(PARTITIONS)
    }
    consumer.assign([TopicPartition(target_topic, p, o) for p, o in ends.items()])
    samples: list[float] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            for m in consumer.consume(1000, 0.05):
                if not m.error():
                    samples.append(time.time() - m.timestamp()[1] / 1000)

    reader = threading.Thread(target=read)
    reader.start()
    total = int(rate * seconds)
    spawn = multiprocessing.get_context("spawn")
    elapsed_s = spawn.Value("d", float("nan"))
    writer = spawn.Process(target=paced_writer, args=(east, source_topic, rate, total, elapsed_s))
    try:
        writer.start()
        writer.join(seconds * 10 + 60)
        deadline = time.monotonic() + 30
        while len(samples) < total and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if writer.is_alive():
            writer.terminate()
            writer.join(10)
        stop.set()
        reader.join()
        consumer.close()
    if writer.exitcode != 0:
        raise RuntimeError(f"the latency writer exited with {writer.exitcode}")
    samples.sort()
    # records_seen < records_sent means the slowest were cut off by the wait above: the percentiles are then low
    figures = {
        "records_sent": total,
        "records_seen": len(samples),
        "written_per_s": total / elapsed_s.value,
        "p50_ms": float("nan"),
        "p99_ms": float("nan"),
    }
    if samples:
        figures["p50_ms"] = samples[len(samples) // 2] * 1000
        figures["p99_ms"] = samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000
    return figures


def wait_mirroring(east: str, west: str, topic: str, timeout_s: float = 90) -> None:
    """Until the engine mirrors ``topic`` (its target topic exists and a first record arrives)."""
    deadline = time.monotonic() + timeout_s
    producer = Producer({"bootstrap.servers": east})
    while time.monotonic() < deadline:
        producer.produce(topic, b"warm", None, 0)
        producer.flush(5)
        try:
            if end_total(west, f"east.{topic}", PARTITIONS) > 0:
                return
        except Exception:
            pass
        time.sleep(1)
    raise RuntimeError(f"east.{topic} never appeared on the target")
