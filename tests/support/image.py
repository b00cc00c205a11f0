"""The project's container image in tests: built by scripts/image (cached under .cache/image/), run with buildah.

Podman's and Docker's runtimes cannot start a container on the project's machines (crun: setrlimit RLIMIT_NPROC:
Operation not permitted), so a working container is run the way the build runs its steps: ``buildah run
--isolation chroot``, on the host's network (it reaches the local Kafka clusters) and the host's PID namespace.
buildah does not pass SIGTERM on to the command (it kills it), so ``stop`` does what a runtime's stop does: it
sends SIGTERM to the container's main process, the command itself (the image has no wrapper in between).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from harness.services import die_with_test

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "image"
BUILD_TIMEOUT_S = 1500  # a cold build makes two Debian bases and installs ~1 GB of Python packages: minutes
ROLES = ("base", "page", "analytics")  # scripts/image's order


def build_images() -> dict[str, str]:
    """Build (or reuse) the three images; their names by role (base, page, analytics). The wheels come from this
    interpreter's pip cache and versions."""
    proc = subprocess.run(
        [str(SCRIPT), "build", *ROLES],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "MIRRORWATCH_PYTHON": sys.executable},
    )
    if proc.returncode != 0:
        raise AssertionError(f"scripts/image build failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    print(proc.stderr, end="")  # its steps, shown with -s or on failure
    return dict(zip(ROLES, proc.stdout.strip().splitlines()[-len(ROLES) :]))


def buildah(*args: str, timeout: float = 120) -> str:
    proc = subprocess.run([str(SCRIPT), "buildah", *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"buildah {' '.join(args)}: {proc.returncode}\n{proc.stderr[-2000:]}")
    return proc.stdout


def _children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return [int(c) for t in tasks for c in (t / "children").read_text().split()]
    except OSError:
        return []


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Container:
    """A working container of the image: a writable layer over it, on which commands run one or several at once.

    ``mounts`` maps host paths to paths inside (``:ro`` suffix for read-only), as a runtime's volumes do."""

    def __init__(self, image: str, mounts: dict[str, str], env: dict[str, str] | None = None):
        self.name = f"mirrorwatch-test-{uuid.uuid4().hex[:8]}"
        self.mounts, self.env = mounts, env or {}
        # a runtime names the container's host in its /etc/hosts; buildah's chroot does not (Spark's driver, which
        # looks its own name up, would not start), so the name is given and mapped here
        buildah("from", "--name", self.name, "--add-host", f"{self.name}:127.0.0.1", image)

    def _argv(self, command: list[str]) -> list[str]:
        argv = [str(SCRIPT), "buildah", "run", "--isolation", "chroot", "--network", "host", "--hostname", self.name]
        for host, inside in self.mounts.items():
            argv += ["--volume", f"{host}:{inside}"]
        for key, value in self.env.items():
            argv += ["--env", f"{key}={value}"]
        return [*argv, self.name, "--", *command]

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self._argv(list(command)), capture_output=True, text=True, timeout=timeout)

    def start(self, *command: str, log: Path) -> ContainerProcess:
        return ContainerProcess(self._argv(list(command)), log)

    def written(self) -> list[str]:
        """Every path in the container's writable layer: what its commands wrote outside the mounted folders
        (and the empty mount points buildah made for them)."""
        merged = Path(buildah("mount", self.name).strip())
        try:
            upper = merged.parent / "diff"
            return sorted(str(p.relative_to(upper)) for p in upper.rglob("*"))
        finally:
            buildah("umount", self.name)

    def remove(self) -> None:
        buildah("rm", self.name)


class ContainerProcess:
    """A long-running command in a container, its output (stdout and stderr) in ``log``."""

    def __init__(self, argv: list[str], log: Path):
        self.log_path = log
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_test
        )

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def main_pid(self, timeout_s: float = 30) -> int:
        """The container's main process: the first of buildah's descendants that is not buildah's own helper."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            todo = [self.proc.pid]
            while todo:
                pid = todo.pop(0)
                if pid != self.proc.pid and not _comm(pid).startswith(("memfd:buildah", "buildah")):
                    return pid
                todo += _children(pid)
            time.sleep(0.2)
        raise AssertionError(f"no process inside the container after {timeout_s}s:\n{self.log_text()[-2000:]}")

    def stop(self, timeout_s: float = 60) -> int:
        """SIGTERM to the main process, as ``docker stop`` / ``podman stop`` / the kubelet do; buildah's exit code."""
        if self.proc.poll() is None:
            os.kill(self.main_pid(), signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            for pid in _descendants(self.proc.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
            self.proc.wait()


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out
