"""What the local broker, Connect worker and MirrorMaker 2 launchers share about their Java processes: free
loopback ports, the log4j2 config they all run with, tying a child to its parent, and stopping one."""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Self

from .classdata import ClassDataArchive

LOG4J2 = Path(__file__).with_name("log4j2.xml")


def extra_jvm_options() -> list[str]:
    """``MIRRORWATCH_JVM_OPTS``: options added to every Java process these launchers start (the storage format
    run, brokers, Connect workers, MirrorMaker 2). Read at each start, so a test harness can set it in its own
    environment; empty by default, so benchmarks run the JVM as shipped. The test suite sets
    ``-XX:TieredStopAtLevel=1`` (tests/conftest.py says why)."""
    return os.environ.get("MIRRORWATCH_JVM_OPTS", "").split()


PORTS_FROM = 10_000
PORT_SLICES = 8
_given: set[int] = set()
_given_lock = threading.Lock()


def free_port() -> int:
    """A loopback port for a server started later (a broker, a Connect worker, an exporter).

    Not bind(0)'s: that picks from the kernel's ephemeral range, which outgoing connections are given ports from
    too, and a server binds its port seconds or minutes after it was chosen (a canary once found its metrics port
    taken that way). So: below that range, in a slice of its own per pytest-xdist worker (``PYTEST_XDIST_WORKER``;
    the first slice otherwise), never the same port twice in one process (a cluster's ports are all chosen before
    any node starts), and free when chosen."""
    low = _ephemeral_low()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    width = max(100, (low - PORTS_FROM) // PORT_SLICES)
    start = PORTS_FROM + (int(worker) if worker.isdigit() else 0) % PORT_SLICES * width
    with _given_lock:
        for _ in range(200):
            port = random.randrange(start, min(start + width, low))
            if port not in _given and not port_in_use(port):
                _given.add(port)
                return port
    with socket.socket() as s:  # the slice is full: any free port
        s.bind(("127.0.0.1", 0))
        any_port: int = s.getsockname()[1]  # (host, port)
        return any_port


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def terminate(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM, then SIGKILL if the process has not exited within ``timeout_s`` (brokers and MirrorMaker 2)."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def die_with_parent() -> None:
    # If the Python process that started a broker dies (even by SIGKILL), the broker gets SIGTERM and shuts
    # down cleanly instead of lingering on its ports. PR_SET_PDEATHSIG = 1.
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass
    os.setsid()  # own process group: a terminal's Ctrl-C reaches us, and we stop brokers in order


_TIE_TO_PARENT = die_with_parent  # the launchers' start(die_with_parent=...) flag shadows the name


class ConnectRuntimeProcess:
    """A Java main class of Kafka Connect's runtime run on a properties file, with the jars from the cache (the
    ``mm2`` set: connect-mirror and connect-runtime): MirrorMaker 2 in dedicated mode, a distributed Connect
    worker. ``kill()`` is a SIGKILL (a crash, as the clusters see it); ``start()`` again resumes from the
    process's own Connect offsets."""

    main_class = ""
    properties_file = ""
    out_file = ""

    def __init__(self, workdir: str | Path, properties: dict[str, str], heap: str = "-Xms256m -Xmx768m"):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.properties = dict(properties)
        self.heap = heap
        self.proc: subprocess.Popen[bytes] | None = None
        self._archive: ClassDataArchive | None = None  # its class-data archive (classdata.py), once started

    @property
    def workdir(self) -> Path:
        return self.dir

    @property
    def out_path(self) -> Path:
        return self.dir / self.out_file

    def start(self, die_with_parent: bool = True) -> Self:
        from .jars import ensure_jars, require_tool

        if self.is_running():
            return self
        path = self.dir / self.properties_file
        path.write_text("".join(f"{k} = {v}\n" for k, v in self.properties.items()))
        jars = ensure_jars("mm2")
        java = require_tool("java", "install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
        (self.dir / "logs").mkdir(exist_ok=True)
        if self._archive is None:
            self._archive = ClassDataArchive(jars.parent / "cds", self.main_class.rsplit(".", 1)[-1], java)
        cmd = [
            java,
            *self.heap.split(),
            *extra_jvm_options(),
            *self._archive.options(),
            f"-Dlog4j2.configurationFile={LOG4J2}",
            f"-Dkafka.logs.dir={self.dir / 'logs'}",
            "-cp",
            f"{jars}/*",
            self.main_class,
            str(path),
        ]
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_TIE_TO_PARENT if die_with_parent else None,
            )
        return self

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    running = is_running  # the test harness's wait_until(alive=...) asks running(), proc and log_text()

    def kill(self) -> None:
        """SIGKILL: no flush, no offset commit, no goodbye to the Connect group."""
        if self.proc is not None and self.is_running():
            self.proc.kill()
            self.proc.wait()
            self._exited()

    def _exited(self) -> None:
        if self._archive is not None and self.proc is not None:
            self._archive.exited(self.proc.returncode)

    def stop(self, timeout_s: float = 60) -> None:
        if self.proc is not None and self.is_running():
            terminate(self.proc, timeout_s)
            self._exited()

    def log_text(self) -> str:
        return self.out_path.read_text(errors="replace") if self.out_path.exists() else ""

    def log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().strip().splitlines()[-lines:])
