"""Benchmark: generate 1M and 10M lag samples, run ``monitor analyze`` on each (local[*]), print wall times.

    .venv/bin/python -m bench.analytics [--sizes 1000000,10000000] [--workdir /tmp/mirrorwatch-bench] [--incremental]

Each analysis runs in its own process (a fresh Spark, as a user would run it), so start-up is included. Per size,
in the same sitting, the plain Spark SQL equivalent of the same ten tables (``bench/analytics_sql.py``) runs in
its own process too, and the line ends with job ÷ plain SQL (issue 38's goal: ≤ 1.3 at 10M samples).
``--incremental`` also times, per size, a ``--state`` run as of one hour before the history's end (it builds
the state: a cold run) and then the scheduled hourly run as of the end, which reads only the last hour or two;
it prints the hourly run's time as a share of the cold one's.
``--fleet N`` instead measures issue 38's fleet figures (``bench/analytics_fleet.py``): the CPU seconds of the
scheduled hourly run for N partitions sampled every 5 s, of the state-building run before it, and the projection
to 100,000 partitions.
Ends with one JSON line (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

from .analytics_fleet import fleet
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
    parser.add_argument("--incremental", action="store_true", help="also time a state-building and an hourly run")
    parser.add_argument("--fleet", type=int, default=None, help="only the fleet figures, for this many partitions")
    parser.add_argument(
        "--fleet-java-options", default=None, help="--fleet: also time each hourly run with these driver JVM options"
    )
    parser.add_argument(
        "--fleet-full-state", action="store_true", help="--fleet: also time the hourly run with a 7-day state"
    )
    parser.add_argument(
        "--fleet-roll", type=int, default=3600, help="--fleet: history files of this many seconds (history_roll_s)"
    )
    args = parser.parse_args()
    if args.fleet is not None and 86400 % args.fleet_roll:
        parser.error("--fleet-roll must divide a day (86400 s)")
    if args.fleet is not None and not args.master.startswith("local"):
        parser.error("--fleet counts the CPU of the local process tree: with a cluster the executors are elsewhere")
    monitor = [os.path.join(os.path.dirname(sys.executable), "monitor")]  # the console script beside this Python
    with BenchRun("analytics", vars(args)) as bench_run:
        if args.fleet is not None:
            fleet(
                monitor,
                args.workdir,
                args.fleet,
                bench_run.figures,
                args.fleet_java_options,
                args.fleet_full_state,
                args.fleet_roll,
            )
        else:
            measure(args, monitor, bench_run.figures)


def measure(args: argparse.Namespace, monitor: list[str], figures: dict[str, Any]) -> None:
    results: list[dict[str, Any]] = []
    figures["sizes"] = results
    for size in [int(s) for s in args.sizes.split(",")]:
        history = os.path.join(args.workdir, f"history-{size}")
        out = os.path.join(args.workdir, f"analytics-{size}")
        shutil.rmtree(history, ignore_errors=True)
        gen_s = run(monitor + ["generate-history", "--out", history, "--samples", str(size), "--quiet"])
        analyze_s = run(monitor + ["analyze", "--history", history, "--out", out, "--master", args.master, "--quiet"])
        sql = [sys.executable, "-m", "bench.analytics_sql", "--history", history, "--out", out + "-sql"]
        plain_sql_s = run(sql + ["--master", args.master])
        result: dict[str, Any] = {
            "samples": size,
            "generate_s": gen_s,
            "analyze_s": analyze_s,
            "plain_sql_s": plain_sql_s,
            "job_over_plain_sql": analyze_s / plain_sql_s,
        }
        print(
            f"{size:>11,} samples: generate {gen_s:7.1f}s   analyze {analyze_s:7.1f}s   plain SQL {plain_sql_s:7.1f}s"
            f"   job / plain SQL {analyze_s / plain_sql_s:.2f}",
            flush=True,
        )
        if args.incremental:
            result.update(incremental(args, monitor, history, out))
        results.append(result)
    if len(results) >= 2:
        first, last = results[0], results[-1]
        figures["samples_ratio"] = last["samples"] / first["samples"]
        figures["generate_s_ratio"] = last["generate_s"] / first["generate_s"]
        figures["analyze_s_ratio"] = last["analyze_s"] / first["analyze_s"]
        print(
            f"ratio {last['samples'] // first['samples']}x samples: generate {figures['generate_s_ratio']:.1f}x, "
            f"analyze {figures['analyze_s_ratio']:.1f}x"
        )


def incremental(args: argparse.Namespace, monitor: list[str], history: str, out: str) -> dict[str, Any]:
    """A state-building run as of the history's end minus an hour, then the hourly run as of its end."""
    with open(os.path.join(history, "ground_truth.json")) as f:
        spec = json.load(f)["spec"]
    end_ms = spec["start_ms"] + int(spec["steps"] * spec["interval_s"] * 1000)
    state = out + ".state"
    shutil.rmtree(state, ignore_errors=True)
    times: dict[str, Any] = {}
    for name, as_of_ms in (("state_build_s", end_ms - 3_600_000), ("hourly_run_s", end_ms)):
        as_of = datetime.fromtimestamp(as_of_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        argv = ["analyze", "--history", history, "--out", out, "--state", state, "--to", as_of, "--quiet"]
        times[name] = run(monitor + argv + ["--master", args.master])
    with open(os.path.join(out, "summary.json")) as f:
        times["hourly_rows_read"] = json.load(f)["incremental"]["rows_read"]
    print(
        f"{'':>11}  incremental: building the state {times['state_build_s']:7.1f}s, "
        f"hourly run {times['hourly_run_s']:7.1f}s reading {times['hourly_rows_read']:,} samples",
        flush=True,
    )
    return times


if __name__ == "__main__":
    main()
