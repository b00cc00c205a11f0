"""Benchmark: generate 1M and 10M lag samples, run ``monitor analyze`` on each (local[*]), print wall times.

    .venv/bin/python -m bench.analytics [--sizes 1000000,10000000] [--workdir /tmp/mirrorwatch-bench]

Each analysis runs in its own process (a fresh Spark, as a user would run it), so start-up is included.
Ends with one JSON line (bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

from .jsonline import BenchRun


def run(cmd: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(cmd, check=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--workdir", default="/tmp/mirrorwatch-bench")
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    monitor = [os.path.join(os.path.dirname(sys.executable), "monitor")]  # the console script beside this Python
    with BenchRun("analytics", vars(args)) as bench_run:
        measure(args, monitor, bench_run.figures)


def measure(args, monitor: list[str], figures: dict) -> None:
    results = figures["sizes"] = []
    for size in [int(s) for s in args.sizes.split(",")]:
        history = os.path.join(args.workdir, f"history-{size}")
        out = os.path.join(args.workdir, f"analytics-{size}")
        shutil.rmtree(history, ignore_errors=True)
        gen_s = run(monitor + ["generate-history", "--out", history, "--samples", str(size), "--quiet"])
        analyze_s = run(monitor + ["analyze", "--history", history, "--out", out, "--master", args.master, "--quiet"])
        results.append({"samples": size, "generate_s": gen_s, "analyze_s": analyze_s})
        print(f"{size:>11,} samples: generate {gen_s:7.1f}s   analyze {analyze_s:7.1f}s", flush=True)
    if len(results) >= 2:
        first, last = results[0], results[-1]
        figures["samples_ratio"] = last["samples"] / first["samples"]
        figures["generate_s_ratio"] = last["generate_s"] / first["generate_s"]
        figures["analyze_s_ratio"] = last["analyze_s"] / first["analyze_s"]
        print(
            f"ratio {last['samples'] // first['samples']}x samples: generate {figures['generate_s_ratio']:.1f}x, "
            f"analyze {figures['analyze_s_ratio']:.1f}x"
        )


if __name__ == "__main__":
    main()
