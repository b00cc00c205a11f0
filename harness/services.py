"""Child processes for tests that run real services (mirror, monitor, canary, page): logs in a file, no orphans."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path


def die_with_test() -> None:
    """preexec_fn: SIGKILL the child when the test process dies (PR_SET_PDEATHSIG), so nothing is left running."""
    import ctypes

    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)


class Service:
    """A child process (argv) with its output in ``logs/<name>.log``; dies with the test process."""

    def __init__(self, name: str, argv: list[str], logs: Path, env: dict[str, str] | None = None):
        self.name, self.log_path = name, logs / f"{name}.log"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_test,
            env=env,
        )

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def log_tail(self) -> str:
        return self.log_text()[-3000:]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
