"""A real Spark standalone cluster (one master, one worker) from pyspark's own distribution, on loopback.

Nothing is downloaded: pyspark ships ``bin/spark-class`` and every jar the standalone Master and Worker need.
Used by the session fixture ``spark_cluster`` (tests/conftest.py) and by hand:

    .venv/bin/python -m harness.spark_cluster            # prints the master URL, Ctrl-C stops both

Both processes die with the process that started them (harness/services.py: PR_SET_PDEATHSIG).
Driver and executors run on this machine, so they share the filesystem (plain paths work for --history/--out)
and the Python: ``PYSPARK_PYTHON`` is this interpreter (the job has no Python UDFs, so executors never start a
Python worker today, but a future UDF would then find the same venv).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from harness.services import Service
from mirrorwatch.localkafka.launcher import free_port

SPARK_HOME = Path(pyspark.__file__).parent


def spark_env(work: Path, defaults: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the cluster's processes and for drivers that talk to it. The daemons and the
    executors run with the test JVMs' options (tests/conftest.py: C1 only), through spark-defaults.conf in a
    conf folder of the cluster's own, which also holds ``defaults`` (e.g. ``spark.executor.memory``)."""
    jvm_opts = os.environ.get("MIRRORWATCH_JVM_OPTS", "")
    settings = {**({"spark.executor.defaultJavaOptions": jvm_opts} if jvm_opts else {}), **(defaults or {})}
    conf = work / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "spark-defaults.conf").write_text("".join(f"{key} {value}\n" for key, value in settings.items()))
    return {
        **os.environ,
        "SPARK_CONF_DIR": str(conf),
        "SPARK_DAEMON_JAVA_OPTS": jvm_opts,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_NO_DAEMONIZE": "1",
        # the master's REST submission server would take the fixed port 6066: off, nothing here uses it
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


class SparkCluster:
    def __init__(self, work: Path, cores: int = 2, memory: str = "1g", defaults: dict[str, str] | None = None):
        self.work = work
        self.cores, self.memory, self.defaults = cores, memory, defaults
        self.port, self.ui_port, self.worker_ui_port = free_port(), free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.services: list[Service] = []

    def _start(self, name: str, main_class: str, *args: str) -> Service:
        service = Service(name, [str(SPARK_HOME / "bin" / "spark-class"), main_class, *args], self.work, env=self.env())
        self.services.append(service)
        return service

    def start(self, timeout_s: float = 300) -> SparkCluster:  # two JVMs starting on a busy 2-core machine
        self.work.mkdir(parents=True, exist_ok=True)
        self._start(
            "spark-master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        self._start(
            "spark-worker",
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--webui-port",
            str(self.worker_ui_port),
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--work-dir",
            str(self.work / "worker"),
            self.master_url,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for service in self.services:
                if not service.alive():
                    self.stop()
                    raise RuntimeError(f"{service.name} exited:\n{service.log_tail()}")
            if self.alive_workers() >= 1:
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"no worker registered with {self.master_url} within {timeout_s:g} s")

    def state(self) -> dict[str, Any]:
        """The master's own JSON status page (workers, running and completed applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as response:
            state: dict[str, Any] = json.load(response)
        return state

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):
            # not up yet; ask again. ValueError: the master's UI starts its pages one by one, and in the moment
            # after its port opens "/json/" can reach the "/" page (HTML, status 200) before "/json" is up
            return 0

    def env(self) -> dict[str, str]:
        return spark_env(self.work, self.defaults)

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.services.clear()


if __name__ == "__main__":
    import tempfile

    cluster = SparkCluster(Path(tempfile.mkdtemp(prefix="mw-spark-"))).start()
    print(f"{cluster.master_url} (web UI http://127.0.0.1:{cluster.ui_port}/, logs in {cluster.work}); Ctrl-C stops it")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        cluster.stop()
