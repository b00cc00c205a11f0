"""Start, stop, kill and restart single-node KRaft clusters on loopback.

Each cluster lives in its own folder: ``server.properties``, ``data/`` (the log dir), ``logs/server.log``
(the broker's log4j2 output), ``broker.out`` (stdout/stderr), and ``ports.json`` so that a restart reuses
the same ports and clients keep their bootstrap address.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from ..core.extras import require_extra
from .classdata import ClassDataArchive
from .jars import KAFKA_VERSION, LauncherError, ensure_jars, require_tool
from .process import LOG4J2, die_with_parent, extra_jvm_options, free_port, port_in_use, terminate

if TYPE_CHECKING:
    from .tls import TlsFiles

HEAP = os.environ.get("MIRRORWATCH_BROKER_HEAP", "-Xms256m -Xmx768m")
STARTUP_TIMEOUT_S = float(os.environ.get("MIRRORWATCH_BROKER_STARTUP_TIMEOUT", "90"))


SECURITY = ("plaintext", "sasl_ssl")
SASL_MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"  # the super user of a SASL_SSL cluster (tests and the launcher's own readiness check)


def _tls_files(folder: Path, cluster_name: str) -> TlsFiles:
    """The cluster's CA and broker certificate: cryptography, the `sasl-ssl` extra (imported only for such a
    cluster, so that the base install imports this module without it)."""
    require_extra("sasl-ssl", "a local cluster with a SASL_SSL listener")
    from .tls import write_tls_files

    return write_tls_files(folder, cluster_name)


class LocalCluster:
    """One single-node KRaft cluster.

    ``security="sasl_ssl"``: the client listener is SASL_SSL (SCRAM-SHA-512 over TLS, a CA and broker certificate
    generated at first start, see ``tls.py``), with KRaft's StandardAuthorizer and no access without an ACL.
    ``users`` (name → password) are created as SCRAM users when the storage is formatted; ``admin`` is the super
    user and must be among them. The controller and inter-broker listeners stay PLAINTEXT on loopback ports
    (their principal, User:ANONYMOUS, is a super user): nothing but this machine can reach them.
    """

    def __init__(
        self,
        name: str,
        base_dir: str | os.PathLike[str],
        port: int | None = None,
        controller_port: int | None = None,
        security: str = "plaintext",
        users: dict[str, str] | None = None,
    ):
        if security not in SECURITY:
            raise LauncherError(f"security must be one of {', '.join(SECURITY)} (got {security!r})")
        if security == "sasl_ssl" and ADMIN_USER not in (users or {}):
            raise LauncherError(f"a sasl_ssl cluster needs users={{'{ADMIN_USER}': <password>, ...}} (its super user)")
        self.name = name
        self.security = security
        self.users = dict(users or {})
        self.dir = Path(base_dir) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self._ports_file = self.dir / "ports.json"
        saved = json.loads(self._ports_file.read_text()) if self._ports_file.exists() else {}
        self.port = port or saved.get("port") or free_port()
        self.controller_port = controller_port or saved.get("controller_port") or free_port()
        while self.controller_port == self.port:  # a just-closed port can come back: the broker refuses two alike
            self.controller_port = free_port()
        ports = {"port": self.port, "controller_port": self.controller_port}
        if security == "sasl_ssl":
            self.internal_port = saved.get("internal_port") or free_port()
            while self.internal_port in (self.port, self.controller_port):  # a just-closed port can come back
                self.internal_port = free_port()
            ports["internal_port"] = self.internal_port
        self._ports_file.write_text(json.dumps(ports))
        self.proc: subprocess.Popen[bytes] | None = None
        self._archive: ClassDataArchive | None = None  # the broker's class-data archive (classdata.py)
        self.startup_seconds: float | None = None
        self.tls = _tls_files(self.dir / "tls", name) if security == "sasl_ssl" else None

    def client_config(self, user: str = ADMIN_USER, password: str | None = None) -> dict[str, str]:
        """librdkafka properties for a client of this cluster (as ``user`` on a SASL_SSL one)."""
        props = {"bootstrap.servers": self.bootstrap}
        if self.security == "sasl_ssl":
            assert self.tls is not None  # written for every sasl_ssl cluster
            props.update(
                {
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": SASL_MECHANISM,
                    "sasl.username": user,
                    "sasl.password": password if password is not None else self.users[user],
                    "ssl.ca.location": str(self.tls.ca),
                }
            )
        return props

    # ------------------------------------------------------------ addresses and files
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.dir / "logs" / "server.log"

    @property
    def out_path(self) -> Path:
        return self.dir / "broker.out"

    def log_tail(self, lines: int = 15) -> str:
        text = ""
        for path in (self.out_path, self.log_path):
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.strip().splitlines()[-lines:])

    def is_running(self) -> bool:
        return self._running() is not None

    def _running(self) -> subprocess.Popen[bytes] | None:
        """The broker's process while it runs, else None."""
        return self.proc if self.proc is not None and self.proc.poll() is None else None

    def _write_properties(self) -> Path:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.dir / "data"),
            "num.partitions": "1",
            # one node: every internal topic must be satisfiable with a single replica
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "10",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "group.initial.rebalance.delay.ms": "0",
            # One node is its own controller: after a pause longer than the broker session (9 s by default: a
            # GC pause, the tests' 12 s SIGSTOP) the controller fences its own broker at the thaw, and for a
            # moment every metadata answer names no broker. librdkafka then forgets the cluster
            # (confluentinc/librdkafka#5301); the mirror replaces such clients (docs/design.md) and tests that
            # on its own, but whole-suite freezes kept meeting the library there, and twice a native crash.
            # In a cluster of several nodes the others fence a paused broker while it is paused, so this
            # self-fence is an artifact of one node. 20 s clears the tests' freezes (12 s plus up to a 2 s
            # heartbeat interval) with room for a loaded machine; it is also how long a restarted node waits
            # to be let in (its previous registration must expire first), so it is not made longer.
            "broker.session.timeout.ms": "20000",
            # as in production: topics are created on purpose, so a component that forgets fails in tests
            "auto.create.topics.enable": "false",
            "log.segment.bytes": str(256 * 1024 * 1024),
            "log.retention.check.interval.ms": "60000",
            "num.network.threads": "2",
            "num.io.threads": "4",
        }
        props.update(self._listener_properties())
        path = self.dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def _listener_properties(self) -> dict[str, str]:
        if self.security == "plaintext":
            return {
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names": "CONTROLLER",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            }
        assert self.tls is not None  # written for every sasl_ssl cluster
        return {
            "listeners": (
                f"SASL_SSL://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port},"
                f"CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"SASL_SSL://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{self.internal_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": SASL_MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.tls.keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.tls.ca),
            "ssl.client.auth": "none",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # ANONYMOUS is the principal of the loopback PLAINTEXT controller and inter-broker listeners
            "super.users": f"User:{ADMIN_USER};User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }

    # ------------------------------------------------------------ lifecycle
    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> LocalCluster:
        """Start and wait until a metadata request succeeds.

        Call from a long-lived thread: the broker is tied to the spawning *thread* (PR_SET_PDEATHSIG).
        """
        self.spawn()
        self.wait_ready(timeout_s)
        return self

    def spawn(self) -> None:
        if self.is_running():
            return
        java = require_tool("java", "install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
        for port in (self.port, self.controller_port, getattr(self, "internal_port", None)):
            if port is None:
                continue
            if port_in_use(port):
                raise LauncherError(
                    f"cannot start Kafka cluster '{self.name}': port 127.0.0.1:{port} is already in use (stop what holds it, or remove {self._ports_file} to pick new ports)"
                )
        jars = ensure_jars("broker")
        props = self._write_properties()
        classpath = f"{jars}/*"
        (self.dir / "logs").mkdir(exist_ok=True)
        if not (self.dir / "data" / "meta.properties").exists():
            # "--cluster-id=ID" form: a base64 id may start with "-", which a separate argument would turn into an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            format_archive = ClassDataArchive(jars.parent / "cds", "format", java)
            fmt = subprocess.run(
                [
                    java,
                    *extra_jvm_options(),
                    *format_archive.options(),
                    "-cp",
                    classpath,
                    f"-Dlog4j2.configurationFile={LOG4J2}",
                    f"-Dkafka.logs.dir={self.dir / 'logs'}",
                    "kafka.tools.StorageTool",
                    "format",
                    f"--cluster-id={cluster_id}",
                    "-c",
                    str(props),
                    "--ignore-formatted",
                    *self._scram_arguments(),
                ],
                capture_output=True,
                text=True,
            )
            format_archive.exited(fmt.returncode)
            if fmt.returncode != 0:
                # the exception's own lines, not the stack frames under them (they said nothing of what was wrong)
                said = [line for line in (fmt.stdout + fmt.stderr).splitlines() if line.strip()]
                said = [line for line in said if not line.lstrip().startswith(("at ", "..."))] or said
                tail = " | ".join(said[-3:])
                raise LauncherError(f"formatting storage for Kafka cluster '{self.name}' failed: {tail}")
        cmd = [
            java,
            *HEAP.split(),
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            *extra_jvm_options(),
            *self._archive_options(java, jars),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={LOG4J2}",
            f"-Dkafka.logs.dir={self.dir / 'logs'}",
            "-cp",
            classpath,
            "kafka.Kafka",
            str(props),
        ]
        self._spawned_at = time.monotonic()
        out = open(self.out_path, "ab")
        self.proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent
        )
        out.close()
        _REGISTRY.add(self)

    def _archive_options(self, java: str, jars: Path) -> list[str]:
        if self._archive is None:
            self._archive = ClassDataArchive(jars.parent / "cds", "broker", java)
        return self._archive.options()

    def _exited(self) -> None:
        if self._archive is not None and self.proc is not None:
            self._archive.exited(self.proc.returncode)

    def _scram_arguments(self) -> list[str]:
        if self.security != "sasl_ssl":
            return []
        out = []
        for user, password in self.users.items():
            out += ["--add-scram", f"{SASL_MECHANISM}=[name={user},password={password}]"]
        return out

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        try:
            self._wait_ready(self._spawned_at + timeout_s)
        except LauncherError:
            self.kill()
            raise
        self.startup_seconds = time.monotonic() - self._spawned_at

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        # a TLS and SCRAM handshake with a JVM still warming up can take seconds on a busy machine; the setup
        # timeout covers it, so 1 s (plenty for PLAINTEXT) would fail every attempt there
        setup_ms = 1000 if self.security == "plaintext" else 10000
        admin = AdminClient(
            {
                **self.client_config(),
                "socket.connection.setup.timeout.ms": setup_ms,
                "reconnect.backoff.max.ms": 200,
                "log_level": 0,
            }
        )
        proc = self.proc
        assert proc is not None  # spawn() started it
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise LauncherError(
                    f"Kafka cluster '{self.name}' exited with code {proc.returncode} while starting; log {self.out_path}:\n{self.log_tail()}"
                )
            try:
                md = admin.list_topics(timeout=1.0)
                if md.brokers:
                    return
            except Exception:  # KafkaException until the listener is up
                pass
            time.sleep(0.2)
        raise LauncherError(
            f"Kafka cluster '{self.name}' did not answer a metadata request within {STARTUP_TIMEOUT_S:.0f} s; log {self.log_path}:\n{self.log_tail()}"
        )

    def stop(self, timeout_s: float = 30) -> None:
        """Clean shutdown (SIGTERM: the broker flushes and writes its clean-shutdown marker)."""
        proc = self._running()
        if proc is not None:
            terminate(proc, timeout_s)
            self._exited()

    def kill(self) -> None:
        """SIGKILL: as a machine crash looks to the broker (unflushed page cache aside)."""
        proc = self._running()
        if proc is not None:
            proc.kill()
            proc.wait()
            self._exited()

    def restart(self) -> LocalCluster:
        self.stop()
        return self.start()

    def __repr__(self) -> str:
        return f"LocalCluster({self.name!r}, {self.bootstrap}, {'running' if self.is_running() else 'stopped'})"


class LocalClusters:
    """N independent clusters under one folder; a context manager that stops them all on exit."""

    def __init__(
        self,
        names: list[str],
        base_dir: str | os.PathLike[str],
        security: str = "plaintext",
        users: dict[str, str] | None = None,
    ):
        self.clusters = {name: LocalCluster(name, base_dir, security=security, users=users) for name in names}

    def start(self) -> LocalClusters:
        # Spawn all from this thread (the brokers die with the spawning thread), then wait for each:
        # they boot in parallel, so the total is about one broker's startup time.
        try:
            for cluster in self.clusters.values():
                cluster.spawn()
            for cluster in self.clusters.values():
                cluster.wait_ready()
        except LauncherError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for cluster in self.clusters.values():
            cluster.stop()

    def __getitem__(self, name: str) -> LocalCluster:
        return self.clusters[name]

    def __enter__(self) -> LocalClusters:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _Registry:
    def __init__(self) -> None:
        self._clusters: list[LocalCluster] = []
        atexit.register(self.stop_all)

    def add(self, cluster: LocalCluster) -> None:
        if cluster not in self._clusters:
            self._clusters.append(cluster)

    def stop_all(self) -> None:
        for cluster in self._clusters:
            try:
                cluster.stop(timeout_s=15)
            except Exception:
                pass


_REGISTRY = _Registry()
__all__ = ["KAFKA_VERSION", "LocalCluster", "LocalClusters", "free_port", "port_in_use"]
