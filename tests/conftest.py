"""Test harness: two real local Kafka clusters per test session ("source" and "target").

Set MIRRORWATCH_TEST_SOURCE_BOOTSTRAP and MIRRORWATCH_TEST_TARGET_BOOTSTRAP to run against external clusters
instead (tests that stop or kill a broker are skipped then). Tests that use a cluster fixture are marked
``kafka`` automatically; ``-m "not kafka"`` runs only the fast pure tests.
"""

from __future__ import annotations

import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from mirrorwatch.localkafka import LocalCluster, LocalClusters

KAFKA_FIXTURES = {"source", "target", "kafka_pair", "mirror_config", "sasl_pair", "mm2_connect"}
_LOG_PATHS: list[Path] = []

# The suite's JVMs (brokers and their storage format runs, the Connect worker, MirrorMaker 2, Spark drivers, the
# standalone cluster's daemons and executors: harness/spark_cluster.py) are short-lived, small-load ones,
# started ~40 times a run on 2 cores: C2's compilations cost them more CPU than its faster code gives back.
# C1 alone (same Kafka, same Spark, same bytecode; only the JIT tier differs) measured: a broker's start to ready
# 8.3 → 5.2 s of CPU, a `monitor analyze` of 1,152 rows 78 → 48 s. Set here, at import, so that every process a
# test starts inherits it; an outer setting wins (MIRRORWATCH_JVM_OPTS= runs the JVMs as shipped).
TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1"
os.environ.setdefault("MIRRORWATCH_JVM_OPTS", TEST_JVM_OPTS)  # mirrorwatch/localkafka (process.py)
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTS)  # every Spark driver (pyspark starts it by spark-submit)


@dataclass
class TestCluster:
    __test__ = False
    name: str
    bootstrap: str
    local: LocalCluster | None  # None when the test session uses external clusters

    def config(self) -> dict:
        return {"bootstrap.servers": self.bootstrap}


# Under pytest-xdist (scripts/test runs MIRRORWATCH_TEST_WORKERS workers) a module runs whole on one worker, so its
# module-scoped fixtures (a mirror, MM2, a page stack) start once; modules sharing a costly session fixture run on
# the same worker, so there is one SASL_SSL pair and one Spark JVM per run; and the longest groups start first, so
# that no worker is left with a long tail. Each worker has its own plain Kafka pair.
#
# The grouping is this file's own scheduler (pytest_xdist_make_scheduler below), not xdist's `xdist_group` mark:
# on pytest 9.2 that mark silently stops grouping (pytest-dev/pytest-xdist#1386: xdist appends the group to
# `item._nodeid`, which pytest no longer reads), and the suite then ran every costly module fixture on both workers
# with modules interleaved (MM2 started twice, the Spark tables' reference built four times: ~4 min more in CI).
SHARED_FIXTURE_GROUPS = {"sasl_pair": "sasl", "spark": "spark", "spark_cluster": "spark", "mm2_connect": "connect"}
# The controller schedules from node ids alone (it does not collect), so the modules that use a shared fixture are
# named here; collection checks this list against the fixtures each module really uses.
MODULE_GROUPS = {
    "test_analytics_cli": "spark",
    "test_analytics_history": "spark",
    "test_analytics_cluster": "spark",
    "test_analytics_incremental": "spark",
    "test_analytics_job": "spark",
    "test_analytics_reference": "spark",
    # not a user of the shared session, but it waits for a Spark run of the monitor's own: beside the Spark modules
    # on the other worker, two Spark workloads shared 2 cores and it took 294 s in CI instead of ~105 s
    "test_dashboard_live": "spark",
    "test_coordinator_calls_sasl": "sasl",
    "test_doctor": "sasl",
    "test_failover_refusals": "sasl",
    "test_mm2_connect": "connect",
    "test_mm2_connect_state": "connect",
    "test_security": "sasl",
    # the soak's own clusters, mirror, monitor and canary beside the fault suite's six nodes, MM2 and two mirrors:
    # in a fresh-clone run the soak made no progress for ten minutes while both ran (alone: 32 s); one after the other
    "test_soak": "test_faults",
}
LONGEST_FIRST = [
    # two three-node clusters, two mirrors, MM2 and three writers through seven faults (docs/reliability.md)
    "test_faults",
    "spark",
    "test_mm2",
    "connect",
    "sasl",
    "test_outages",
    # 133 s alone (207 s at load 24), its stack's start included (three services, Prometheus, Alertmanager); it
    # also hosts the checks of grafana/'s expressions against the real exporters
    "test_alerting_live",
    "test_canary_service",
    "test_localkafka",
    "test_drill",
    "test_switchover",  # ~110 s alone: one uninterrupted switchover, five stopped and resumed, one blocked
    "test_canary_check",
    "test_lag_accuracy",
    "test_monitor_service",
    "test_monitor_ha",
    "test_mirror_behaviour",
    "test_mirror_failover",
    "test_mirror_faults",
    "test_multinode",
    "test_eos_target_kill",
    "test_monitor_engine",
    "test_monitor_kafka",
    "test_bench_smoke",  # 80-110 s: a tiny run of each bench script, two of them mirroring on the session's pair
    # after the long groups: its image builds in the background from the start of scripts/test (minutes on a fresh
    # machine), and here, with shorter modules left to keep the other worker busy, it usually finds it built
    "test_image",
]


