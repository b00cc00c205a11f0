"""The Spark analytics job on the monitor's scheduler (``monitor.analytics``).

Each run is a child process (``python -m mirrorwatch.monitor.analytics.job``), so a Spark crash, a JVM that eats
its memory or a hang can never touch sampling; a run still going after ``timeout_s`` is killed with its whole
process group (the JVM included). The scheduler never starts a run while one is going (``max_instances=1``,
``coalesce``). The job writes into a fresh folder beside ``out`` and the finished folder replaces ``out`` with two
renames, so a reader (the status page) never sees half-written tables. The job keeps what it summarised in
``<out>.state`` and each run reads only the history since (``--state``). The last run's outcome — with the reason
when it failed — is kept for the HTTP API (``/v1/analytics``) and the page.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ..core.config import AnalyticsSchedule
from ..core.redact import redact_text
from .history import history_files

log = logging.getLogger("mirrorwatch.monitor.analytics_runs")
DEFAULT_OUT = ".cache/analytics"
_OWN_LINE = re.compile(r"^(analyze|monitor): ")
_URI_USERINFO = re.compile(r"(://)[^/@\s]+@")


@dataclass(frozen=True)
class RunStatus:
    """What the API serves. ``state``: never (no run yet), waiting (no closed history file yet), running, ok,
    failed (the job's own one-line reason), timeout (killed after ``timeout_s``), stopped (by the monitor's
    shutdown)."""

    state: str = "never"
    reason: str | None = None
    started_ms: int | None = None
    finished_ms: int | None = None
    duration_s: float | None = None
    last_ok_ms: int | None = None  # when the output in ``out`` was last replaced
    runs: int = 0
    failures: int = 0
    every_s: float | None = None
    master: str | None = None
    out: str | None = None

    def body(self) -> dict[str, Any]:
        """JSON-able, with secrets masked: registered secret values, and credentials inside a URI
        (``s3a://key:secret@bucket``) in the master, the output location and the reason."""
        body = asdict(self)
        for key in ("master", "out", "reason"):
            if body[key]:
                body[key] = _URI_USERINFO.sub(r"\1***@", redact_text(body[key]))
        return body


# A sample is visible once the monitor closes its history file, within monitor.history_roll_s of the sample's
# time; the margin covers a cycle that stalled (a broker restarting) and the write itself.
LATE_MARGIN_S = 300.0


def sample_lateness_s(history_roll_s: float) -> float:
    """How late a sample of this monitor's history can become visible: the scheduled runs' ``--late``."""
    return history_roll_s + LATE_MARGIN_S


def job_argv(
    settings: AnalyticsSchedule,
    history_dir: str,
    out: str,
    now: datetime,
    state: str | None = None,
    late_s: float | None = None,
) -> list[str]:
    """``state``: summarise incrementally (``--state``), as of ``now``: each run reads only the history the
    previous runs have not summarised (docs/analytics.md, "Incremental runs"). ``late_s``: ``--late``, from the
    monitor's own ``history_roll_s`` (a run re-reads the hours a late sample could still reach, so the sooner the
    files close, the less each run reads). An incremental run's look-back is whole UTC days (its state keeps a closed
    day's sketches as one row per series), so ``--from`` is the midnight on or before ``now`` − ``lookback_days``."""
    start = now - timedelta(days=settings.lookback_days)
    if state:
        start = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    incremental = ["--state", state, "--to", now.strftime("%Y-%m-%dT%H:%M:%SZ")] if state else []
    if state and late_s is not None:
        incremental += ["--late", f"{late_s:g}"]
    return [
        sys.executable,
        "-m",
        "mirrorwatch.monitor.analytics.job",
        "--history",
        history_dir,
        "--out",
        out,
        "--master",
        settings.master,
        "--from",
        start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--slo-lag",
        str(settings.slo_lag),
        "--slo-time",
        str(settings.slo_time_s),
        *incremental,
        "--quiet",
    ]


@dataclass(frozen=True)
class HistoryRetention:
    """``monitor.history_raw_days`` and ``monitor.history_rollup_days``: applied by each scheduled run, before the
    Spark job, in a child process of its own (``monitor.history_compaction``: compaction, roll-ups, expiry)."""

    raw_days: float
    rollup_days: float

    def argv(self, history_dir: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "mirrorwatch.monitor.history_compaction",
            "--history",
            history_dir,
            "--raw-days",
            str(self.raw_days),
            "--rollup-days",
            str(self.rollup_days),
        ]


def failure_reason(returncode: int, stderr: str) -> str:
    """The job's last line on stderr (it says what was wrong in one line), or the exit code."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    # the command's own one-line message ("analyze: …"); an internal error's text may run on over several lines
    # (a Java stack trace), so take the line that starts it rather than the last one
    own = [line for line in lines if _OWN_LINE.match(line)]
    last = own[-1] if own else (lines[-1] if lines else f"exit code {returncode}")
    if returncode < 0:
        last = f"killed by signal {-returncode}" + (f" ({last})" if lines else "")
    return redact_text(last)[:300]


def _start_child() -> None:
    # its own process group (so a timeout kills the JVM too), and SIGKILL when the monitor dies
    os.setsid()
    import ctypes

    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)


class AnalyticsRunner:
    def __init__(
        self,
        settings: AnalyticsSchedule,
        history_dir: str,
        out: str | None,
        clock: Callable[[], float] = time.time,
        retention: HistoryRetention | None = None,
        history_roll_s: float | None = None,
    ):
        self.settings, self.history_dir, self.retention = settings, history_dir, retention
        self.out = out or DEFAULT_OUT
        self._clock = clock
        self._lock = threading.Lock()
        self._running = threading.Lock()  # one run at a time, whoever calls (the scheduler's job or a retry)
        self._proc: subprocess.Popen[str] | None = None
        self._stopping = False
        self._status = RunStatus(every_s=settings.every_s, master=settings.master, out=self.out)
        # the summarised hours outlive each run's output folder (which is replaced whole): beside it, not in it
        self.state = f"{self.out.rstrip('/')}.state"
        # (settings, history_dir, out, now) → argv; tests put a stand-in here
        late_s = sample_lateness_s(history_roll_s) if history_roll_s is not None else None
        self.command = functools.partial(job_argv, state=self.state, late_s=late_s)

    def status(self) -> RunStatus:
        return self._status

    def _set(self, **changes: Any) -> None:
        self._status = replace(self._status, **changes)

    def run(self) -> RunStatus:
        """One run (the scheduler's job). Never raises: every outcome becomes the status. A call while a run is
        going returns at once (runs never overlap)."""
        if not self._running.acquire(blocking=False):
            return self._status
        try:
            return self._run()
        except Exception as exc:  # a bug here must not take the scheduler thread down
            log.exception("analytics: run failed")
            self._set(
                state="failed",
                reason=f"{type(exc).__name__}: {redact_text(str(exc))[:200]}",
                finished_ms=int(self._clock() * 1000),
                failures=self._status.failures + 1,
            )
            return self._status
        finally:
            self._running.release()

    def _run(self) -> RunStatus:
        if not history_files(self.history_dir):
            self._set(
                state="waiting",
                reason=f"no closed history file under {self.history_dir}/lag yet "
                "(files close every monitor.history_roll_s)",
            )
            log.info("analytics: %s", self._status.reason)
            return self._status
        started = self._clock()
        out = Path(self.out)
        # not a hidden name: Spark and Hadoop skip paths whose name starts with "." or "_" when they list files
        staging = out.parent / f"{out.name}.run-{int(started * 1000)}"
        argv = self.command(self.settings, self.history_dir, str(staging), datetime.fromtimestamp(started, UTC))
        self._set(
            state="running",
            reason=None,
            started_ms=int(started * 1000),
            finished_ms=None,
            duration_s=None,
            runs=self._status.runs + 1,
        )
        returncode, stderr, timed_out = 0, "", False
        if self.retention is not None:
            log.info("analytics: compacting and expiring the history under %s", self.history_dir)
            returncode, stderr, timed_out = self._child(self.retention.argv(self.history_dir), started)
            for line in stderr.splitlines():
                if line.startswith("history: "):
                    (log.warning if "warning" in line else log.info)("analytics: %s", line)
        if returncode == 0 and not timed_out and not self._stopping:
            log.info("analytics: running the Spark job (master %s) into %s", self.settings.master, out)
            out.parent.mkdir(parents=True, exist_ok=True)
            returncode, stderr, timed_out = self._child(argv, started)
        finished = self._clock()
        done = {"finished_ms": int(finished * 1000), "duration_s": round(finished - started, 3)}
        if self._stopping:  # killed because the monitor is shutting down: not a failure of the job
            self._set(state="stopped", reason="the monitor stopped during the run", **done)
            log.info("analytics: run stopped with the monitor")
        elif timed_out:
            reason = f"still running after {self.settings.timeout_s:g} s (monitor.analytics.timeout_s): killed"
            self._set(state="timeout", reason=reason, failures=self._status.failures + 1, **done)
            log.warning("analytics: %s", reason)
        elif returncode != 0:
            reason = failure_reason(returncode, stderr or "")
            self._set(state="failed", reason=reason, failures=self._status.failures + 1, **done)
            log.warning("analytics: the Spark job failed: %s", reason)
        else:
            _swap_in(staging, out)
            self._set(state="ok", reason=None, last_ok_ms=done["finished_ms"], **done)
            log.info("analytics: written to %s in %.1f s", out, done["duration_s"])
        shutil.rmtree(staging, ignore_errors=True)
        return self._status

    def _child(self, argv: list[str], started: float) -> tuple[int, str, bool]:
        """Run ``argv`` as a child in its own process group, killed once the run has taken ``timeout_s``:
        (exit code, stderr, timed out)."""
        try:
            with self._lock:
                if self._stopping:
                    return 0, "", False
                self._proc = subprocess.Popen(
                    argv,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    preexec_fn=_start_child,
                )
            left = max(0.0, self.settings.timeout_s - (self._clock() - started))
            try:
                _, stderr = self._proc.communicate(timeout=left)
                return self._proc.returncode, stderr or "", False
            except subprocess.TimeoutExpired:
                self._kill()
                _, stderr = self._proc.communicate()
                return self._proc.returncode, stderr or "", True
        finally:
            with self._lock:
                self._proc = None

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Kill a run in progress (the monitor is shutting down)."""
        with self._lock:
            self._stopping = True
            self._kill()


def _swap_in(staging: Path, out: Path) -> None:
    """Replace ``out`` with ``staging``: two renames, the old output removed afterwards."""
    old = out.parent / f"{out.name}.old-{os.getpid()}"
    if out.exists():
        os.replace(out, old)
    os.replace(staging, out)
    shutil.rmtree(old, ignore_errors=True)
