"""mirrorwatch watching MirrorMaker 2 as most people run it: its three connectors in a real Kafka Connect distributed
worker (connect-runtime 4.3.1), submitted over REST under Strimzi's names, with MM2 aliases (src, dst) that differ
from mirrorwatch's cluster names (east, west) and Connect's topics named as Strimzi names them.

The same figures and bounds as dedicated mode (tests/test_mm2.py, through tests/support/mm2_checks.py), plus what
only a Connect cluster has: its own connector names and topics, and MM2's group discovery read from its config topic.
"""

from __future__ import annotations

import json
import time

import yaml

from harness.connect_mm2 import CHECKPOINT_CONNECTOR, CONNECT_GROUP, REFRESH_GROUPS_S, SOURCE_ALIAS, SOURCE_CONNECTOR
from harness.helpers import admin, end_offsets, produce_numbered
from harness.mirror_harness import wait_until
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.monitor.sampler import Sampler

from .support.canary_checks import run_check
from .support.mirror_cli import run_cli
from .support.mirror_flows import consume_and_commit
from .support.mm2_checks import check_steady_traffic, connect_offsets, write_config_and_lag


def _positions(env):
    return connect_offsets(env.target.bootstrap, f"{CONNECT_GROUP}-offsets", SOURCE_CONNECTOR, SOURCE_ALIAS)


def _write(env, tmp_path, body=None):
    path = tmp_path / "mirrorwatch.yaml"
    path.write_text(yaml.safe_dump(body or env.config_dict))
    return path


def test_mm2_in_connect_writes_where_strimzi_names_say(mm2_connect):
    env = mm2_connect
    west = set(admin(env.target.bootstrap).list_topics(timeout=10).topics)
    east = set(admin(env.source.bootstrap).list_topics(timeout=10).topics)
    assert {f"{CONNECT_GROUP}-offsets", f"{CONNECT_GROUP}-configs", f"{CONNECT_GROUP}-status"} <= west
    assert {"src.checkpoints.internal", env.target_topic(env.fo_topic)} <= west
    assert "mm2-offset-syncs.dst.internal" in east  # named by MM2's target alias, on the source


def test_committed_true_lag_and_rpo_under_steady_traffic(mm2_connect):
    """Committed lag from the Connect cluster's offsets topic under the connector's own name (it was missing for
    every partition before: only a connector called MirrorSourceConnector was read), true lag and RPO within the
    same bounds as in dedicated mode."""
    env = mm2_connect
    sampler = Sampler(config_from_dict(env.config_dict), timeout_s=5)
    try:
        errors = check_steady_traffic(
            sampler,
            "ew",
            env.source.bootstrap,
            env.target.bootstrap,
            env.lag_topic,
            env.target_topic(env.lag_topic),
            lambda: _positions(env),
        )
    finally:
        sampler.close()
    print(f"Connect mode: true lag above its lower bound by at most {errors[0]} records, RPO by {errors[1]:.0f} ms")


def _assigned(env) -> set[str]:
    """The groups MM2's checkpoint tasks have, asked of the Connect REST API (independent of the code under test)."""
    out: set[str] = set()
    for task in env.worker.tasks(CHECKPOINT_CONNECTOR):
        out |= {g for g in task["config"].get("task.assigned.groups", "").split(",") if g}
    return out


def _coverage(env):
    sampler = Sampler(config_from_dict(env.config_dict), timeout_s=5)
    try:
        watch = sampler.coverage["ew"]
        wait_until(lambda: all(t.caught_up.is_set() for t in watch.trackers), 30, 0.3, "the monitor's checkpoints")
        return next(v for v in sampler.sample().flow_views() if v.flow == "ew").coverage
    finally:
        sampler.close()


def _failover_check(path, group):
    out = run_cli("failover", "check", "--config", str(path), "--group", group, "--json", "--timeout", "60", timeout=90)
    assert out.stdout, out.stderr
    answer = json.loads(out.stdout)
    assert "groups" in answer, (answer, out.stderr[-2000:])
    return answer


