"""Where the analytics benches run ``monitor analyze``: Spark's local mode (``local[*]``, the default), or a
standalone cluster that the bench starts on this machine (``--master standalone``: one master and one worker with
every core, from pyspark's own distribution, ``harness/spark_cluster.py``).

CPU is counted on both sides, in CPU seconds (user + system):
- the driver's process tree (the Python driver and the JVM it launches) with ``bench/cputree.py``;
- on the cluster, the daemons and the executors, which are not in that tree: every process below this bench that is
  not the driver's tree (``cputree.tree_snapshot`` of this process, read when no driver runs), before and after
  the run. The worker waits for the executors it started, so an application's executors are counted in full once
  the worker has reaped them: the reading after a run waits for that. The daemons' own idle CPU (heartbeats) in
  that time is counted too; it is small beside a run's.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from .cputree import LineSink, TreeCpu, measure, tree_snapshot

if TYPE_CHECKING:
    from harness.spark_cluster import SparkCluster

STANDALONE = "standalone"
REAP_TIMEOUT_S = 60.0


@dataclass
class Measured:
    tree: TreeCpu  # the driver's process tree
    cluster_cpu_s: float  # the cluster's daemons and executors during the run; 0 in local mode

    @property
    def cpu_s(self) -> float:
        return self.tree.cpu_s + self.cluster_cpu_s


class Master:
    """``with Master(spec, workdir, executor_memory) as master: master.run(argv)`` — ``argv`` gets ``--master``."""

    def __init__(self, spec: str, workdir: str, executor_memory: str = "1g"):
        self.spec, self.workdir, self.executor_memory = spec, workdir, executor_memory
        self.cluster: SparkCluster | None = None
        self.idle_processes = 0

    def __enter__(self) -> Master:
        if self.spec == STANDALONE:
            from harness.spark_cluster import SparkCluster

            defaults = {"spark.executor.memory": self.executor_memory}
            work = Path(self.workdir) / "spark-cluster"
            cluster = SparkCluster(work, cores=os.cpu_count() or 2, memory=self.executor_memory, defaults=defaults)
            self.cluster = cluster.start()
            self.idle_processes = tree_snapshot(os.getpid())[1]
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.cluster is not None:
            self.cluster.stop()

    @property
    def url(self) -> str:
        return self.cluster.master_url if self.cluster is not None else self.spec

    def describe(self) -> str:
        if self.cluster is None:
            return self.spec
        return (
            f"a standalone cluster here ({self.cluster.master_url}, one worker with {self.cluster.cores} cores, "
            f"executors of {self.executor_memory})"
        )

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        base = self.cluster.env() if self.cluster is not None else dict(os.environ)
        return {**base, **(extra or {})}

    def _cluster_cpu_s(self) -> float:
        if self.cluster is None:
            return 0.0
        deadline = time.monotonic() + REAP_TIMEOUT_S
        cpu_s, processes = tree_snapshot(os.getpid())
        while processes > self.idle_processes and time.monotonic() < deadline:
            time.sleep(0.2)  # an executor of the run that just ended, not yet reaped by the worker
            cpu_s, processes = tree_snapshot(os.getpid())
        if processes > self.idle_processes:
            raise RuntimeError(f"the cluster still runs {processes - self.idle_processes} executor(s) of an ended run")
        return cpu_s

    def run(
        self,
        argv: list[str],
        timeline_s: float = 1.0,
        on_stderr: LineSink | None = None,
        env: dict[str, str] | None = None,
    ) -> Measured:
        """Run ``argv --master <url>`` to its end; an exit code other than 0 raises."""
        before = self._cluster_cpu_s()
        tree = measure([*argv, "--master", self.url], timeline_s=timeline_s, on_stderr=on_stderr, env=self.env(env))
        if tree.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} {argv[1] if len(argv) > 1 else ''} exited {tree.returncode}")
        return Measured(tree, self._cluster_cpu_s() - before)
