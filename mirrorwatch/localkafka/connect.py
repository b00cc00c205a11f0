"""A real Kafka Connect distributed worker (connect-runtime from the jar cache) running MirrorMaker 2's connectors.

This is how most MM2 runs in production: ``org.apache.kafka.connect.cli.ConnectDistributed`` on the target
cluster, with ``MirrorSourceConnector``, ``MirrorCheckpointConnector`` and ``MirrorHeartbeatConnector`` submitted
over the worker's REST API (Strimzi's ``KafkaMirrorMaker2`` does the same). The worker's group and its
offsets/config/status topics are the caller's to name, as in a real Connect cluster.

The REST calls here are the launcher's own (submit, pause, resume, status) for tests, benchmarks and the demo;
the monitor reads connector state through ``core.connect_rest``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from .jars import LauncherError
from .process import ConnectRuntimeProcess, free_port

SOURCE_CLASS = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
CHECKPOINT_CLASS = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
HEARTBEAT_CLASS = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"


def worker_properties(
    bootstrap: str,
    group: str,
    offsets_topic: str,
    configs_topic: str,
    status_topic: str,
    port: int,
    **extra: str,
) -> dict[str, str]:
    """A distributed worker on one single-node cluster: byte-array converters (MM2 copies bytes), RF 1."""
    props = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "offset.storage.topic": offsets_topic,
        "config.storage.topic": configs_topic,
        "status.storage.topic": status_topic,
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": str(port),
        "plugin.discovery": "only_scan",
        "offset.flush.interval.ms": "1000",
    }
    props.update({k: str(v) for k, v in extra.items()})
    return props


def mirror_connector_configs(
    source_alias: str,
    target_alias: str,
    source_bootstrap: str,
    target_bootstrap: str,
    topics: str,
    **extra: str,
) -> dict[str, dict[str, str]]:
    """The three MM2 connectors' configs for one ``source->target`` pair (``extra`` goes to all three)."""
    common = {
        "source.cluster.alias": source_alias,
        "target.cluster.alias": target_alias,
        "source.cluster.bootstrap.servers": source_bootstrap,
        "target.cluster.bootstrap.servers": target_bootstrap,
        "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "sync.topic.acls.enabled": "false",
        "topics": topics,
        "tasks.max": "1",
        **{k: str(v) for k, v in extra.items()},
    }
    return {
        "source": {"connector.class": SOURCE_CLASS, **common},
        "checkpoint": {"connector.class": CHECKPOINT_CLASS, **common},
        "heartbeat": {"connector.class": HEARTBEAT_CLASS, **common},
    }


class LocalConnectWorker(ConnectRuntimeProcess):
    """One distributed Connect worker process; ``url`` is its REST API on a free loopback port."""

    main_class = "org.apache.kafka.connect.cli.ConnectDistributed"
    properties_file = "connect-distributed.properties"
    out_file = "connect.out"

    @classmethod
    def on(cls, workdir: str | Path, bootstrap: str, group: str, topic_prefix: str, **extra: str) -> LocalConnectWorker:
        """A worker of Connect group ``group`` on ``bootstrap``, its three topics named ``<prefix>-offsets`` etc."""
        port = free_port()
        props = worker_properties(
            bootstrap,
            group,
            f"{topic_prefix}-offsets",
            f"{topic_prefix}-configs",
            f"{topic_prefix}-status",
            port,
            **extra,
        )
        return cls(workdir, props)

    @property
    def url(self) -> str:
        return self.properties["listeners"]

    @property
    def offsets_topic(self) -> str:
        return self.properties["offset.storage.topic"]

    def wait_ready(self, timeout_s: float = 180) -> LocalConnectWorker:
        """Until the REST API answers and the worker has joined its group (``GET /connectors`` answers 200)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.is_running():
                raise LauncherError(f"the Connect worker exited during start-up: {self.log_tail(5)}")
            try:
                if requests.get(f"{self.url}/connectors", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(1)
        raise LauncherError(f"the Connect worker's REST API did not answer within {timeout_s:g} s: {self.log_tail(5)}")

    # ------------------------------------------------------------ REST (the operator's side)
    def _call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201, 202, 204)) -> Any:
        # a rebalance in progress answers 409, or 500 "a rebalance is expected" (RebalanceNeededException): the
        # worker retries such requests itself, and so do we for a while
        deadline = time.monotonic() + 60
        while True:
            resp = requests.request(method, f"{self.url}{path}", json=body, timeout=30)
            if resp.status_code in ok:
                return resp.json() if resp.content else None
            rebalancing = resp.status_code == 409 or (resp.status_code == 500 and "rebalance" in resp.text)
            if not rebalancing or time.monotonic() > deadline:
                raise LauncherError(f"Connect {method} {path}: HTTP {resp.status_code} {resp.text[:300]}")
            time.sleep(1)

    def put_connector(self, name: str, config: dict[str, str]) -> None:
        self._call("PUT", f"/connectors/{quote(name, safe='')}/config", {**config, "name": name})

    def pause(self, name: str) -> None:
        self._call("PUT", f"/connectors/{quote(name, safe='')}/pause")

    def resume(self, name: str) -> None:
        self._call("PUT", f"/connectors/{quote(name, safe='')}/resume")

    def restart(self, name: str, include_tasks: bool = True) -> None:
        query = "?includeTasks=true" if include_tasks else ""
        self._call("POST", f"/connectors/{quote(name, safe='')}/restart{query}")

    def delete(self, name: str) -> None:
        self._call("DELETE", f"/connectors/{quote(name, safe='')}", ok=(200, 204, 404))

    def tasks(self, name: str) -> list[dict[str, Any]]:
        """The connector's task configs (``[{"id": ..., "config": {...}}]``)."""
        tasks: list[dict[str, Any]] = self._call("GET", f"/connectors/{quote(name, safe='')}/tasks")
        return tasks

    def status(self, name: str) -> dict[str, Any]:
        status: dict[str, Any] = self._call("GET", f"/connectors/{quote(name, safe='')}/status")
        return status