def test_a_new_group_is_not_yet_discovered_until_mm2_refreshes(mm2_connect, tmp_path):
    """MM2 finds new groups only every refresh.groups.interval.seconds (60 s here: harness/connect_mm2.py; 10 min by
    default). A group that committed after MM2's last refresh is "not yet discovered by MM2 (next refresh within N
    s)" in the monitor's coverage and in the failover check, not a broken checkpoint; after MM2's next refresh it is
    translated."""
    env, path = mm2_connect, _write(mm2_connect, tmp_path)
    produce_numbered(env.source.bootstrap, env.fo_topic, 40, partitions=2, start=100)
    ends = end_offsets(env.source.bootstrap, env.fo_topic)
    wait_until(lambda: end_offsets(env.target.bootstrap, env.target_topic(env.fo_topic)) == ends, 90, 0.5, "caught up")
    # a refresh of MM2's is seen when it finds a first group: the next one is REFRESH_GROUPS_S later
    first, late = f"{env.groups_prefix}first", f"{env.groups_prefix}late"
    consume_and_commit(env.source.bootstrap, env.fo_topic, first, 0, 10)
    wait_until(lambda: first in _assigned(env), REFRESH_GROUPS_S * 3, 0.3, "MM2 finding the first group")
    found_at = time.monotonic()
    for p, end in ends.items():
        consume_and_commit(env.source.bootstrap, env.fo_topic, late, p, end)
    coverage = _coverage(env)
    (pending,) = [u for u in coverage["untranslated"] if u["group"] == late]
    assert pending["reason"].startswith("not yet discovered by MM2 (next refresh within "), pending
    (g,) = _failover_check(path, late)["groups"]
    assert g["verdict"] == "NOT READY", g
    assert any("not yet discovered by MM2 (next refresh within" in r for r in g["reasons"]), g
    assert late not in _assigned(env), "MM2 refreshed during the checks: they did not see the window they test"
    assert time.monotonic() - found_at < REFRESH_GROUPS_S
    # MM2's next refresh finds it, its checkpoint task checkpoints it, and both say it is translated
    wait_until(lambda: late in _assigned(env), REFRESH_GROUPS_S * 3, 0.5, "MM2 finding the late group")
    wait_until(
        lambda: _failover_check(path, late)["groups"][0]["verdict"] == "READY", 60, 1, "the late group checkpointed"
    )
    assert late not in {u["group"] for u in _coverage(env)["untranslated"]}


def test_canary_check_on_the_connect_mode_flow(mm2_connect, tmp_path):
    env = mm2_connect
    body = json.loads(json.dumps(env.config_dict))
    body["flows"]["ew"]["topics"].append(env.canary_topic)
    path = _write(env, tmp_path, body)
    deadline = time.monotonic() + 90
    while True:  # MM2 finds the canary topic on its next topic refresh (1 s here)
        run = run_check(path, timeout_s=30)
        if run.rc == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert run.rc == 0, run.stdout + run.stderr
    assert run.body["status"] == "OK"


def _strimzi_resource(env) -> str:
    """The fixture's MM2 as a Strimzi user would have written it (v1beta2): the connectors Strimzi would create are
    the ones the fixture submitted, under the same names, in a Connect cluster with Strimzi's default topics."""
    return f"""\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: mm2-{env.run}
spec:
  version: 4.3.1
  replicas: 1
  connectCluster: dst
  clusters:
  - alias: src
    bootstrapServers: {env.source.bootstrap}
  - alias: dst
    bootstrapServers: {env.target.bootstrap}
    config:
      offset.flush.interval.ms: 1000
  mirrors:
  - sourceCluster: src
    targetCluster: dst
    sourceConnector:
      tasksMax: 1
      config:
        refresh.topics.interval.seconds: 1
        sync.topic.configs.enabled: "false"
    checkpointConnector:
      config:
        emit.checkpoints.interval.seconds: 1
        refresh.groups.interval.seconds: {REFRESH_GROUPS_S}
    heartbeatConnector: {{}}
    topicsPattern: "cm-{env.run}-(lag|fo)"
    groupsPattern: "{env.groups_prefix}.*"
"""


def test_monitor_lag_with_a_config_written_from_the_strimzi_resource(mm2_connect, tmp_path):
    """`mirrorwatch config from-strimzi` on the resource that describes this MM2 writes a config that `monitor lag`
    runs with as it is: every partition has MM2's committed position, true lag and RPO, and coverage is known."""
    env = mm2_connect
    resource = tmp_path / "kmm2.yaml"
    resource.write_text(_strimzi_resource(env))
    out = tmp_path / "from-strimzi.yaml"
    produce_numbered(env.source.bootstrap, env.lag_topic, 30, partitions=3)
    ends = end_offsets(env.source.bootstrap, env.lag_topic)
    wait_until(
        lambda: all(_positions(env).get((env.lag_topic, p)) == e for p, e in ends.items()), 60, 0.5, "MM2 committed"
    )
    body = write_config_and_lag("from-strimzi", resource, out)
    flow = yaml.safe_load(out.read_text())["flows"]["src-dst"]
    assert flow["mirror"]["connector"] == SOURCE_CONNECTOR
    assert flow["mirror"]["connect_offsets_topic"] == f"{CONNECT_GROUP}-offsets"
    assert body["mirror"] == "mm2" and body["source"] == "src" and body["target"] == "dst"
    rows = [r for r in body["partitions"] if r["topic"] == env.lag_topic]
    assert len(rows) == 3
    # the one-shot command reads the checkpoints and MM2's group discovery before it samples (it did not wait for
    # them, and said "no checkpoint" for a translated group); the discovery test's two groups are translated now
    assert body["coverage"]["groups"] >= 2 and body["coverage"]["untranslated"] == [], body["coverage"]
    for r in rows:  # the committed column was '-' for every partition of a Connect-mode MM2 before
        assert r["committed"] is not None and r["committed"] >= ends[r["partition"]], r
        assert r["committed_lag"] is not None and r["true_lag"] is not None and r["time_lag_s"] is not None, r
