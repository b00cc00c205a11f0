"""The three-node local KRaft cluster harness (mirrorwatch/localkafka/multinode.py): replication as configured, who
leads what, and each fault it can put a node through coming back to a cluster fully in sync."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, OffsetSpec

from harness.mirror_harness import wait_until
from mirrorwatch.core.clients import list_offsets_fresh
from mirrorwatch.localkafka.multinode import (
    OFFSETS_PARTITIONS,
    MultiNodeCluster,
    coordinator_partition,
    java_string_hash,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("foo", 101574),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # outside the BMP: two UTF-16 code units
    ],
)
def test_java_string_hash_matches_javas(text, expected):
    assert java_string_hash(text) == expected


@pytest.mark.parametrize(
    "key, partitions, expected",
    [
        ("foo", 50, 101574 % 50),
        ("polygenelubricants", 50, 0),  # Utils.abs(Integer.MIN_VALUE) is 0, not a negative number
        ("Aa", 10, 2112 % 10),
    ],
)
def test_coordinator_partition_is_kafkas_formula(key, partitions, expected):
    assert coordinator_partition(key, partitions) == expected


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    nodes = MultiNodeCluster("three", tmp_path_factory.mktemp("multinode"), nodes=3)
    nodes.start()
    try:
        yield nodes
    finally:
        nodes.stop()


def _topic(cluster: MultiNodeCluster, name: str, partitions: int = 3) -> None:
    admin = AdminClient(cluster.client_config())
    admin.create_topics([NewTopic(name, partitions)])[name].result(30)
    wait_until(lambda: not cluster.under_replicated([name]) and _has(cluster, name), 60, 0.2, f"topic {name}")


def _has(cluster: MultiNodeCluster, name: str) -> bool:
    md = AdminClient(cluster.client_config()).list_topics(name, timeout=10).topics.get(name)
    return md is not None and md.error is None and bool(md.partitions)


def test_topics_are_replicated_three_ways_with_two_in_sync_required(cluster):
    _topic(cluster, "replicated")
    admin = AdminClient(cluster.client_config())
    md = admin.list_topics("replicated", timeout=10).topics["replicated"]
    assert all(len(p.replicas) == 3 and len(p.isrs) == 3 for p in md.partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, "replicated")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["min.insync.replicas"].value == "2"
    assert cluster.brokers() == {1, 2, 3}


def test_the_group_coordinator_is_the_leader_of_the_groups_offsets_partition(cluster):
    _topic(cluster, "grouped", 1)
    consumer = Consumer({**cluster.client_config(), "group.id": "harness-group", "log_level": 0})
    consumer.commit(offsets=[TopicPartition("grouped", 0, 0)], asynchronous=False)
    consumer.close()
    partition = coordinator_partition("harness-group", OFFSETS_PARTITIONS)
    assert cluster.group_coordinator("harness-group") == cluster.leader_of("__consumer_offsets", partition)


def test_a_killed_leader_is_replaced_and_comes_back_in_sync(cluster):
    _topic(cluster, "killed-leader", 1)
    leader = cluster.leader_of("killed-leader", 0)
    cluster.node(leader).kill()
    try:
        wait_until(lambda: cluster.leader_of("killed-leader", 0) not in (leader, -1), 60, 0.3, "a new leader")
        assert cluster.under_replicated(["killed-leader"])  # two in sync of three while it is down
    finally:
        cluster.start_node(leader)
    cluster.wait_in_sync(120)


def test_the_active_controller_moves_when_it_is_killed(cluster):
    controller = cluster.active_controller()
    assert controller in (1, 2, 3)
    cluster.node(controller).kill()
    try:
        wait_until(lambda: cluster.active_controller() not in (controller, -1), 60, 0.3, "another active controller")
    finally:
        cluster.start_node(controller)
    cluster.wait_in_sync(120)


def test_a_node_frozen_past_its_session_is_fenced_then_rejoins(cluster):
    node = cluster.node(3)
    node.freeze()
    try:
        wait_until(lambda: 3 not in cluster.brokers(), 60, 0.5, "node 3 fenced while frozen")
    finally:
        node.thaw()
    cluster.wait_in_sync(120)


def test_end_offsets_right_after_a_leader_change(cluster):
    """librdkafka 2.16's admin ListOffsets sends the leader epoch its client cached; after the leader changed, the
    broker answers FENCED_LEADER_EPOCH and the client retried in a busy loop until the request timed out (a core
    all along: the fault suite's poller and the mirror's reads at a rebalance). core.clients.list_offsets_fresh
    reads the metadata first. Both clients here cached the epochs before the leader's restart."""
    _topic(cluster, "epochs", 3)
    request = {TopicPartition("epochs", p): OffsetSpec.latest() for p in range(3)}
    stale, fresh = (AdminClient({**cluster.client_config(), "log_level": 0}) for _ in range(2))
    for admin in (stale, fresh):
        assert [f.result(15).offset for f in admin.list_offsets(request, request_timeout=10).values()] == [0, 0, 0]
    leader = cluster.leader_of("epochs", 0)
    cluster.restart_node(leader)
    cluster.wait_in_sync(120)
    answers = list_offsets_fresh(fresh, request, 10)
    assert [f.result(15).offset for f in answers.values()] == [0, 0, 0]
    # what it works around: the same request from the client without fresh metadata fails once its timeout is up
    with pytest.raises(KafkaException, match="FENCED_LEADER_EPOCH"):
        [f.result(5) for f in stale.list_offsets(request, request_timeout=3).values()]


def test_up_with_three_brokers_prints_one_bootstrap_of_three_and_stops_on_sigterm(tmp_path):
    cli = Path(sys.executable).parent / "mirrorwatch-kafka"
    out = tmp_path / "up.out"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [str(cli), "up", "solo", "--brokers", "3", "--dir", str(tmp_path)], stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        wait_until(lambda: "Press Ctrl-C" in out.read_text() or proc.poll() is not None, 120, 0.3, "up to start")
        text = out.read_text()
        assert proc.poll() is None, text
        line = next(line for line in text.splitlines() if line.startswith("solo: bootstrap.servers="))
        assert len(line.split("=", 1)[1].split()[0].split(",")) == 3
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(90) == 0, out.read_text()
