"""Local KRaft clusters of several combined broker+controller nodes, for the fault suite and ``mirrorwatch-kafka up
--brokers 3``.

Every node is a voter (static quorum: ``controller.quorum.voters``); topics and the internal topics (consumer
offsets, transaction state) get replication factor = nodes and ``min.insync.replicas`` = nodes - 1 (3 and 2 for three
nodes), as a production cluster would. Each node lives in ``<cluster dir>/node-<id>`` with its own properties, data,
logs and ports (kept in ``ports.json`` so that a restarted node comes back on the same address). One node at a time can
be stopped, killed, frozen, thawed and restarted; the cluster's answers about who leads what come from the admin
client's metadata and group descriptions, never from the engine's own code.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._group import ConsumerGroupDescription

from .jars import LauncherError
from .node import KRaftNode

# Three JVMs per cluster, two clusters on a 2-core, 24 GiB machine: a small heap each is plenty for test traffic
# (bench/ runs single nodes with the default heap). MIRRORWATCH_NODE_HEAP overrides it.
NODE_HEAP = os.environ.get("MIRRORWATCH_NODE_HEAP", "-Xms128m -Xmx384m")
# Two partitions per node of each coordinator topic (Kafka's default is 50 for transaction state): the coordinators
# still spread over the nodes, and a node follows a few dozen partitions rather than a hundred, each of them part of
# every replica fetch it sends.
TRANSACTION_STATE_PARTITIONS = 6
OFFSETS_PARTITIONS = 6


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(key: str, partitions: int) -> int:
    """The internal-topic partition that holds ``key``'s state, as Kafka's coordinators choose it:
    ``Utils.abs(key.hashCode) % partitions`` (``TransactionStateManager.partitionFor``; groups alike), where
    ``Utils.abs(Integer.MIN_VALUE)`` is 0."""
    h = java_string_hash(key)
    return 0 if h == -(1 << 31) else abs(h) % partitions


class MultiNodeCluster:
    """A KRaft cluster of ``nodes`` combined broker+controller nodes on loopback (node ids 1..nodes)."""

    def __init__(self, name: str, base_dir: str | os.PathLike[str], nodes: int = 3, heap: str = NODE_HEAP) -> None:
        if nodes < 1:
            raise LauncherError(f"a cluster needs at least one node (got {nodes})")
        self.name = name
        self.dir = Path(base_dir) / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.nodes = [KRaftNode(self.dir / f"node-{i}", i, heap) for i in range(1, nodes + 1)]
        self.startup_seconds: float | None = None
        self._cluster_id_file = self.dir / "cluster.id"

    # ------------------------------------------------------------ addresses and files
    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes)

    def client_config(self) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap}

    @property
    def log_path(self) -> Path:
        """The first node's log (every node's is ``node.log_path``)."""
        return self.nodes[0].log_path

    def node(self, node_id: int) -> KRaftNode:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise LauncherError(f"cluster '{self.name}' has no node {node_id} (ids 1..{len(self.nodes)})")

    def is_running(self) -> bool:
        return all(node.is_running() for node in self.nodes)

    def _properties(self) -> dict[str, str]:
        n = len(self.nodes)
        min_isr = str(max(1, n - 1))
        return {
            "controller.quorum.voters": ",".join(f"{x.node_id}@127.0.0.1:{x.controller_port}" for x in self.nodes),
            "num.partitions": "1",
            "default.replication.factor": str(n),
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": str(n),
            "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
            "transaction.state.log.replication.factor": str(n),
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": str(TRANSACTION_STATE_PARTITIONS),
            "share.coordinator.state.topic.replication.factor": str(n),
            "share.coordinator.state.topic.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": "0",
            # Kafka's default session: the other nodes fence a frozen or killed node after it (the fault suite's
            # freeze outlasts it on purpose), and a restarted node waits this long to be let back in.
            "broker.session.timeout.ms": "9000",
            "auto.create.topics.enable": "false",
            "unclean.leader.election.enable": "false",
            "log.segment.bytes": str(64 * 1024 * 1024),
            "num.network.threads": "2",
            "num.io.threads": "2",
            # a clean shutdown moves leadership away first, as a rolling restart in production does
            "controlled.shutdown.enable": "true",
        }

    def _cluster_id(self) -> str:
        if self._cluster_id_file.exists():
            return self._cluster_id_file.read_text().strip()
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        self._cluster_id_file.write_text(cluster_id)
        return cluster_id

    # ------------------------------------------------------------ lifecycle
    def spawn(self) -> None:
        shared = self._properties()
        cluster_id = self._cluster_id()
        for node in self.nodes:
            node.spawn(shared, cluster_id)

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        try:
            for node in self.nodes:
                node.wait_ready(deadline)
            self.wait_brokers(len(self.nodes), deadline - time.monotonic())
        except LauncherError:
            self.kill()
            raise
        self.startup_seconds = max(node.startup_seconds or 0.0 for node in self.nodes)

    def start(self, timeout_s: float = 120) -> MultiNodeCluster:
        """Start every node (from a long-lived thread: each node is tied to the spawning thread) and wait until all
        of them are registered brokers."""
        self.spawn()
        self.wait_ready(timeout_s)
        return self

    def stop(self, timeout_s: float = 30) -> None:
        """Stop every node at once: one by one, the last voters would wait out their controlled shutdown for a
        quorum that has already gone."""
        for node in self.nodes:
            node.thaw()
            node.signal_stop()
        for node in self.nodes:
            node.stop(timeout_s)

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()

    # A restarted node replays the metadata log and loads its partitions before it is let back in: seconds on a quiet
    # machine, and once ~100 s in a fresh-clone run of the whole suite on 2 cores (its controller's "exceptionally
    # slow" events took 13 s each), so the wait is generous; a node that never comes back still fails it.
    def start_node(self, node_id: int, timeout_s: float = 240) -> None:
        """Start one stopped or killed node again (same ports, same data) and wait until it is a broker again."""
        self.node(node_id).start(self._properties(), self._cluster_id(), timeout_s)

    def restart_node(self, node_id: int, timeout_s: float = 240) -> None:
        """A clean restart of one node, as a rolling restart does it."""
        self.node(node_id).stop()
        self.start_node(node_id, timeout_s)

    # ------------------------------------------------------------ what the cluster says
    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0, "socket.timeout.ms": 10000})

    def brokers(self, timeout_s: float = 10) -> set[int]:
        """The ids of the brokers the metadata names now (registered and not fenced)."""
        return set(self._admin().list_topics(timeout=timeout_s).brokers)

    def wait_brokers(self, count: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        seen: set[int] = set()
        while time.monotonic() < deadline:
            try:
                seen = self.brokers(5)
                if len(seen) >= count:
                    return
            except KafkaException:  # while a node starts: ask again until the deadline
                pass
            time.sleep(0.3)
        raise LauncherError(f"cluster '{self.name}': {len(seen)} of {count} brokers registered after {timeout_s:.0f} s")

    def leader_of(self, topic: str, partition: int) -> int:
        """The node id that leads ``topic``'s ``partition`` now (-1: none)."""
        md = self._admin().list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None or partition not in md.partitions:
            said = "no such topic" if md is None else str(md.error or f"no partition {partition}")
            raise LauncherError(f"cluster '{self.name}': cannot tell the leader of {topic}[{partition}]: {said}")
        leader: int = md.partitions[partition].leader
        return leader

    def under_replicated(self, topics: list[str] | None = None) -> list[str]:
        """``topic[partition]`` for every partition (of ``topics``, or all, internal topics included) whose ISR is
        not all its replicas, or that has no leader. Empty: fully in sync."""
        md = self._admin().list_topics(timeout=10)
        out = []
        for name, topic in md.topics.items():
            if topics is not None and name not in topics:
                continue
            if topic.error is not None:
                out.append(f"{name}: {topic.error}")
                continue
            for p, part in topic.partitions.items():
                if part.leader < 0 or set(part.isrs) != set(part.replicas):
                    out.append(f"{name}[{p}] leader {part.leader} isr {sorted(part.isrs)} of {sorted(part.replicas)}")
        return out

    def wait_in_sync(self, timeout_s: float = 120, topics: list[str] | None = None) -> None:
        """Wait until every node is a registered broker and every partition's ISR is full."""
        deadline = time.monotonic() + timeout_s
        said = "no answer"
        while time.monotonic() < deadline:
            try:
                brokers = self.brokers(5)
                lagging = self.under_replicated(topics)
                if len(brokers) == len(self.nodes) and not lagging:
                    return
                said = f"brokers {sorted(brokers)}; " + "; ".join(lagging[:5])
            except KafkaException as exc:  # a node restarting: ask again until the deadline
                said = str(exc)
            time.sleep(0.5)
        raise LauncherError(f"cluster '{self.name}' not in sync after {timeout_s:.0f} s: {said}")

    def group_coordinator(self, group: str) -> int:
        """The node id of ``group``'s coordinator (the leader of its ``__consumer_offsets`` partition)."""
        admin = self._admin()  # held until the answer: a collected client fails its pending futures
        description: ConsumerGroupDescription = admin.describe_consumer_groups([group], request_timeout=10)[
            group
        ].result(15)
        node_id: int = description.coordinator.id
        return node_id

    def transaction_coordinator(self, transactional_id: str) -> int:
        """The node id of ``transactional_id``'s transaction coordinator: the leader of its ``__transaction_state``
        partition (``coordinator_partition``)."""
        return self.leader_of(
            "__transaction_state", coordinator_partition(transactional_id, TRANSACTION_STATE_PARTITIONS)
        )

    def active_controller(self) -> int:
        """The node id of the active controller: the running node whose KRaft log says it became leader of the
        metadata quorum at the highest epoch; -1 while none does (an election under way). (librdkafka's metadata names a random broker as "controller" on a
        KRaft cluster, and Kafka's DescribeQuorum is not in its admin API.)"""
        best: tuple[int, int] | None = None
        for node in self.nodes:
            if not node.is_running():
                continue
            epoch = node.leader_epoch()
            if epoch is not None and (best is None or epoch > best[0]):
                best = (epoch, node.node_id)
        return -1 if best is None else best[1]

    def __iter__(self) -> Iterator[KRaftNode]:
        return iter(self.nodes)

    def __repr__(self) -> str:
        up = sum(node.is_running() for node in self.nodes)
        return f"MultiNodeCluster({self.name!r}, {self.bootstrap}, {up}/{len(self.nodes)} running)"


class MultiNodeClusters:
    """Several multi-node clusters under one folder (``mirrorwatch-kafka up --brokers N``), started side by side."""

    def __init__(self, names: list[str], base_dir: str | os.PathLike[str], nodes: int = 3) -> None:
        self.clusters = {name: MultiNodeCluster(name, base_dir, nodes) for name in names}

    def start(self) -> MultiNodeClusters:
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

    def __getitem__(self, name: str) -> MultiNodeCluster:
        return self.clusters[name]