def group_of(nodeid: str) -> str:
    """The scheduling group of a test, from its node id: its module's shared-fixture group, else its module."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return MODULE_GROUPS.get(module, module)


def _fixture_groups(items) -> dict[str, str]:
    """module name -> the shared-fixture group its tests really use (modules that use none are left out)."""
    groups: dict[str, str] = {}
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        shared = [SHARED_FIXTURE_GROUPS[f] for f in getattr(item, "fixturenames", ()) if f in SHARED_FIXTURE_GROUPS]
        if shared:
            groups.setdefault(module, shared[0])
    return groups


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling with our groups as the scopes: a group is one unit of work on one worker, and the
    units go out in collection order (longest first, see below)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # keep our order (xdist would sort the groups by their number of tests)

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    used = _fixture_groups(items)
    wrong = {module: group for module, group in used.items() if MODULE_GROUPS.get(module) != group}
    if wrong:
        raise pytest.UsageError(
            "tests/conftest.py MODULE_GROUPS disagrees with the shared fixtures the modules use "
            f"(module: the group its fixtures need): {wrong}; update MODULE_GROUPS"
        )
    for item in items:
        if KAFKA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.kafka)

    def rank(item) -> int:
        group = group_of(item.nodeid)
        return LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: collection order within a group and among the rest


@pytest.fixture(scope="session")
def kafka_pair(tmp_path_factory):
    src = os.environ.get("MIRRORWATCH_TEST_SOURCE_BOOTSTRAP")
    tgt = os.environ.get("MIRRORWATCH_TEST_TARGET_BOOTSTRAP")
    if src and tgt:
        yield TestCluster("source", src, None), TestCluster("target", tgt, None)
        return
    base = tmp_path_factory.mktemp("kafka")
    clusters = LocalClusters(["source", "target"], base)
    _LOG_PATHS.extend(c.log_path for c in clusters.clusters.values())
    clusters.start()
    try:
        yield tuple(TestCluster(n, c.bootstrap, c) for n, c in clusters.clusters.items())
    finally:
        clusters.stop()


@pytest.fixture(scope="session")
def sasl_pair(tmp_path_factory):
    """Two SASL_SSL clusters (SCRAM-SHA-512 over TLS, StandardAuthorizer, ACLs), shared by the security and
    doctor tests. Users: ``admin`` (super user) and ``mirror`` (no ACL until a test grants one); the passwords
    are distinctive so that a test can look for them in every output. See tests/support/sasl.py."""
    from .support.sasl import SaslPair

    pair = SaslPair(tmp_path_factory.mktemp("kafka-sasl"))
    _LOG_PATHS.extend(c.log_path for c in pair.clusters.clusters.values())
    pair.start()
    try:
        yield pair
    finally:
        pair.stop()


@pytest.fixture(scope="session")
def source(kafka_pair) -> TestCluster:
    return kafka_pair[0]


@pytest.fixture(scope="session")
def target(kafka_pair) -> TestCluster:
    return kafka_pair[1]


@pytest.fixture
def topic_name(request) -> str:
    """A topic name unique to this test (and this run), safe to create on either cluster."""
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40].strip("-")
    return f"t-{base}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def write_config(tmp_path):
    """Write a YAML config (a dict) to a file and return its path."""

    def write(body: dict, name: str = "mirrorwatch.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(body, sort_keys=False))
        return path

    return write


@pytest.fixture
def mirror_config(source, target, write_config):
    """A config dict for the east(source) → west(target) pair; tests adjust it and write it."""
    return {
        "clusters": {"east": source.config(), "west": target.config()},
        "flows": {"east-west": {"source": "east", "target": "west"}},
    }


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and "kafka" in item.keywords and _LOG_PATHS:
        report.sections.append(("broker logs", "\n".join(str(p) for p in _LOG_PATHS)))


def pytest_report_header(config):
    return ["mirrorwatch: local Kafka broker logs are kept under pytest's basetemp (see 'broker logs' on failure)"]


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession shared by every analytics test (start-up costs seconds, so it is paid once).

    Code under test that asks for a session (``spark_session``) gets this one and does not stop it.
    """
    from mirrorwatch.monitor.analytics.session import spark_session

    session, created = spark_session("local[2]")
    yield session
    if created:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """One real Spark standalone cluster (master + worker, 2 cores, 1 GiB) for the whole session; see
    harness/spark_cluster.py. Drivers reach it with ``cluster.master_url`` and ``cluster.env()``."""
    from harness.spark_cluster import SparkCluster

    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


