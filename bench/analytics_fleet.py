"""Fleet figures for the analytics job (issue 38): what the scheduled hourly run costs for N partitions sampled
every 5 s, in CPU seconds of its whole process tree (the Python driver and the JVM it launches).

    .venv/bin/python -m bench.analytics --fleet 10000 [--workdir DIR]

1. A generated history of N partitions (20 topics) at 5 s, in files of --fleet-roll seconds (as the monitor rolls them), of
   ``span_ms(late)``: long enough that the state-building run as of end − 1 h closes an hour, and the hourly run as of
   the end then reads what a scheduled run reads (the history since the previous run's boundary, see
   docs/analytics.md "Incremental runs").
2. The state-building (cold) run as of end − 1 h, then the hourly run as of the end: each a `monitor analyze
   --state` in its own process, measured with ``bench/cputree.py`` (wall, CPU of the tree, CPU per stage from
   the job's progress lines).
3. The fixed part: the same two runs on a history of the same span with ``FIXED_PARTITIONS`` partitions.
4. Printed: the hourly run's CPU as a share of one core over the hour (goal ≤ 2 %), samples read, CPU per
   sample read, and the projection to 100,000 partitions: fixed + (hourly − fixed) × 100,000 / N, i.e. the
   part above the fixed one taken as linear in the samples read.

``--fleet-java-options "..."`` also runs each hourly run a second time, from the same state, with those driver JVM
options (e.g. ``-XX:+UseSerialGC -XX:TieredStopAtLevel=1``), and prints its figures beside the default's.

``--fleet-roll S`` writes the history in files of S seconds (``monitor.history_roll_s``; default 3600) and passes
``--late`` as the monitor's scheduled runs then do (``analytics_runs.sample_lateness_s``): S + 300 s.

``--fleet-full-state`` also runs the hourly run from a state that holds the whole 7-day look-back of closed hours
and their closed days' sketches (``add_past_hours``), as a monitor's state does after a week: the run merges all
of them into the tables.

``--master standalone`` runs every ``monitor analyze`` on a standalone cluster that the bench starts on this
machine, and adds the CPU of its daemons and executors to the driver's (``bench/analytics_master.py``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mirrorwatch.monitor.analytics_runs import sample_lateness_s

from .analytics_master import Master
from .cputree import TreeCpu

INTERVAL_S = 5
TOPICS = 20
FIXED_PARTITIONS = 4  # the fixed part's history: 2 topics × 2 partitions
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
START = datetime(2026, 1, 5, tzinfo=UTC)
DEFAULT_ROLL_S = 3600  # monitor.history_roll_s' default


def span_ms(late_s: float) -> int:
    """The history's length. The hourly run is as of END = START + span; the state-building run as of END − 1 h,
    whose boundary is floor_hour(END − 1 h − late) = START + 1 h, and the hourly run reads from there: 1 h + late
    of history, the least a scheduled run reads (it reads late + 1 h to late + 2 h, by where in the hour it runs;
    2 h 05 min with the default roll)."""
    return 2 * HOUR_MS + int(late_s * 1000)


LOOKBACK_DAYS = 7  # monitor.analytics.lookback_days' default: the scheduled runs pass --from now − 7 days
# --fleet-full-state: the state's closed hours made up to the look-back (the history's own 3 h + 1 h open)
PAST_HOURS = LOOKBACK_DAYS * 24 - 4
GOAL_SHARE_OF_CORE = 0.02
PROJECTED_PARTITIONS = 100_000
STAGE_LINE = re.compile(r"^✓ (?P<name>.+) \((?P<seconds>[0-9.]+)s\)$")


@dataclass
class Run:
    tree: TreeCpu  # the driver's process tree
    stages: list[tuple[str, float, float]]  # name, start and end (s since the run's start)
    rows_read: int
    cluster_cpu_s: float = 0.0  # a standalone cluster's daemons and executors (bench/analytics_master.py)

    @property
    def cpu_s(self) -> float:
        return self.tree.cpu_s + self.cluster_cpu_s

    def cpu_by_stage(self) -> dict[str, float]:
        """CPU seconds per job stage, plus the Python start before the first stage and the stop after the last."""
        cpu = {name: self.tree.cpu_between(start, end) for name, start, end in self.stages}
        first, last = (self.stages[0][1], self.stages[-1][2]) if self.stages else (self.tree.wall_s, self.tree.wall_s)
        return {
            "python start-up": self.tree.cpu_between(0.0, first),
            **cpu,
            "stopping Spark": self.tree.cpu_between(last, self.tree.wall_s),
        }


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def topic_names(count: int) -> str:
    """generate-history's ``--topics`` for a fleet's history: t00, t01, ..."""
    return ",".join(f"t{i:02d}" for i in range(count))


def generate(monitor: list[str], history: str, partitions: int, roll_s: int) -> float:
    topics = TOPICS if partitions >= TOPICS else 2
    per_topic = -(-partitions // topics)
    names = topic_names(topics)
    shutil.rmtree(history, ignore_errors=True)
    argv = ["generate-history", "--out", history, "--start", iso(int(START.timestamp() * 1000))]
    argv += ["--days", f"{span_ms(sample_lateness_s(roll_s)) / 86_400_000!r}", "--interval", str(INTERVAL_S)]
    argv += ["--topics", names, "--partitions", str(per_topic), "--roll", str(roll_s), "--quiet"]
    started = time.monotonic()
    subprocess.run(monitor + argv, check=True)
    return time.monotonic() - started


def analyze(
    master: Master,
    monitor: list[str],
    history: str,
    out: str,
    as_of_ms: int,
    late_s: float,
    java_options: str | None = None,
) -> Run:
    stages: list[tuple[str, float, float]] = []

    def stage_line(at_s: float, line: str) -> None:
        match = STAGE_LINE.match(line.strip())
        if match:
            stages.append((match["name"], at_s - float(match["seconds"]), at_s))
        else:
            print(f"    {line}", flush=True)  # a warning or an error: show it

    argv = ["analyze", "--history", history, "--out", out, "--state", out + ".state", "--to", iso(as_of_ms)]
    # as the monitor's scheduled runs do (analytics_runs.job_argv)
    lookback_start_ms = (as_of_ms - LOOKBACK_DAYS * DAY_MS) // DAY_MS * DAY_MS  # whole days, as the state keeps them
    argv += ["--from", iso(lookback_start_ms), "--late", f"{late_s:g}"]
    env = {}
    if java_options:  # replaces the job's own driver options (its log4j file): keep that one
        from mirrorwatch.monitor.analytics.session import _log4j_config_path

        options = f"-Dlog4j2.configurationFile=file:{_log4j_config_path()} {java_options}"
        env["PYSPARK_SUBMIT_ARGS"] = f'--driver-java-options "{options}" pyspark-shell'
    measured = master.run(monitor + argv, timeline_s=0.5, on_stderr=stage_line, env=env)
    with open(os.path.join(out, "summary.json")) as f:
        rows_read = int(json.load(f)["incremental"]["rows_read"])
    return Run(measured.tree, stages, rows_read, measured.cluster_cpu_s)


def cold_then_hourly(
    master: Master,
    monitor: list[str],
    workdir: str,
    partitions: int,
    java_options: str | None,
    past_hours: int = 0,
    roll_s: int = DEFAULT_ROLL_S,
) -> dict[str, Any]:
    """Generate, build the state, run the hourly run; with ``java_options``, then the same hourly run again (from
    the same state) with those driver JVM options; with ``past_hours``, again from that state plus that many
    older closed hours (``add_past_hours``)."""
    history = os.path.join(workdir, f"fleet-history-{partitions}")
    out = os.path.join(workdir, f"fleet-analytics-{partitions}")
    state, kept = out + ".state", out + ".state-after-cold"
    for folder in (state, kept):
        shutil.rmtree(folder, ignore_errors=True)
    generate_s = generate(monitor, history, partitions, roll_s)
    late_s = sample_lateness_s(roll_s)
    end_ms = int(START.timestamp() * 1000) + span_ms(late_s)
    cold = analyze(master, monitor, history, out, end_ms - HOUR_MS, late_s)
    shutil.copytree(state, kept)
    runs = {"partitions": partitions, "generate_s": generate_s, "cold": cold}
    runs["hourly"] = analyze(master, monitor, history, out, end_ms, late_s)
    if java_options:
        shutil.rmtree(state)
        shutil.copytree(kept, state)
        runs["hourly_variant"] = analyze(master, monitor, history, out, end_ms, late_s, java_options)
    if past_hours:
        shutil.rmtree(state)
        shutil.copytree(kept, state)
        runs["state_bytes"] = add_past_hours(state, past_hours)
        runs["hourly_full_state"] = analyze(master, monitor, history, out, end_ms, late_s)
    return runs


def add_past_hours(state: str, hours: int) -> int:
    """Give the state ``hours`` more closed hours before the history's start — copies of its first closed hour's
    partials, shifted back an hour at a time — as a state that has run for the whole look-back holds: the hour
    partials (no sketches) of every hour, and one sketch row per series for each of their days, all closed (the
    history starts at midnight). A day's sketch is the first hour's, a little smaller than a day's merged from 24
    hours (a KLL sketch grows with the log of the values it saw). The hourly run merges every hour and day of its
    look-back into the tables; a history of a few hours would not show that cost. Returns the bytes of hour
    partials and sketches in the state."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with open(os.path.join(state, "state.json")) as f:
        raw = json.load(f)
    first = os.path.join(state, raw["parts"][0]["name"])
    hour = pq.read_table(os.path.join(first, "hours"))
    copies = []
    for back in range(1, hours + 1):
        shift = pa.scalar(back * HOUR_MS, pa.int64())
        copy = hour
        for column in ("hour_ms", "first_ms", "last_ms"):
            copy = copy.set_column(copy.schema.get_field_index(column), column, pc.subtract(copy[column], shift))
        newest = copy["mirror_newest"].combine_chunks()
        moved = pa.StructArray.from_arrays(
            [pc.subtract(newest.field("ts_ms"), shift), newest.field("mirror")], names=["ts_ms", "mirror"]
        )
        copies.append(copy.set_column(copy.schema.get_field_index("mirror_newest"), "mirror_newest", moved))
    start_ms = int(START.timestamp() * 1000)
    sketch = pq.read_table(os.path.join(first, "hour_sketches")).drop_columns(["hour_ms", "day_ms"])
    days = [
        sketch.append_column("day_ms", pa.array([day] * sketch.num_rows, pa.int64()))
        for day in range((start_ms - hours * HOUR_MS) // DAY_MS * DAY_MS, start_ms, DAY_MS)
    ]
    past = os.path.join(state, "run-past")
    for table in ("hours", "days", "gaps", "incidents"):
        os.makedirs(os.path.join(past, table))
    pq.write_table(pa.concat_tables(copies), os.path.join(past, "hours", "part-00000.parquet"))
    pq.write_table(pa.concat_tables(days), os.path.join(past, "days", "part-00000.parquet"))
    for table in ("gaps", "incidents"):  # nothing of its own: empty tables of the right schema
        empty = pq.read_table(os.path.join(first, table)).slice(0, 0)
        pq.write_table(empty, os.path.join(past, table, "part-00000.parquet"))
    raw["parts"].insert(0, {"name": "run-past", "boundary_ms": start_ms, "open_day_ms": None})
    with open(os.path.join(state, "state.json"), "w") as f:
        json.dump(raw, f)
    os.remove(os.path.join(state, ".state.json.crc"))  # Hadoop's checksum of the old text (none: not checked)
    kept = {"hours", "days", "hour_sketches"}
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(state)
        for name in names
        if os.path.basename(root) in kept and name.endswith(".parquet")
    )


