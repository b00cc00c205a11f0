"""Evaluator cycle time at 10k and 100k partitions, as a share of the sampling interval, and memory per partition.

Run: .venv/bin/python -m bench.evaluator [--interval 5] [--window 10]
One cycle = observe() (store a sample for every partition) + evaluate() + the group summary. Ends with one JSON
line (bench/README.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from mirrorwatch.monitor.evaluator import WindowSet, summarize

from .jsonline import BenchRun


def bench(partitions: int, window: int, cycles: int = 30) -> tuple[float, int]:
    rng = np.random.default_rng(1)
    ws = WindowSet(partitions, window)
    committed = rng.integers(0, 1_000_000, partitions)
    end = committed + rng.integers(0, 100, partitions)
    times = []
    for i in range(cycles + window):  # fill the windows first, then measure steady-state cycles
        committed += rng.integers(0, 50, partitions)
        end = np.maximum(end + rng.integers(0, 50, partitions), committed)
        alive = i % 7 != 3  # now and then a cycle where only changed offsets are stored (the masked path)
        start = time.perf_counter()
        ws.observe(i * 5000, committed, end, alive)
        summarize(ws, ws.evaluate(i * 5000))
        if i >= window:
            times.append(time.perf_counter() - start)
    return float(np.median(times)), ws.memory_bytes()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, default=5.0)
    parser.add_argument("--window", type=int, default=10)
    args = parser.parse_args()
    with BenchRun("evaluator", vars(args)) as run:
        for n in (10_000, 100_000):
            cycle, memory = bench(n, args.window)
            run.figures[f"{n}_partitions"] = {
                "cycle_ms": cycle * 1000,
                "share_of_interval_pct": cycle / args.interval * 100,
                "bytes_per_partition": memory / n,
            }
            print(
                f"{n:>7} partitions: cycle {cycle * 1000:7.2f} ms = {cycle / args.interval * 100:.3f} % of a "
                f"{args.interval:g} s interval; {memory / n:.0f} bytes/partition (window {args.window})"
            )


if __name__ == "__main__":
    main()
