"""CPU seconds of a command's whole process tree: the command, its children, and theirs (e.g. a Python driver and
the JVM it launches), whether or not each parent waited for its children.

    python bench/cputree.py --result OUT.json [--timeline-s 1] [--no-subreaper] -- COMMAND [ARG ...]

Runs COMMAND (stdin, stdout and stderr inherited), waits for it *and for every process it left behind*, then
writes OUT.json: ``cpu_s`` (user + system), ``user_s``, ``sys_s``, ``wall_s``, ``returncode``, ``peak_processes``
and ``timeline`` ([seconds since start, tree CPU seconds so far] every ``--timeline-s``). Exits with COMMAND's
exit code. From Python: ``measure(argv)``.

How. ``getrusage(RUSAGE_CHILDREN)`` counts a process's waited-for children, *and what those had counted of
theirs*: a grandchild is counted only if its parent waited for it. A process whose parent exits first (a JVM
that outlives the Python driver that started it, a daemonised helper) is re-parented to init and its time is
lost to the count. So this runs as its own small process that makes itself the *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``, Linux ≥ 3.4): orphans of the tree are re-parented to it instead of init, and
it waits for each of them before reading its ``RUSAGE_CHILDREN``. Every process of the tree is then waited for by
someone in the tree, and its time reaches this process's count. (A separate process, because subreaping is a
property of the process for its lifetime: in the caller it would collect unrelated orphans as zombies.) The
timeline samples ``/proc/<pid>/stat`` of the live tree (utime + stime + cutime + cstime of each member): it only
says *when* the CPU was spent; ``cpu_s`` is the exact total. Stdlib only, so it runs as a plain script.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
LineSink = Callable[[float, str], None]
ORPHAN_WAIT_S = 120.0  # processes left behind by the command get this long to exit before the run counts as failed


@dataclass
class TreeCpu:
    cpu_s: float  # user + system of every process of the tree
    user_s: float
    sys_s: float
    wall_s: float
    returncode: int
    peak_processes: int = 0  # most processes of the tree seen alive at once (sampled)
    timeline: list[tuple[float, float]] = field(default_factory=list)  # (s since start, tree CPU s so far)

    def cpu_between(self, start_s: float, end_s: float) -> float:
        """Tree CPU seconds spent between two moments (seconds since start), from the sampled timeline."""
        return _cpu_at(self.timeline, end_s) - _cpu_at(self.timeline, start_s)


def _cpu_at(timeline: list[tuple[float, float]], at_s: float) -> float:
    """The timeline's CPU at ``at_s``, linearly between samples (the last sample after the end)."""
    before = (0.0, 0.0)
    for t, cpu in timeline:
        if t >= at_s:
            span = t - before[0]
            share = (at_s - before[0]) / span if span > 0 else 1.0
            return before[1] + share * (cpu - before[1])
        before = (t, cpu)
    return before[1]


def _stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()  # after the command name, which may hold spaces and ")"


def tree_snapshot(root: int) -> tuple[float, int]:
    """(CPU seconds, process count) of ``root``'s live descendants, ``root`` excluded: utime + stime of each, plus
    cutime + cstime (its children that exited and were waited for)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(_stat_fields(int(entry))[1])
            except (OSError, IndexError, ValueError):
                pass  # exited since listed
    tree: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - tree
        tree |= frontier
    ticks = 0
    for pid in tree:
        try:
            fields = _stat_fields(pid)
            ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
        except (OSError, IndexError, ValueError):
            pass
    return ticks / CLOCK_TICKS, len(tree)


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def _reap_all(deadline_s: float) -> list[int]:
    """Wait for every remaining child (orphans re-parented here); the pids still alive at the deadline."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return []
        if pid == 0:
            if time.monotonic() > deadline:
                return sorted(_children(os.getpid()))
            time.sleep(0.05)


def _children(parent: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_stat_fields(int(entry))[1]) == parent:
                    found.add(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def run_tree(argv: list[str], timeline_s: float, subreaper: bool = True) -> TreeCpu:
    """Run ``argv`` here and measure its tree (this process must not have other children)."""
    if subreaper:
        _become_subreaper()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    timeline: list[tuple[float, float]] = []
    peak = 0
    proc = subprocess.Popen(argv)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            cpu, count = tree_snapshot(os.getpid())
            timeline.append((time.monotonic() - started, cpu))
            peak = max(peak, count)
            done.wait(timeline_s)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    returncode = proc.wait()
    left = _reap_all(ORPHAN_WAIT_S) if subreaper else []
    done.set()
    sampler.join()
    wall_s = time.monotonic() - started
    if left:
        raise RuntimeError(f"processes {left} left behind by {argv[0]} still ran {ORPHAN_WAIT_S:g} s after it exited")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user_s, sys_s = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    timeline.append((wall_s, user_s + sys_s))  # the exact total closes the sampled timeline
    return TreeCpu(user_s + sys_s, user_s, sys_s, wall_s, returncode, peak, timeline)


def measure(
    argv: list[str],
    timeline_s: float = 1.0,
    subreaper: bool = True,
    on_stderr: LineSink | None = None,
    env: dict[str, str] | None = None,
) -> TreeCpu:
    """Run ``argv`` through this script in a process of its own and return its tree's CPU (any exit code).
    ``on_stderr``: given each line the command writes to stderr, with its arrival in seconds since the start (the
    timeline's clock, within this script's start-up); without it stderr is inherited. ``env``: the command's
    environment (default: this process's)."""
    with tempfile.TemporaryDirectory(prefix="mw-cputree-") as work:
        result = os.path.join(work, "result.json")
        wrapper = [sys.executable, os.path.abspath(__file__), "--result", result, "--timeline-s", str(timeline_s)]
        started = time.monotonic()
        proc = subprocess.Popen(
            [*wrapper, *([] if subreaper else ["--no-subreaper"]), "--", *argv],
            stderr=None if on_stderr is None else subprocess.PIPE,
            text=True,
            env=env,
        )
        if proc.stderr is not None and on_stderr is not None:
            for line in proc.stderr:
                on_stderr(time.monotonic() - started, line.rstrip("\n"))
        proc.wait()
        if not os.path.exists(result):
            raise RuntimeError(f"cputree: no measurement of {argv[0]} (its error is above, on stderr)")
        with open(result) as f:
            raw = json.load(f)
    raw["timeline"] = [(float(t), float(c)) for t, c in raw["timeline"]]
    return TreeCpu(**raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--result", required=True, help="where to write the JSON result")
    parser.add_argument("--timeline-s", type=float, default=1.0, help="sampling interval of the timeline")
    parser.add_argument("--no-subreaper", action="store_true", help="plain RUSAGE_CHILDREN (misses orphans)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        parser.error("no command given")
    measured = run_tree(argv, args.timeline_s, subreaper=not args.no_subreaper)
    with open(args.result, "w") as f:
        json.dump(asdict(measured), f)
    sys.exit(measured.returncode if measured.returncode >= 0 else 128 - measured.returncode)


if __name__ == "__main__":
    main()
