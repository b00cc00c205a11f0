"""Running the real mirror engine (`mirror run`) as a process in tests."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .services import die_with_test

BIN = Path(sys.executable).parent


def _die_with_test_and_dump_core() -> None:
    """preexec_fn: die with the test, and leave a core file if the process crashes (see crash_report)."""
    die_with_test()
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass  # a hard limit we may not raise: no core, the report says so


def crash_report(returncode: int | None, workdir: Path) -> str:
    """Where a mirror that died of a signal crashed: gdb's backtrace of the faulting thread from its core file.

    A crash inside librdkafka (native threads) leaves no Python stack, so faulthandler prints nothing; the core
    is the only witness. Empty when the process did not die of a signal."""
    if returncode is None or returncode >= 0:
        return ""
    cores = sorted(workdir.glob("core*"), key=lambda p: p.stat().st_mtime)
    gdb = shutil.which("gdb")
    if not cores or gdb is None:
        return f"\n(killed by signal {-returncode}; no core file or no gdb to read one)"
    try:
        out = subprocess.run(
            [gdb, "-batch", "-ex", "bt 25", "-ex", "info threads", sys.executable, str(cores[-1])],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    except subprocess.TimeoutExpired:
        out = "(gdb took too long)"
    finally:
        for core in cores:
            core.unlink(missing_ok=True)  # hundreds of MB each
    frames = [line[:200] for line in out.splitlines() if line.startswith(("#", "*", "  ")) or "signal" in line]
    return f"\nkilled by signal {-returncode}; gdb on its core:\n" + "\n".join(frames)[-4000:]


def fast_mirror_settings(**overrides) -> dict:
    settings = {
        "commit_interval_s": 1.0,
        "refresh_interval_s": 1.0,
        "config_sync_interval_s": 2.0,
        "heartbeat_interval_s": 0.5,
        "metrics_port": 0,
        "checkpoint_interval_s": 1.0,
    }
    settings.update(overrides)
    return settings


_STARTED: list[MirrorProcess] = []


@atexit.register
def _kill_leftovers() -> None:
    for mirror in _STARTED:
        mirror.kill()


class MirrorProcess:
    def __init__(self, config: dict, path: Path, flow: str | None = None, log_name: str = "mirror.log"):
        self.path = path
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.flow = flow
        self.log_path = path.with_name(log_name)
        self.proc: subprocess.Popen | None = None

    def start(self, wait_ready: bool = True) -> MirrorProcess:
        """``wait_ready=False``: return at once (several mirrors started side by side, each awaited later)."""
        cmd = [str(BIN / "mirror"), "run", "--config", str(self.path)]
        if self.flow:
            cmd += ["--flow", self.flow]
        self._log = open(self.log_path, "ab")
        already = len(self.log_text())
        # its own working directory, where a crash leaves its core (crash_report)
        self.workdir = self.log_path.with_name(f"{self.log_path.stem}.cwd")
        self.workdir.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ},
            preexec_fn=_die_with_test_and_dump_core,
            cwd=self.workdir,
        )
        _STARTED.append(self)
        if not wait_ready:
            return self
        # ready = signal handlers installed and the engine starting (a SIGTERM before that kills it outright)
        wait_until(lambda: "mirroring flow" in self.log_text()[already:] or not self.running(), 60, 0.1, "mirror start")
        return self

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def terminate(self, timeout: float = 15) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> MirrorProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        try:
            self.terminate()
        except subprocess.TimeoutExpired:
            self.kill()


def wait_until(predicate, timeout: float, interval: float = 0.5, what: str = "condition", alive=None):
    """Poll ``predicate``; fail early if the process ``alive`` (a MirrorProcess) has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive is not None and not alive.running():
            raise AssertionError(
                f"mirror exited with {alive.proc.returncode} while waiting for {what}:\n{alive.log_text()[-2000:]}"
                + crash_report(alive.proc.returncode, alive.workdir)
            )
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    # the mirror's own lines say what it was doing (a CI failure leaves nothing else to read)
    tail = f"; the mirror's log ends:\n{alive.log_text()[-3000:]}" if alive is not None else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}{tail}")