def run_figures(run: Run) -> dict[str, Any]:
    return {
        "wall_s": run.tree.wall_s,
        "cpu_s": run.cpu_s,
        "driver_cpu_s": run.tree.cpu_s,
        "cluster_cpu_s": run.cluster_cpu_s,
        "driver_user_s": run.tree.user_s,
        "driver_sys_s": run.tree.sys_s,
        "samples_read": run.rows_read,
        "cpu_s_by_stage": run.cpu_by_stage(),
    }


def show_run(label: str, run: Run) -> None:
    driver = f"driver user {run.tree.user_s:.1f}, system {run.tree.sys_s:.1f}"
    cluster = f"; cluster {run.cluster_cpu_s:.1f}" if run.cluster_cpu_s else ""
    print(
        f"  {label}: wall {run.tree.wall_s:6.1f} s, CPU {run.cpu_s:6.1f} s ({driver}{cluster}), "
        f"{run.rows_read:,} samples read",
        flush=True,
    )
    by_stage = ", ".join(f"{name} {cpu:.1f}" for name, cpu in run.cpu_by_stage().items())
    where = "the driver's" if run.cluster_cpu_s else "the"
    print(f"      {where} CPU s by stage: {by_stage}", flush=True)


def fleet(
    master: Master,
    monitor: list[str],
    workdir: str,
    partitions: int,
    figures: dict[str, Any],
    java_options: str | None = None,
    full_state: bool = False,
    roll_s: int = DEFAULT_ROLL_S,
) -> None:
    os.makedirs(workdir, exist_ok=True)
    per_hour = partitions * 3600 // INTERVAL_S
    print(
        f"fleet: {partitions:,} partitions at {INTERVAL_S} s ({per_hour:,} samples an hour), "
        f"{span_ms(sample_lateness_s(roll_s)) / HOUR_MS:.2f} h of history in files of {roll_s} s (--late "
        f"{sample_lateness_s(roll_s):g}); on {master.describe()}; CPU of the driver's whole process tree"
        + (" and of the cluster" if master.cluster is not None else ""),
        flush=True,
    )
    small = cold_then_hourly(master, monitor, workdir, FIXED_PARTITIONS, java_options, roll_s=roll_s)
    show_run(f"fixed part: hourly run at {FIXED_PARTITIONS} partitions    ", small["hourly"])
    big = cold_then_hourly(master, monitor, workdir, partitions, java_options, PAST_HOURS if full_state else 0, roll_s)
    print(f"  generated in {big['generate_s']:.1f} s", flush=True)
    show_run("cold run (builds the state, as of end - 1 h)", big["cold"])
    show_run("hourly run (as of end)                      ", big["hourly"])
    figures.update(fleet_figures(partitions, big, small), history_roll_s=roll_s, late_s=sample_lateness_s(roll_s))
    if java_options:
        show_run(f"fixed part, driver JVM {java_options}", small["hourly_variant"])
        show_run(f"hourly run, driver JVM {java_options}", big["hourly_variant"])
        hourly_s, fixed_s = big["hourly_variant"].cpu_s, small["hourly_variant"].cpu_s
        projected = fixed_s + (hourly_s - fixed_s) * PROJECTED_PARTITIONS / partitions
        figures["variant"] = {
            "java_options": java_options,
            "fixed_hourly": run_figures(small["hourly_variant"]),
            "hourly": run_figures(big["hourly_variant"]),
            "share_of_core_pct": hourly_s / 3600 * 100,
            "projected_cpu_s": projected,
            "projected_share_of_core_pct": projected / 3600 * 100,
        }
        print(
            f"  with {java_options}: {hourly_s / 36:.2f} % of a core per hour; projected to "
            f"{PROJECTED_PARTITIONS:,} partitions {projected / 36:.1f} %",
            flush=True,
        )
    if full_state:
        full: Run = big["hourly_full_state"]
        extra_s = full.cpu_s - big["hourly"].cpu_s
        partition_hours = PAST_HOURS * partitions
        show_run(f"hourly run, {PAST_HOURS} more closed hours in the state", full)
        print(
            f"      {partition_hours:,} more partition-hours ({big['state_bytes'] / 1e6:,.0f} MB of hour partials and "
            f"sketches in all): {extra_s:+.1f} CPU s, {extra_s / partition_hours * 1e3:.2f} CPU ms per partition-hour",
            flush=True,
        )
        figures["full_state"] = {
            "past_hours": PAST_HOURS,
            "hour_partials_bytes": big["state_bytes"],
            "hourly": run_figures(full),
            "extra_cpu_s": extra_s,
            "extra_cpu_ms_per_partition_hour": extra_s / partition_hours * 1e3,
        }
    print(
        f"  hourly run: {figures['hourly_cpu_s']:.1f} CPU s / 3600 s = {figures['share_of_core_pct']:.2f} % of a core "
        f"per hour (goal <= {GOAL_SHARE_OF_CORE * 100:g} %); {figures['samples_read_per_cpu_s']:,.0f} samples read "
        f"per CPU s ({figures['hourly_samples_read'] / per_hour:.2f} h of samples read per hourly run)",
        flush=True,
    )
    print(
        f"  projection to {PROJECTED_PARTITIONS:,} partitions: fixed {figures['fixed_cpu_s']:.1f} s + "
        f"({figures['hourly_cpu_s']:.1f} - {figures['fixed_cpu_s']:.1f}) s x {PROJECTED_PARTITIONS / partitions:g} "
        f"= {figures['projected_cpu_s']:.0f} CPU s per hour = {figures['projected_share_of_core_pct']:.1f} % of a "
        f"core (the part above the fixed one linear in the samples read)",
        flush=True,
    )


