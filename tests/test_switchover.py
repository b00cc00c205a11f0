"""`mirror failover switchover` on the real clusters with the real mirror: the gated steps end to end, a
switchover stopped after each step and resumed ends where an uninterrupted one does, and a group active on the
target blocks it in one line until it is stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer

from harness.helpers import create_topic, produce_numbered
from harness.mirror_harness import MirrorProcess, wait_until

from .error_cases import FAILOVER_REFUSALS, message_pattern
from .support.mirror_cli import run_cli
from .support.mirror_flows import committed_offsets, config_for, consume_and_commit, count_on

pytestmark = pytest.mark.kafka
COMMITS = {0: 123, 1: 200}  # every group's source commits (of 200 records per partition)
STEPS = ["healthy", "quiet", "caught_up", "applied", "verified"]


@pytest.fixture(scope="module")
def flow(kafka_pair, tmp_path_factory):
    source, target = kafka_pair
    folder = tmp_path_factory.mktemp("switchover")
    topic = f"t-switch-{folder.name[-6:]}"
    create_topic(source.bootstrap, topic, 2)
    produce_numbered(source.bootstrap, topic, 400, partitions=2)
    groups = [f"app{i}-{topic}" for i in range(len(STEPS) + 2)]
    for group in groups:
        for partition, offset in COMMITS.items():
            consume_and_commit(source.bootstrap, topic, group, partition, offset)
    base = {"clusters": {"east": source.config(), "west": target.config()}}
    cfg = config_for({**base, "flows": {"east-west": {"source": "east", "target": "west"}}}, topic, f"g-{topic}")
    path = folder / "m.yaml"
    with MirrorProcess(cfg, path) as mirror:
        wait_until(lambda: count_on(target.bootstrap, f"east.{topic}") == 400, 60, what="mirroring", alive=mirror)
        yield source, target, topic, path, folder, groups


def switch(path: Path, folder: Path, group: str, *extra: str):
    args = ["failover", "switchover", "--config", str(path), "--group", group, "--quiet-s", "2", "--wait-s", "60"]
    args += ["--state", str(folder / f"{group}.state.json"), "--reverse-config", str(folder / f"{group}.reverse.yaml")]
    return run_cli(*args, *extra, timeout=240)


def moved(result) -> dict:
    report = json.loads(result.stdout)
    return {(r["target_topic"], r["partition"]): r["target_offset"] for g in report["groups"] for r in g["partitions"]}


@pytest.fixture(scope="module")
def uninterrupted(flow):
    source, target, topic, path, folder, groups = flow
    result = switch(path, folder, groups[0], "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), moved(result)


def applied_on_target(target, group, topic) -> dict:
    return {(f"east.{topic}", p): o for p, o in committed_offsets(target.bootstrap, group, f"east.{topic}", 2).items()}


def test_an_uninterrupted_switchover(flow, uninterrupted):
    source, target, topic, path, folder, groups = flow
    report, offsets = uninterrupted
    assert report["switched"] and report["steps_done"] == [*STEPS, "reported"]
    assert [p["true_lag"] for p in report["partitions"]] == [0, 0]
    # one-to-one under the prefix policy: the translation never passes the commit, and says by how much it trails
    rows = {r["partition"]: r for r in report["groups"][0]["partitions"]}
    for partition, commit in COMMITS.items():
        assert rows[partition]["target_offset"] + rows[partition]["redelivered_at_most"] == commit
    assert rows[1]["redelivered_at_most"] == 0  # a commit at the synced end translates exactly
    assert applied_on_target(target, groups[0], topic) == offsets
    reverse = yaml.safe_load(Path(report["reverse_config"]).read_text())
    assert reverse["flows"] == {"west-east": {"source": "west", "target": "east", "topics": [topic]}}


@pytest.mark.parametrize("step", STEPS)
def test_stopped_after_a_step_and_resumed_ends_the_same(flow, uninterrupted, step):
    source, target, topic, path, folder, groups = flow
    group = groups[1 + STEPS.index(step)]
    stopped = switch(path, folder, group, "--stop-after", step, "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["steps_done"][-1] == step and not json.loads(stopped.stdout)["switched"]
    again = switch(path, folder, group, "--json")  # without --resume: refused, the state is kept
    assert again.returncode == 2 and "add --resume" in again.stderr
    resumed = switch(path, folder, group, "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["switched"]
    assert moved(resumed) == uninterrupted[1] and applied_on_target(target, group, topic) == uninterrupted[1]


def test_a_group_active_on_the_target_blocks_until_stopped(flow, uninterrupted):
    source, target, topic, path, folder, groups = flow
    group = groups[-1]
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.subscribe([f"east.{topic}"])
    try:
        wait_until(lambda: consumer.poll(0.5) is not None or consumer.assignment(), 30, what="active group")
        blocked = switch(path, folder, group)
    finally:
        consumer.close()
    said = [line for line in blocked.stderr.splitlines() if line.strip() and not line.startswith("%")]
    assert blocked.returncode == 1 and len(said) == 1, blocked.stderr
    case = FAILOVER_REFUSALS["switchover-active"]
    assert message_pattern(case["message"].replace("'g'", f"'{group}'")).fullmatch(said[0]), said
    resumed = switch(path, folder, group, "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert applied_on_target(target, group, topic) == uninterrupted[1]