class _ConnectStack:
    """The Connect-mode tests' own cluster pair and Connect worker, stopped together."""

    def __init__(self, clusters, env):
        self.clusters, self.env, self.stopped = clusters, env, False

    def kill(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.env.worker.kill()
            self.clusters.stop()


@pytest.fixture(scope="session")
def mm2_connect(tmp_path_factory):
    """MirrorMaker 2's three connectors in one real Kafka Connect distributed worker on the target, named as Strimzi
    names them, shared by the Connect-mode tests (start-up costs ~30-60 s on 2 cores); see harness/connect_mm2.py.

    On a cluster pair of its own: on the worker's shared pair, other modules' mirrors and MM2s had left heartbeats in
    the source's `heartbeats` topic, which this MM2 mirrors as `src.heartbeats` (the heartbeats that crossed the
    mirror): the canary and the failover check read them 4 minutes old, and said CRITICAL and DEGRADED."""
    from harness.connect_mm2 import start_connect_mm2

    base = tmp_path_factory.mktemp("kafka-connect")
    clusters = LocalClusters(["source", "target"], base)
    _LOG_PATHS.extend(c.log_path for c in clusters.clusters.values())
    clusters.start()
    source, target = (TestCluster(n, c.bootstrap, c) for n, c in clusters.clusters.items())
    try:
        env = start_connect_mm2(source, target, tmp_path_factory.mktemp("connect"))
    except BaseException:
        clusters.stop()
        raise
    _LOG_PATHS.append(env.worker.out_path)
    stack = _SESSION_PROCESSES["mm2_connect"] = _ConnectStack(clusters, env)
    try:
        yield env
    finally:
        stack.kill()


# A session fixture's process that only one scheduling group uses is stopped when that group's last test is done
# (the group runs whole on one worker): left running, the Connect worker's MM2 kept refreshing, checkpointing
# and beating against clusters that later tests stop and freeze, for the rest of the session.
_SESSION_PROCESSES: dict[str, object] = {}


def pytest_runtest_teardown(item, nextitem):
    for fixture, proc in list(_SESSION_PROCESSES.items()):
        used_next = nextitem is not None and fixture in getattr(nextitem, "fixturenames", ())
        if fixture in getattr(item, "fixturenames", ()) and not used_next:
            proc.kill()
            del _SESSION_PROCESSES[fixture]
