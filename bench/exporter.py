"""Scrape cost of the monitor's exporter at 10k mirrored partitions.

Run: .venv/bin/python -m bench.exporter [--partitions 10000]
Prints the time to render the exposition for a new snapshot (what the first scrape after a cycle pays) and
for a cached one (every other scrape in the interval), plus the body size. Ends with one JSON line
(bench/README.md).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from mirrorwatch.monitor.exporter import MetricsCache
from mirrorwatch.monitor.model import GroupView, Snapshot

from .jsonline import BenchRun


def snapshot(partitions: int, seq: int) -> Snapshot:
    rng = np.random.default_rng(seq)
    topics = [f"topic-{i // 100:04d}" for i in range(partitions)]
    parts = [i % 100 for i in range(partitions)]
    lag = lambda: rng.integers(0, 1000, partitions)  # noqa: E731
    view = GroupView(
        kind="mirror",
        flow="ew",
        cluster="east",
        target="west",
        group="mirrorwatch-east-west",
        ts_ms=int(time.time() * 1000),
        group_status=0,
        last_ok_ms=int(time.time() * 1000),
        topics=topics,
        partitions=parts,
        committed_lag=lag(),
        read_lag=lag(),
        true_lag=lag(),
        time_lag_s=rng.random(partitions) * 10,
        status=rng.integers(0, 2, partitions).astype(np.int8),
        complete=1.0,
        topic_catch_up_s={t: math.inf for t in set(topics)},
    )
    return Snapshot(view.ts_ms, [view], {"east": True, "west": True}, seq)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=10_000)
    args = parser.parse_args()
    with BenchRun("exporter", vars(args)) as run:
        run.figures.update(measure(args.partitions))


def measure(partitions: int) -> dict:
    current = {"snap": snapshot(partitions, 1)}
    cache = MetricsCache(lambda: current["snap"], max_age_s=3600)
    fresh = []
    for seq in range(2, 7):
        current["snap"] = snapshot(partitions, seq)
        start = time.perf_counter()
        body = cache.render()
        fresh.append(time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(100):
        cache.render()
    cached = (time.perf_counter() - start) / 100
    print(
        f"{partitions} partitions: first scrape after a cycle {np.median(fresh) * 1000:.0f} ms, "
        f"cached scrape {cached * 1e6:.0f} µs, body {len(body) / 1e6:.1f} MB"
    )
    return {
        "first_scrape_ms": float(np.median(fresh)) * 1000,
        "cached_scrape_us": cached * 1e6,
        "body_bytes": len(body),
    }


if __name__ == "__main__":
    main()