def fleet_figures(partitions: int, big: dict[str, Any], small: dict[str, Any]) -> dict[str, Any]:
    hourly: Run = big["hourly"]
    fixed_cpu_s = small["hourly"].cpu_s
    scale = PROJECTED_PARTITIONS / partitions
    projected = fixed_cpu_s + (hourly.cpu_s - fixed_cpu_s) * scale
    return {
        "partitions": partitions,
        "interval_s": INTERVAL_S,
        "history_samples_generate_s": big["generate_s"],
        "cold": run_figures(big["cold"]),
        "hourly": run_figures(hourly),
        "fixed": {
            "partitions": FIXED_PARTITIONS,
            "cold": run_figures(small["cold"]),
            "hourly": run_figures(small["hourly"]),
        },
        "hourly_cpu_s": hourly.cpu_s,
        "hourly_samples_read": hourly.rows_read,
        "share_of_core_pct": hourly.cpu_s / 3600 * 100,
        "goal_share_of_core_pct": GOAL_SHARE_OF_CORE * 100,
        "samples_read_per_cpu_s": hourly.rows_read / hourly.cpu_s,
        "fixed_cpu_s": fixed_cpu_s,
        "projected_partitions": PROJECTED_PARTITIONS,
        "projected_cpu_s": projected,
        "projected_share_of_core_pct": projected / 3600 * 100,
    }
