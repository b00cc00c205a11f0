"""One combined broker+controller node of a local multi-node KRaft cluster (multinode.py): its ports, files and JVM,
and the faults a test can put it through (clean stop, SIGKILL, SIGSTOP/SIGCONT, restart)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from .classdata import ClassDataArchive
from .jars import LauncherError, ensure_jars, require_tool
from .process import LOG4J2, die_with_parent, extra_jvm_options, free_port, port_in_use, terminate

# The QuorumController logs it when its node wins the metadata quorum's election, e.g.
# "[QuorumController id=1] Becoming the active controller at epoch 3, next write offset 1."
_LEADER_LINE = re.compile(r"\[QuorumController id=(\d+)\] Becoming the active controller at epoch (\d+)")


class KRaftNode:
    """Node ``node_id`` in folder ``dir``: ``server.properties``, ``data/``, ``logs/server.log``, ``node.out`` and
    ``ports.json`` (so that a restart comes back on the same ports)."""

    def __init__(self, folder: Path, node_id: int, heap: str) -> None:
        self.dir = folder
        self.dir.mkdir(parents=True, exist_ok=True)
        self.node_id = node_id
        self.heap = heap
        ports_file = self.dir / "ports.json"
        saved = json.loads(ports_file.read_text()) if ports_file.exists() else {}
        self.port: int = saved.get("port") or free_port()
        self.controller_port: int = saved.get("controller_port") or free_port()
        while self.controller_port == self.port:  # a just-closed port can come back: the broker refuses two alike
            self.controller_port = free_port()
        ports_file.write_text(json.dumps({"port": self.port, "controller_port": self.controller_port}))
        self.proc: subprocess.Popen[bytes] | None = None
        self.frozen = False
        self.startup_seconds: float | None = None
        self._spawned_at = 0.0
        self._archive: ClassDataArchive | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.dir / "logs" / "server.log"

    @property
    def out_path(self) -> Path:
        return self.dir / "node.out"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        text = "".join(p.read_text(errors="replace") for p in (self.out_path, self.log_path) if p.exists())
        return "\n".join(text.strip().splitlines()[-lines:])

    def _write_properties(self, shared: dict[str, str]) -> Path:
        props = {
            **shared,
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "log.dirs": str(self.dir / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        }
        path = self.dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def _format(self, java: str, jars: Path, properties: Path, cluster_id: str) -> None:
        if (self.dir / "data" / "meta.properties").exists():
            return
        archive = ClassDataArchive(jars.parent / "cds", "format", java)
        fmt = subprocess.run(
            [
                java,
                *extra_jvm_options(),
                *archive.options(),
                "-cp",
                f"{jars}/*",
                f"-Dlog4j2.configurationFile={LOG4J2}",
                f"-Dkafka.logs.dir={self.dir / 'logs'}",
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",  # one argument: a base64 id may start with "-"
                "-c",
                str(properties),
                "--ignore-formatted",
            ],
            capture_output=True,
            text=True,
        )
        archive.exited(fmt.returncode)
        if fmt.returncode != 0:
            said = [line for line in (fmt.stdout + fmt.stderr).splitlines() if line.strip()]
            said = [line for line in said if not line.lstrip().startswith(("at ", "..."))] or said
            raise LauncherError(
                f"formatting storage of node {self.node_id} ({self.dir}) failed: {' | '.join(said[-3:])}"
            )

    def spawn(self, shared: dict[str, str], cluster_id: str) -> None:
        """Format the node's storage on its first start, then start its JVM (tied to the calling thread)."""
        if self.is_running():
            return
        for port in (self.port, self.controller_port):
            if port_in_use(port):
                raise LauncherError(
                    f"cannot start node {self.node_id} ({self.dir}): port 127.0.0.1:{port} is already in use "
                    f"(stop what holds it, or remove {self.dir / 'ports.json'} to pick new ports)"
                )
        java = require_tool("java", "install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
        jars = ensure_jars("broker")
        properties = self._write_properties(shared)
        (self.dir / "logs").mkdir(exist_ok=True)
        self._format(java, jars, properties, cluster_id)
        if self._archive is None:
            self._archive = ClassDataArchive(jars.parent / "cds", "broker", java)
        cmd = [
            java,
            *self.heap.split(),
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            *extra_jvm_options(),
            *self._archive.options(),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={LOG4J2}",
            f"-Dkafka.logs.dir={self.dir / 'logs'}",
            "-cp",
            f"{jars}/*",
            "kafka.Kafka",
            str(properties),
        ]
        self._spawned_at = time.monotonic()
        self.frozen = False
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent
            )

    def wait_ready(self, deadline: float) -> None:
        """Wait until this node answers a metadata request that names it as a broker (registered, unfenced)."""
        admin = AdminClient(
            {
                "bootstrap.servers": self.address,
                "socket.connection.setup.timeout.ms": 1000,
                "reconnect.backoff.max.ms": 200,
                "log_level": 0,
            }
        )
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise LauncherError(
                    f"node {self.node_id} ({self.dir}) exited with code {code} while starting:\n{self.log_tail()}"
                )
            try:
                if self.node_id in admin.list_topics(timeout=1.0).brokers:
                    self.startup_seconds = time.monotonic() - self._spawned_at
                    return
            except KafkaException:  # until its listener is up
                pass
            time.sleep(0.2)
        raise LauncherError(f"node {self.node_id} ({self.dir}) was not a registered broker in time:\n{self.log_tail()}")

    def start(self, shared: dict[str, str], cluster_id: str, timeout_s: float = 90) -> None:
        self.spawn(shared, cluster_id)
        self.wait_ready(time.monotonic() + timeout_s)

    # ------------------------------------------------------------ faults
    def stop(self, timeout_s: float = 30) -> None:
        """Clean shutdown (SIGTERM: controlled shutdown moves its leaderships away, then it flushes and exits)."""
        if self.proc is not None and self.is_running():
            self.thaw()
            terminate(self.proc, timeout_s)
            self._exited()

    def signal_stop(self) -> None:
        """SIGTERM without waiting (``stop`` waits)."""
        if self.proc is not None and self.is_running():
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: a crash as the other nodes see it (its page cache survives: the machine did not go down)."""
        if self.proc is not None and self.is_running():
            self.proc.kill()
            self.proc.wait()
            self.frozen = False
            self._exited()

    def freeze(self) -> None:
        """SIGSTOP: the node stops answering, holding its connections open (a long GC pause, a hung VM)."""
        if self.proc is not None and self.is_running():
            os.kill(self.proc.pid, signal.SIGSTOP)
            self.frozen = True

    def thaw(self) -> None:
        if self.proc is not None and self.frozen and self.is_running():
            os.kill(self.proc.pid, signal.SIGCONT)
        self.frozen = False

    def _exited(self) -> None:
        if self._archive is not None and self.proc is not None:
            self._archive.exited(self.proc.returncode)

    def leader_epoch(self) -> int | None:
        """The highest metadata-quorum epoch at which this node's log says it became the leader, None if never."""
        if not self.log_path.exists():
            return None
        epochs = [
            int(m.group(2))
            for m in _LEADER_LINE.finditer(self.log_path.read_text(errors="replace"))
            if int(m.group(1)) == self.node_id
        ]
        return max(epochs) if epochs else None

    def __repr__(self) -> str:
        state = "frozen" if self.frozen else "running" if self.is_running() else "stopped"
        return f"KRaftNode({self.node_id}, {self.address}, {state})"
