"""bench/cputree.py: the CPU seconds of a whole process tree, including a grandchild that outlives its parent
(as a JVM may outlive the Python driver that launched it). Plain processes that burn a known amount of CPU; no
Spark, no Kafka. CPU bounds, not wall-clock ones: a loaded machine stretches the wall time, not the CPU a loop
needs to reach a given process_time()."""

from __future__ import annotations

import sys

import pytest

from bench.cputree import TreeCpu, measure

BURN_S = 1.0
# Each of the three Python interpreters (wrapper's child, grandchild) costs some start-up CPU beyond the burn.
START_UP_ALLOWANCE_S = 3.0

GRANDCHILD = f"""
import time
while time.process_time() < {BURN_S}:
    pass
"""


def child_script(waits: bool) -> str:
    """A child that starts the burning grandchild and either waits for it or exits at once (orphaning it)."""
    return f"""
import subprocess, sys
grandchild = subprocess.Popen([sys.executable, "-c", {GRANDCHILD!r}])
{"grandchild.wait()" if waits else "pass"}
"""


def run(waits: bool, subreaper: bool = True) -> TreeCpu:
    return measure([sys.executable, "-c", child_script(waits)], timeline_s=0.2, subreaper=subreaper)


@pytest.mark.parametrize("waits", [True, False], ids=["grandchild-waited-for", "grandchild-orphaned"])
def test_the_grandchilds_cpu_is_counted(waits: bool) -> None:
    measured = run(waits)
    assert measured.returncode == 0
    assert BURN_S <= measured.cpu_s < BURN_S + START_UP_ALLOWANCE_S, measured
    assert measured.user_s + measured.sys_s == pytest.approx(measured.cpu_s)
    assert measured.wall_s >= BURN_S  # the run lasted until the orphan was done, not until its parent exited
    assert measured.timeline[-1] == (measured.wall_s, measured.cpu_s)
    assert measured.cpu_between(0.0, measured.wall_s) == pytest.approx(measured.cpu_s)


def test_plain_rusage_children_misses_an_orphaned_grandchild() -> None:
    """Why the subreaper: without it the orphan is re-parented to init and its CPU never reaches the count."""
    measured = run(waits=False, subreaper=False)
    assert measured.cpu_s < BURN_S, measured


def test_the_commands_exit_code_is_kept() -> None:
    measured = measure([sys.executable, "-c", "raise SystemExit(3)"])
    assert measured.returncode == 3


@pytest.mark.parametrize(
    "timeline, start, end, expected",
    [
        ([(1.0, 2.0), (2.0, 4.0)], 0.0, 2.0, 4.0),  # from the start (0 s, 0 CPU) to the second sample
        ([(1.0, 2.0), (2.0, 4.0)], 1.5, 2.0, 1.0),  # between samples: linear
        ([(1.0, 2.0), (2.0, 4.0)], 1.0, 9.0, 2.0),  # past the end: the last sample
        ([], 0.0, 5.0, 0.0),
    ],
)
def test_cpu_between_reads_the_timeline(
    timeline: list[tuple[float, float]], start: float, end: float, expected: float
) -> None:
    tree = TreeCpu(cpu_s=0.0, user_s=0.0, sys_s=0.0, wall_s=0.0, returncode=0, timeline=timeline)
    assert tree.cpu_between(start, end) == pytest.approx(expected)


def test_stderr_lines_reach_the_sink_with_their_time() -> None:
    lines: list[tuple[float, str]] = []
    code = (
        "import sys, time; print('first', file=sys.stderr, flush=True); time.sleep(0.3); sys.stderr.write('second\\n')"
    )
    measured = measure([sys.executable, "-c", code], on_stderr=lambda at_s, line: lines.append((at_s, line)))
    assert [line for _, line in lines] == ["first", "second"]
    assert 0 <= lines[0][0] <= lines[1][0] <= measured.wall_s + 1.0  # the wrapper starts a little after the clock
