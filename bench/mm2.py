"""Benchmarks 2 and 3: mirrorwatch's engine vs the real MirrorMaker 2 on the same clusters, topics and records.

2. throughput (records/s from the first record on the target until all are there), CPU seconds per million
   records and MB/s per engine CPU core (record bytes moved / the engine process's CPU seconds; for MM2 the
   JVM's), at 100 B and 1 KB, 6 partitions → ours / MM2;
3. replication latency at fixed rates (default 5k and 50k records/s): p50/p99 of (arrival on the target as seen
   by an independent reader − source record timestamp), ours and MM2 side by side. Both engines keep the source
   timestamp, so the same reader measures both; the records are written by a separate process, so the reader's
   timing does not wait on the writer's Python.
Both parts run the engines in ABBA order (ours, MM2, MM2, ours) in one sitting. Ends with one JSON line
(bench/README.md). MM2 runs in dedicated mode (org.apache.kafka.connect.mirror.MirrorMaker) from the cached
connect-mirror jars with an mm2.properties written here.
Usage: .venv/bin/python -m bench.mm2 [--records N] [--rates 5000,50000] [--latency-seconds S]
"""

from __future__ import annotations

import argparse
import multiprocessing
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
from .jsonline import BenchRun

PARTITIONS = 6
CLK_TCK = os.sysconf("SC_CLK_TCK")


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
    """p50/p99 milliseconds from source timestamp to arrival on the target, at a fixed produce rate. The writer is a
    separate process: at 50k/s a writer thread would hold this process's GIL while the reader waits to stamp
    arrivals, and that wait would count as replication latency."""
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


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def throughput_part(east: str, west: str, workdir: Path, records: int, order: tuple[str, ...]) -> dict:
    figures = {}
    for size in (100, 1024):
        count = records if size == 100 else records // 2
        runs: list[dict] = []
        for i, engine in enumerate(order):
            topic = f"{engine}-tp-{size}-{i}"
            create_topic(east, topic, PARTITIONS)
            produce_rate(east, topic, count, size, PARTITIONS)
            proc = (start_ours if engine == "ours" else start_mm2)(east, west, topic, workdir)
            try:
                rate, cpu = throughput(west, proc, f"east.{topic}", count)
            finally:
                proc.terminate()
                proc.wait(60)
            runs.append(
                {
                    "engine": engine,
                    "records_per_s": rate,
                    "cpu_s_per_million": cpu,
                    "mb_per_s_per_core": mb_per_core_s(size, cpu),
                }
            )
        summary: dict = {"records": count}
        for engine in ("ours", "mm2"):
            mine = [r for r in runs if r["engine"] == engine]
            rate, cpu = mean(r["records_per_s"] for r in mine), mean(r["cpu_s_per_million"] for r in mine)
            summary[engine] = {
                "records_per_s": rate,
                "mb_per_s": rate * size / 1e6,
                "cpu_s_per_million": cpu,
                "mb_per_s_per_core": mb_per_core_s(size, cpu),
            }
        ours, mm2 = summary["ours"], summary["mm2"]
        summary["ours_over_mm2_records_per_s"] = ours["records_per_s"] / mm2["records_per_s"]
        summary["ours_over_mm2_mb_per_s_per_core"] = ours["mb_per_s_per_core"] / mm2["mb_per_s_per_core"]
        summary["runs"] = runs
        figures[f"{size}_bytes"] = summary
        shown = ", ".join(f"{r['engine']} {r['records_per_s']:,.0f}" for r in runs)
        print(
            f"{size:>5} B x {count}: ours {ours['records_per_s']:,.0f}/s ({ours['mb_per_s']:.1f} MB/s, "
            f"{ours['cpu_s_per_million']:.1f} CPU s/M, {ours['mb_per_s_per_core']:.1f} MB/s per core), "
            f"MM2 {mm2['records_per_s']:,.0f}/s ({mm2['mb_per_s']:.1f} MB/s, {mm2['cpu_s_per_million']:.1f} CPU s/M, "
            f"{mm2['mb_per_s_per_core']:.1f} MB/s per core); ours / MM2 = {summary['ours_over_mm2_records_per_s']:.2f} "
            f"(records/s), {summary['ours_over_mm2_mb_per_s_per_core']:.2f} (MB/s per core) (runs: {shown})",
            flush=True,
        )
    return figures


