"""The real Apache MirrorMaker 2 (connect-mirror from the jar cache) in dedicated mode, for benchmarks and tests.

``LocalMirrorMaker2`` writes an ``mm2.properties`` and runs ``org.apache.kafka.connect.mirror.MirrorMaker`` on
it; ``kill()`` is a SIGKILL (as a crashed MM2 looks to the clusters), ``start()`` again resumes from MM2's own
Connect offsets. Every replication-factor property is 1 (the local clusters are single-node).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from . import process
from .jars import ensure_jars, require_tool
from .process import LOG4J2, terminate

_RF_KEYS = (
    "replication.factor",
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
    "offset.storage.replication.factor",
    "status.storage.replication.factor",
    "config.storage.replication.factor",
)


def mm2_properties(clusters: dict[str, str], source: str, target: str, topics: str, **extra: str) -> dict[str, str]:
    """Properties for one enabled flow ``source->target`` (the reverse disabled); ``extra`` overrides any key."""
    props = {
        "clusters": ", ".join(clusters),
        **{f"{a}.bootstrap.servers": b for a, b in clusters.items()},
        f"{source}->{target}.enabled": "true",
        f"{source}->{target}.topics": topics,
        f"{target}->{source}.enabled": "false",
        "sync.topic.acls.enabled": "false",
        **{k: "1" for k in _RF_KEYS},
    }
    props.update({k: str(v) for k, v in extra.items()})
    return props


class LocalMirrorMaker2:
    def __init__(self, workdir: str | Path, properties: dict[str, str], heap: str = "-Xms256m -Xmx768m"):
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.properties = dict(properties)
        self.heap = heap
        self.proc: subprocess.Popen | None = None

    @property
    def out_path(self) -> Path:
        return self.dir / "mm2.out"

    def start(self, die_with_parent: bool = True) -> LocalMirrorMaker2:
        if self.is_running():
            return self
        path = self.dir / "mm2.properties"
        path.write_text("".join(f"{k} = {v}\n" for k, v in self.properties.items()))
        jars = ensure_jars("mm2")
        java = require_tool("java", "install a Java 17+ runtime (Debian: apt-get install openjdk-17-jre-headless)")
        (self.dir / "logs").mkdir(exist_ok=True)
        cmd = [
            java,
            *self.heap.split(),
            f"-Dlog4j2.configurationFile={LOG4J2}",
            f"-Dkafka.logs.dir={self.dir / 'logs'}",
            "-cp",
            f"{jars}/*",
            "org.apache.kafka.connect.mirror.MirrorMaker",
            str(path),
        ]
        out = open(self.out_path, "ab")
        self.proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=process.die_with_parent if die_with_parent else None,
        )
        out.close()
        return self

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no flush, no offset commit, no goodbye to the Connect group."""
        if self.is_running():
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout_s: float = 60) -> None:
        if self.is_running():
            terminate(self.proc, timeout_s)

    running = is_running  # the test harness's wait_until(alive=...) asks running(), proc and log_text()

    def log_text(self) -> str:
        return self.out_path.read_text(errors="replace") if self.out_path.exists() else ""

    def log_tail(self, lines: int = 20) -> str:
        text = self.out_path.read_text(errors="replace") if self.out_path.exists() else ""
        return "\n".join(text.strip().splitlines()[-lines:])
