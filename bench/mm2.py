"""Benchmarks 2 and 3: mirrorwatch's engine vs the real MirrorMaker 2 on the same clusters, topics and records.

2. throughput (records/s from the first record on the target until all are there) and CPU seconds per
   million records, at 100 B and 1 KB, 6 partitions → ours / MM2;
3. replication latency at a fixed rate (default 5k records/s): p50/p99 of (arrival on the target as seen by an
   independent reader − source record timestamp), ours and MM2 side by side. Both engines keep the source
   timestamp, so the same reader measures both.
MM2 runs in dedicated mode (org.apache.kafka.connect.mirror.MirrorMaker) from the cached connect-mirror jars
with an mm2.properties written here. Usage: .venv/bin/python -m bench.mm2 [--records N] [--rate R]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from mirrorwatch.localkafka.mm2 import LocalMirrorMaker2, mm2_properties

from .common import create_topic, end_total, fresh_clusters, machine, produce_rate, warm_up

PARTITIONS = 6
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def start_ours(east: str, west: str, topics: str, workdir: Path, **mirror) -> subprocess.Popen:
    """`mirror run` on its defaults (plus ``mirror`` settings), metrics and heartbeats off, topics refreshed every 2 s."""
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
    path = workdir / "ours.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "mirror"), "run", "--config", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=open(workdir / "ours.log", "w"),
    )


def start_mm2(east: str, west: str, topics: str, workdir: Path) -> subprocess.Popen:
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
        },
    )
    return LocalMirrorMaker2(workdir / f"mm2-{topics}", props, heap="-Xms512m -Xmx1g").start(die_with_parent=False).proc


def throughput(
    west: str, proc: subprocess.Popen, target: str, count: int, timeout_s: float = 600
) -> tuple[float, float]:
    """Records/s on the target from its first record until all ``count`` are there, and the engine's CPU seconds
    per million records over the same span (end offsets asked every 50 ms through one long-lived client)."""
    watcher = Consumer({"bootstrap.servers": west, "group.id": "bench-watch"})
    first = None
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"engine exited with {proc.returncode}")
            try:
                done = end_total(west, target, PARTITIONS, watcher)
            except Exception:
                done = 0
            now = time.perf_counter()
            if done and first is None:
                first, first_count, cpu_first = now, done, cpu_seconds(proc.pid)
            if done >= count:
                return (count - first_count) / (now - first), (cpu_seconds(proc.pid) - cpu_first) * 1e6 / max(
                    1, count - first_count
                )
            time.sleep(0.05)
    finally:
        watcher.close()
    raise RuntimeError("timed out")


def latency(
    east: str, west: str, source_topic: str, target_topic: str, rate: int, seconds: float
) -> tuple[float, float]:
    """p50/p99 seconds from source timestamp to arrival on the target, at a fixed produce rate."""
    consumer = Consumer(
        {
            "bootstrap.servers": west,
            "group.id": "bench-latency",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
            "fetch.min.bytes": 1,
        }
    )
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
    producer = Producer({"bootstrap.servers": east, "linger.ms": 1, "acks": "all"})
    total = int(rate * seconds)
    started = time.perf_counter()
    for i in range(total):
        producer.produce(source_topic, b"x" * 100, None, i % PARTITIONS)
        if i % 100 == 0:
            producer.poll(0)
            pause = started + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
    producer.flush(30)
    deadline = time.monotonic() + 30
    while len(samples) < total and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    reader.join()
    consumer.close()
    samples.sort()
    if not samples:
        return float("nan"), float("nan")
    return samples[len(samples) // 2], samples[min(len(samples) - 1, int(len(samples) * 0.99))]


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=600_000)
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--latency-seconds", type=float, default=20)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    workdir = Path(tempfile.mkdtemp(prefix="mw-bench-mm2-"))
    # ours, MM2, MM2, ours: each engine's mean over an ABBA order cancels a machine that drifts during the run
    order = ("ours", "mm2", "mm2", "ours")
    with fresh_clusters() as clusters:
        east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
        warm_up(east, west)
        for size in (100, 1024):
            count = args.records if size == 100 else args.records // 2
            results: dict[str, list[tuple[float, float]]] = {"ours": [], "mm2": []}
            per_run = []
            for i, engine in enumerate(order):
                topic = f"{engine}-tp-{size}-{i}"
                create_topic(east, topic, PARTITIONS)
                produce_rate(east, topic, count, size, PARTITIONS)
                proc = (start_ours if engine == "ours" else start_mm2)(east, west, topic, workdir)
                try:
                    results[engine].append(throughput(west, proc, f"east.{topic}", count))
                    per_run.append((engine, results[engine][-1]))
                finally:
                    proc.terminate()
                    proc.wait(60)
            (ours, ours_cpu), (mm2, mm2_cpu) = (
                tuple(sum(x) / len(x) for x in zip(*results[e])) for e in ("ours", "mm2")
            )
            runs = ", ".join(f"{e} {r:,.0f}" for e, (r, _) in per_run)
            print(
                f"{size:>5} B x {count}: ours {ours:,.0f}/s ({ours * size / 1e6:.1f} MB/s, {ours_cpu:.1f} CPU s/M), "
                f"MM2 {mm2:,.0f}/s ({mm2 * size / 1e6:.1f} MB/s, {mm2_cpu:.1f} CPU s/M); ours / MM2 = {ours / mm2:.2f} "
                f"(runs: {runs})",
                flush=True,
            )
        latencies: dict[str, list[tuple[float, float]]] = {"ours": [], "mm2": []}
        for i, engine in enumerate(order):
            topic = f"{engine}-lat-{i}"
            create_topic(east, topic, PARTITIONS)
            proc = (start_ours if engine == "ours" else start_mm2)(east, west, topic, workdir)
            try:
                wait_mirroring(east, west, topic)
                latency(east, west, topic, f"east.{topic}", args.rate, 3)  # settle: first fetches, JIT, batches
                latencies[engine].append(latency(east, west, topic, f"east.{topic}", args.rate, args.latency_seconds))
                p50, p99 = latencies[engine][-1]
                print(
                    f"latency at {args.rate}/s, {engine} (run {i + 1} of {len(order)}): p50 {p50 * 1000:.1f} ms, "
                    f"p99 {p99 * 1000:.1f} ms",
                    flush=True,
                )
            finally:
                proc.terminate()
                proc.wait(60)
        (o50, o99), (m50, m99) = (tuple(sum(x) / len(x) for x in zip(*latencies[e])) for e in ("ours", "mm2"))
        print(
            f"latency at {args.rate}/s, mean of two runs each: ours p50 {o50 * 1000:.1f} ms, p99 {o99 * 1000:.1f} ms; "
            f"MM2 p50 {m50 * 1000:.1f} ms, p99 {m99 * 1000:.1f} ms; ours / MM2 = {o50 / m50:.2f} (p50), {o99 / m99:.2f} (p99)"
        )


if __name__ == "__main__":
    main()