def latency_part(east: str, west: str, workdir: Path, rates: list[int], seconds: float, order: tuple[str, ...]) -> dict:
    """Each engine is started once per slot of the ABBA order and measured at every rate (in the same order for
    both engines), so both rates come from the same sitting and the same engine processes."""
    runs: dict[int, list[dict]] = {rate: [] for rate in rates}
    for i, engine in enumerate(order):
        topic = f"{engine}-lat-{i}"
        create_topic(east, topic, PARTITIONS)
        proc = (start_ours if engine == "ours" else start_mm2)(east, west, topic, workdir)
        try:
            wait_mirroring(east, west, topic)
            for rate in rates:
                latency(east, west, topic, f"east.{topic}", rate, 3)  # settle: first fetches, JIT, batch sizes
                result = {"engine": engine, **latency(east, west, topic, f"east.{topic}", rate, seconds)}
                runs[rate].append(result)
                print(
                    f"latency at {rate}/s, {engine} (run {i + 1} of {len(order)}): p50 {result['p50_ms']:.1f} ms, "
                    f"p99 {result['p99_ms']:.1f} ms ({result['records_seen']:,} of {result['records_sent']:,} seen, written at "
                    f"{result['written_per_s']:,.0f}/s)",
                    flush=True,
                )
        finally:
            proc.terminate()
            proc.wait(60)
    figures = {}
    for rate in rates:
        summary: dict = {}
        for engine in ("ours", "mm2"):
            mine = [r for r in runs[rate] if r["engine"] == engine]
            summary[engine] = {"p50_ms": mean(r["p50_ms"] for r in mine), "p99_ms": mean(r["p99_ms"] for r in mine)}
        ours, mm2 = summary["ours"], summary["mm2"]
        summary["ours_over_mm2_p50"] = ours["p50_ms"] / mm2["p50_ms"]
        summary["ours_over_mm2_p99"] = ours["p99_ms"] / mm2["p99_ms"]
        summary["runs"] = runs[rate]
        figures[f"{rate}_per_s"] = summary
        print(
            f"latency at {rate}/s, mean of {len(order) // 2} runs each: ours p50 {ours['p50_ms']:.1f} ms, "
            f"p99 {ours['p99_ms']:.1f} ms; MM2 p50 {mm2['p50_ms']:.1f} ms, p99 {mm2['p99_ms']:.1f} ms; ours / MM2 = "
            f"{summary['ours_over_mm2_p50']:.2f} (p50), {summary['ours_over_mm2_p99']:.2f} (p99)",
            flush=True,
        )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=600_000, help="100 B records per throughput run (1 KB: half)")
    parser.add_argument("--rates", default="5000,50000", help="latency: records/s, comma-separated")
    parser.add_argument("--latency-seconds", type=float, default=20, help="latency: seconds measured per rate and run")
    parser.add_argument(
        "--warm-up-records",
        type=int,
        default=400_000,
        help="records written and read on each cluster first (a cold broker JIT costs whichever phase runs first)",
    )
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    args = parser.parse_args()
    try:
        rates = [int(r) for r in args.rates.split(",") if r.strip()]
        if not rates or min(rates) <= 0:
            raise ValueError
    except ValueError:
        parser.exit(2, f"bench.mm2: --rates must be positive whole records/s, comma-separated (got {args.rates!r})\n")
    print(f"machine: {machine()}")
    workdir = Path(tempfile.mkdtemp(prefix="mw-bench-mm2-"))
    # ours, MM2, MM2, ours: each engine's mean over an ABBA order cancels a machine that drifts during the run
    order = ("ours", "mm2", "mm2", "ours")
    with BenchRun("mm2", {**vars(args), "rates": rates, "partitions": PARTITIONS, "order": order}) as run:
        with fresh_clusters() as clusters:
            east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
            warm_up(east, west, args.warm_up_records)
            if not args.skip_throughput:
                run.figures["throughput"] = throughput_part(east, west, workdir, args.records, order)
            if not args.skip_latency:
                run.figures["latency"] = latency_part(east, west, workdir, rates, args.latency_seconds, order)


if __name__ == "__main__":
    main()
