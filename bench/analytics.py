"""Benchmark: generate 1M and 10M lag samples, run ``monitor analyze`` on each (local[*] or a standalone cluster).

    .venv/bin/python -m bench.analytics [--sizes 1000000,10000000] [--workdir /tmp/mirrorwatch-bench] [--incremental]
        [--master local[*] | standalone] [--executor-memory 1g] [--skip-sql] [--span-days D]

Each analysis runs in its own process (a fresh Spark, as a user would run it), so start-up is included; its wall
time and CPU seconds are printed (the driver's process tree, and on a cluster also the cluster's daemons and
executors: ``bench/analytics_master.py``). ``--master standalone`` starts a Spark standalone cluster on this
machine (one worker with every core) and runs every analysis there. Per size, in the same sitting, the plain Spark
SQL equivalent of the same ten tables (``bench/analytics_sql.py``) runs in its own process too, and the line ends
with job ÷ plain SQL (issue 38's goal: ≤ 1.3 at 10M samples); ``--skip-sql`` leaves it out.
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

from .analytics_fleet import INTERVAL_S, TOPICS, fleet, topic_names
from .analytics_master import Master, Measured
from .jsonline import BenchRun


def run(cmd: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(cmd, check=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--workdir", default="/tmp/mirrorwatch-bench")
    parser.add_argument("--master", default="local[*]", help="a local master, or 'standalone': a cluster started here")
    parser.add_argument("--executor-memory", default="1g", help="--master standalone: each executor's memory")
    parser.add_argument("--skip-sql", action="store_true", help="leave out the plain Spark SQL runs")
    parser.add_argument(
        "--span-days",
        type=float,
        default=None,
        help="shape each history as a fleet's: 5-s samples over 20 topics, with the partitions that make it span "
        "about this many days [default: generate-history's 12 partitions at 10 s]",
    )
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
    if not (args.master.startswith("local") or args.master == "standalone"):
        parser.error("--master: local[...] or standalone (the bench counts the CPU of a cluster it started itself)")
    monitor = [os.path.join(os.path.dirname(sys.executable), "monitor")]  # the console script beside this Python
    with (
        BenchRun("analytics", vars(args)) as bench_run,
        Master(args.master, args.workdir, args.executor_memory) as master,
    ):
        if args.fleet is not None:
            fleet(
                master,
                monitor,
                args.workdir,
                args.fleet,
                bench_run.figures,
                args.fleet_java_options,
                args.fleet_full_state,
                args.fleet_roll,
            )
        else:
            print(f"analytics on {master.describe()}", flush=True)
            measure(args, master, monitor, bench_run.figures)


def timed(measured: Measured, name: str) -> dict[str, Any]:
    """A run's wall time and CPU seconds, as ``<name>_s``, ``<name>_cpu_s`` (and its driver and cluster parts)."""
    return {
        f"{name}_s": measured.tree.wall_s,
        f"{name}_cpu_s": measured.cpu_s,
        f"{name}_driver_cpu_s": measured.tree.cpu_s,
        f"{name}_cluster_cpu_s": measured.cluster_cpu_s,
    }


def fleet_shape(samples: int, span_days: float) -> list[str]:
    """generate-history's options for ``samples`` spanning about ``span_days``: a from-scratch run holds each
    partition's whole period in one window partition, so the span, not only the count, sets what it needs."""
    per_partition = span_days * 86_400 / INTERVAL_S
    per_topic = max(1, round(samples / per_partition / TOPICS))
    return ["--interval", str(INTERVAL_S), "--topics", topic_names(TOPICS), "--partitions", str(per_topic)]


def measure(args: argparse.Namespace, master: Master, monitor: list[str], figures: dict[str, Any]) -> None:
    results: list[dict[str, Any]] = []
    figures["sizes"] = results
    for size in [int(s) for s in args.sizes.split(",")]:
        history = os.path.join(args.workdir, f"history-{size}")
        out = os.path.join(args.workdir, f"analytics-{size}")
        shutil.rmtree(history, ignore_errors=True)
        shape = fleet_shape(size, args.span_days) if args.span_days else []
        gen_s = run(monitor + ["generate-history", "--out", history, "--samples", str(size), *shape, "--quiet"])
        result: dict[str, Any] = {"samples": size, "generate_s": gen_s}
        result |= timed(master.run(monitor + ["analyze", "--history", history, "--out", out, "--quiet"]), "analyze")
        line = (
            f"{size:>11,} samples: generate {gen_s:7.1f}s   analyze {result['analyze_s']:7.1f}s "
            f"({result['analyze_cpu_s']:.0f} CPU s, {size / result['analyze_cpu_s']:,.0f} samples per CPU s)"
        )
        if not args.skip_sql:
            sql = [sys.executable, "-m", "bench.analytics_sql", "--history", history, "--out", out + "-sql"]
            result |= timed(master.run(sql), "plain_sql")
            result["job_over_plain_sql"] = result["analyze_s"] / result["plain_sql_s"]
            line += f"   plain SQL {result['plain_sql_s']:7.1f}s   job / plain SQL {result['job_over_plain_sql']:.2f}"
        print(line, flush=True)
        if args.incremental:
            result.update(incremental(master, monitor, history, out))
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


def incremental(master: Master, monitor: list[str], history: str, out: str) -> dict[str, Any]:
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
        times[name] = master.run(monitor + argv).tree.wall_s
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
