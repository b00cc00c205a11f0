"""What the monitor costs per 1,000 partitions watched, at each `monitor.series` level, on real local clusters.

Run: .venv/bin/python -m bench.scrape [--sizes 1000 5000] [--window 20]
Starts two local clusters and the mirror engine on one flow; for each size creates topics of 100 partitions on the
source (one record each, mirrored by the engine), then for each level runs `monitor run` (a subprocess) with
`monitor.series` set, and measures:

- ``scrape_bytes`` and ``scrape_ms``: one GET /metrics right after a re-render (the exporter renders at most once
  a second; every scrape here is more than a second after the last), median of several;
- ``cpu_cores``: the monitor's CPU seconds (user + system, all threads) over ``--window`` seconds of sampling
  with no scrape, per second; ``cpu_s_per_cycle`` = that × ``monitor.interval_s``;
- ``rss_mb``: the monitor's resident memory after the scrapes.

Then the cost per 1,000 partitions: bytes and ms of a scrape divided by the thousands, and for memory and CPU,
which have a fixed part (the Python process), the slope between the smallest and largest size plus the fixed
part (``base``). Ends with one JSON line (bench/README.md). Heavy: a few minutes, two brokers and the engine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorwatch.localkafka.launcher import free_port
from mirrorwatch.monitor.series import SERIES_LEVELS

from .common import fresh_clusters, machine
from .jsonline import BenchRun

BIN = Path(sys.executable).parent
PARTITIONS_PER_TOPIC = 100
INTERVAL_S = 5.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------------------------------------- pure parts


def cpu_seconds(stat_line: str) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (fields 14 and 15; the command name, field 2, may
    hold spaces and parentheses, so fields are counted after its closing parenthesis)."""
    fields = stat_line[stat_line.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(status_text: str) -> float:
    """VmRSS of a /proc/<pid>/status text, in MB (10^6 bytes)."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise ValueError("no VmRSS line")


def per_thousand(figures: dict[int, dict[str, float]]) -> dict[str, float]:
    """Per 1,000 partitions from figures measured at several sizes ({partitions: {figure: value}}).

    Scrape bytes and ms grow with the series (per 1,000 = the largest size's value / its thousands). Memory and
    CPU have a fixed part: per 1,000 is the slope between the smallest and the largest size, ``base`` what is
    left at 0 partitions. With one size, the slope is the value / thousands and the base 0."""
    sizes = sorted(figures)
    small, large = sizes[0], sizes[-1]
    out = {
        "scrape_bytes_per_1000": figures[large]["scrape_bytes"] / (large / 1000),
        "scrape_ms_per_1000": figures[large]["scrape_ms"] / (large / 1000),
    }
    for name in ("rss_mb", "cpu_cores", "cpu_s_per_cycle"):
        if small == large:
            slope, base = figures[large][name] / (large / 1000), 0.0
        else:
            slope = (figures[large][name] - figures[small][name]) / ((large - small) / 1000)
            base = figures[small][name] - slope * small / 1000
        out[f"{name}_per_1000"], out[f"{name}_base"] = slope, base
    return out


# ---------------------------------------------------------------------------------------------- the run


def create_topics(bootstrap: str, first: int, count: int) -> list[str]:
    """Topics bench.scrape.<i> for i in [first, first + count), 100 partitions each, one record per partition."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"bench.scrape.{i:04d}" for i in range(first, first + count)]
    for future in admin.create_topics([NewTopic(n, PARTITIONS_PER_TOPIC, 1) for n in names]).values():
        future.result(120)
    # every partition must hold its record, or it exports no RPO and the sizes are not alike: a broker that has
    # just created thousands of partitions can take minutes to take them all (delivery timeout 10 min)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "delivery.timeout.ms": 600_000})
    failed: list[str] = []
    report = lambda err, _msg: err and failed.append(str(err))  # noqa: E731
    for name in names:
        for p in range(PARTITIONS_PER_TOPIC):
            producer.produce(name, b"x", None, p, report)
        producer.poll(0)
    left = producer.flush(660)
    if left or failed:
        raise RuntimeError(f"{left} records not delivered, {len(failed)} failed ({failed[:1]})")
    return names


def get(url: str, timeout: float = 30) -> bytes:
    return urllib.request.urlopen(url, timeout=timeout).read()


def wait_mirrored(api: str, partitions: int, timeout: float) -> None:
    """Until the monitor sees the flow's ``partitions`` partitions all mirrored (true lag 0)."""
    deadline, last = time.monotonic() + timeout, "no answer"
    while time.monotonic() < deadline:
        try:
            flow = json.loads(get(f"{api}/v1/flows/ew"))["flow"]
            ours = [p for p in flow["partitions"] if p["topic"].startswith("bench.scrape.")]
            # every partition's own true lag known and 0: the totals sum only the partitions that know theirs,
            # so "total 0" also holds while the engine has not yet reached new topics (unknown lags)
            mirrored = sum(p["true_lag"] == 0 and p["rpo_seconds"] is not None for p in ours)
            last = f"{len(ours)} partitions, {mirrored} mirrored"
            if len(ours) == partitions and mirrored == partitions:
                return
        except (OSError, KeyError, ValueError):
            pass
        time.sleep(1)
    raise RuntimeError(f"the monitor did not see {partitions} mirrored partitions in {timeout:.0f} s ({last})")


def measure_level(config: Path, level: str, partitions: int, window_s: float, workdir: Path) -> dict[str, float]:
    metrics_port, http_port = free_port(), free_port()
    env = {
        **os.environ,
        "MIRRORWATCH__MONITOR__SERIES": level,
        "MIRRORWATCH__MONITOR__METRICS_PORT": str(metrics_port),
        "MIRRORWATCH__MONITOR__HTTP_PORT": str(http_port),
    }
    log = open(workdir / f"monitor-{partitions}-{level}.log", "w")
    monitor = subprocess.Popen([str(BIN / "monitor"), "run", "--config", str(config)], env=env, stderr=log)
    proc = Path(f"/proc/{monitor.pid}")
    try:
        wait_mirrored(f"http://127.0.0.1:{http_port}", partitions, 300)
        time.sleep(INTERVAL_S)  # one more cycle: the windows and the rate figures have two samples
        cpu0, t0 = cpu_seconds((proc / "stat").read_text()), time.monotonic()
        time.sleep(window_s)
        cores = (cpu_seconds((proc / "stat").read_text()) - cpu0) / (time.monotonic() - t0)
        sizes, times = [], []
        for _ in range(5):
            time.sleep(1.2)  # past the exporter's 1 s cache: each scrape renders
            start = time.perf_counter()
            body = get(f"http://127.0.0.1:{metrics_port}/metrics")
            times.append((time.perf_counter() - start) * 1000)
            sizes.append(len(body))
        rss = rss_mb((proc / "status").read_text())
    finally:
        monitor.terminate()
        monitor.wait(30)
        log.close()
    return {
        "scrape_bytes": float(statistics.median(sizes)),
        "scrape_ms": statistics.median(times),
        "rss_mb": rss,
        "cpu_cores": cores,
        "cpu_s_per_cycle": cores * INTERVAL_S,
    }


def run(sizes: list[int], window_s: float, figures: dict) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mw-bench-scrape-"))
    with fresh_clusters() as clusters:
        east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
        config = {
            "clusters": {"east": {"bootstrap.servers": east}, "west": {"bootstrap.servers": west}},
            "flows": {"ew": {"source": "east", "target": "west", "topics": [r"bench\.scrape\..*"]}},
            "mirror": {"metrics_port": None, "refresh_interval_s": 2, "commit_interval_s": 2, "heartbeats": False},
            "monitor": {"interval_s": INTERVAL_S, "history": False},
        }
        path = workdir / "mirrorwatch.yaml"
        path.write_text(yaml.safe_dump(config))
        mirror = subprocess.Popen(
            [str(BIN / "mirror"), "run", "--config", str(path)], stderr=open(workdir / "mirror.log", "w")
        )
        per_size: dict[str, dict[int, dict[str, float]]] = {level: {} for level in SERIES_LEVELS}
        try:
            topics = 0
            for size in sorted(sizes):
                wanted = size // PARTITIONS_PER_TOPIC
                create_topics(east, topics, wanted - topics)
                topics = wanted
                for level in SERIES_LEVELS:
                    m = measure_level(path, level, size, window_s, workdir)
                    per_size[level][size] = m
                    figures.setdefault(f"{size}_partitions", {})[level] = m
                    print(
                        f"{size:>6} partitions, series {level:<9}: scrape {m['scrape_bytes'] / 1e6:7.3f} MB "
                        f"{m['scrape_ms']:7.1f} ms; RSS {m['rss_mb']:6.1f} MB; CPU {m['cpu_cores']:.3f} cores "
                        f"({m['cpu_s_per_cycle']:.3f} CPU-s per {INTERVAL_S:g} s cycle)"
                    )
        finally:
            mirror.terminate()
            mirror.wait(60)
    for level in SERIES_LEVELS:
        figures[f"per_1000_{level}"] = k = per_thousand(per_size[level])
        print(
            f"per 1,000 partitions, series {level:<9}: scrape {k['scrape_bytes_per_1000'] / 1e3:8.1f} kB "
            f"{k['scrape_ms_per_1000']:6.2f} ms; RSS +{k['rss_mb_per_1000']:.1f} MB (base {k['rss_mb_base']:.0f}); "
            f"CPU +{k['cpu_cores_per_1000']:.4f} cores (base {k['cpu_cores_base']:.4f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000], help="partitions (multiples of 100)")
    parser.add_argument("--window", type=float, default=20.0, help="seconds of sampling to measure CPU over")
    args = parser.parse_args()
    if any(s <= 0 or s % PARTITIONS_PER_TOPIC for s in args.sizes):
        parser.error(f"--sizes: each a positive multiple of {PARTITIONS_PER_TOPIC}")
    print(f"machine: {machine()}")
    with BenchRun("scrape", {**vars(args), "interval_s": INTERVAL_S}) as run_:
        run(args.sizes, args.window, run_.figures)


if __name__ == "__main__":
    main()
