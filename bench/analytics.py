"""Benchmark: generate 1M and 10M lag samples, run ``monitor analyze`` on each (local[*]), print wall times.

    .venv/bin/python bench/analytics.py [--sizes 1000000,10000000] [--workdir /tmp/mirrorwatch-bench]

Each analysis runs in its own process (a fresh Spark, as a user would run it), so start-up is included.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time


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
    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        history = os.path.join(args.workdir, f"history-{size}")
        out = os.path.join(args.workdir, f"analytics-{size}")
        shutil.rmtree(history, ignore_errors=True)
        gen_s = run(monitor + ["generate-history", "--out", history, "--samples", str(size), "--quiet"])
        analyze_s = run(monitor + ["analyze", "--history", history, "--out", out, "--master", args.master, "--quiet"])
        results.append((size, gen_s, analyze_s))
        print(f"{size:>11,} samples: generate {gen_s:7.1f}s   analyze {analyze_s:7.1f}s", flush=True)
    if len(results) >= 2:
        (s0, g0, a0), (s1, g1, a1) = results[0], results[-1]
        print(f"ratio {s1 // s0}x samples: generate {g1 / g0:.1f}x, analyze {a1 / a0:.1f}x")


if __name__ == "__main__":
    main()
