"""The local real Kafka clusters: up, whole data, durable across stop/start and SIGKILL, clear failures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.helpers import create_topic, produce_numbered, read_all
from mirrorwatch.localkafka import LauncherError, LocalCluster

BIN = Path(sys.executable).parent


def test_both_clusters_hold_10k_records_on_6_partitions(source, target, topic_name):
    for cluster in (source, target):
        create_topic(cluster.bootstrap, topic_name, partitions=6)
        produce_numbered(cluster.bootstrap, topic_name, 10_000)
        records = read_all(cluster.bootstrap, topic_name)
        assert sorted(int(m.key()[1:]) for m in records) == list(range(10_000))
        assert {m.partition() for m in records} == set(range(6))
        assert all(int(m.key()[1:]) % 6 == m.partition() for m in records)


@pytest.fixture(scope="module")
def spare_cluster_once(tmp_path_factory):
    """A third cluster of its own, one for the module (a cluster's format and first start cost a JVM each): the
    tests stop and kill it, each on its own topic."""
    if os.environ.get("MIRRORWATCH_TEST_SOURCE_BOOTSTRAP"):
        pytest.skip("stop/kill tests need the local launcher")
    cluster = LocalCluster("spare", tmp_path_factory.mktemp("spare")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def spare_cluster(spare_cluster_once):
    """The module's spare cluster, running (a test that failed half-way may have left it stopped)."""
    if not spare_cluster_once.is_running():
        spare_cluster_once.start()
    return spare_cluster_once


def test_stop_start_keeps_data_and_address(spare_cluster):
    create_topic(spare_cluster.bootstrap, "durable", partitions=3)
    produce_numbered(spare_cluster.bootstrap, "durable", 3000, partitions=3)
    address = spare_cluster.bootstrap
    spare_cluster.stop()
    assert not spare_cluster.is_running()
    spare_cluster.start()
    assert spare_cluster.bootstrap == address
    assert len(read_all(spare_cluster.bootstrap, "durable")) == 3000


def test_sigkill_keeps_acknowledged_data(spare_cluster):
    create_topic(spare_cluster.bootstrap, "crashy", partitions=6)
    produce_numbered(spare_cluster.bootstrap, "crashy", 5000)  # acks=all: every record acknowledged
    spare_cluster.kill()
    spare_cluster.start()
    keys = sorted(int(m.key()[1:]) for m in read_all(spare_cluster.bootstrap, "crashy"))
    assert keys == list(range(5000))


def test_port_taken_fails_with_one_clear_line(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(LauncherError) as info:
            LocalCluster("blocked", tmp_path, port=port).start()
    message = str(info.value)
    assert "\n" not in message
    assert f"port 127.0.0.1:{port} is already in use" in message


def test_missing_java_fails_with_one_clear_line(tmp_path):
    env = {**os.environ, "PATH": str(BIN)}  # the venv only: no java, no mvn
    proc = subprocess.run(
        [str(BIN / "mirrorwatch-kafka"), "up", "--dir", str(tmp_path), "solo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "'java' was not found on PATH" in lines[0] and "Traceback" not in proc.stderr
