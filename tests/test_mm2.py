"""mirrorwatch watching the real Apache MirrorMaker 2 (connect-mirror 4.3.1, dedicated mode) on the real clusters.

One MM2 process for the module (start-up costs ~30-80 s on 2 cores), configured for fast tests: topics and groups
refreshed every second, checkpoints emitted every second, Connect offsets flushed every second, one task.
MM2's aliases are the config's (east, west), so every MM2 topic name below is MM2's own default.
"""

from __future__ import annotations

import base64
import json
import time

import pytest
import yaml
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition

from harness.helpers import admin, create_topic, end_offsets, produce_numbered, read_all
from harness.mirror_harness import wait_until
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.localkafka.mm2 import LocalMirrorMaker2, mm2_properties
from mirrorwatch.localkafka.process import free_port
from mirrorwatch.monitor.sampler import Sampler

from .support.canary_checks import run_check
from .support.mirror_cli import run_cli
from .support.mirror_flows import consume_and_commit
from .support.mm2_checks import check_steady_traffic, check_transactional_traffic, connect_offsets, write_config_and_lag
from .support.mm2_settings import EOS_TOPIC, FAST, RUN

LAG_TOPIC, FO_TOPIC, CANARY_TOPIC = f"mm2t-{RUN}-lag", f"mm2t-{RUN}-fo", f"mm2t-{RUN}-canary"


class Env:
    def __init__(self, source, target, mm2, config_path, config_dict):
        self.source, self.target, self.mm2 = source, target, mm2
        self.config_path, self.config_dict = config_path, config_dict

    def config(self):
        return config_from_dict(self.config_dict)


@pytest.fixture(scope="module")
def mm2_env(source, target, tmp_path_factory):
    for topic, partitions in ((FO_TOPIC, 2), (CANARY_TOPIC, 3)):
        create_topic(source.bootstrap, topic, partitions)
    # LogAppendTime: record timestamps are arrival times on the source, so RPO's ground truth needs no producer clock
    create_topic(source.bootstrap, LAG_TOPIC, 3, {"message.timestamp.type": "LogAppendTime"})
    create_topic(target.bootstrap, EOS_TOPIC, 3)
    workdir = tmp_path_factory.mktemp("mm2")
    props = mm2_properties(
        {"east": source.bootstrap, "west": target.bootstrap},
        "east",
        "west",
        f"mm2t-{RUN}-.*",
        **FAST,
        listeners=f"http://127.0.0.1:{free_port()}",
    )
    mm2 = LocalMirrorMaker2(workdir, props).start()
    body = {
        "clusters": {"east": source.config(), "west": target.config()},
        "flows": {
            "ew": {
                "source": "east",
                "target": "west",
                "topics": [f"mm2t-{RUN}-(lag|fo)"],
                "checkpoint_groups": [f"mm2g-{RUN}-.*"],
                "mirror": {"kind": "mm2", "offset_flush_interval_s": 1, "emit_checkpoints_interval_s": 1},
            }
        },
        "canary": {
            "topic": CANARY_TOPIC,
            "metrics_port": None,
            "heartbeat_max_age_s": 10,
            "crit_latency_s": 10,
            "warn_latency_s": 5,
        },
        "monitor": {"interval_s": 1, "history": False, "http_port": None, "metrics_port": None},
    }
    path = workdir / "mirrorwatch.yaml"
    path.write_text(yaml.safe_dump(body))
    try:
        # MM2 is up when it has mirrored a first record of each topic
        produce_numbered(source.bootstrap, FO_TOPIC, 2, partitions=2)
        wait_until(
            lambda: (
                _exists(target.bootstrap, f"east.{FO_TOPIC}")
                and sum(end_offsets(target.bootstrap, f"east.{FO_TOPIC}").values()) >= 2
            ),
            240,
            1,
            "MM2 mirroring a first record",
            alive=mm2,
        )
        yield Env(source, target, mm2, path, body)
    finally:
        mm2.kill()


def _exists(bootstrap, topic):
    return topic in admin(bootstrap).list_topics(timeout=5).topics


def _connect_offsets(bootstrap) -> dict[tuple[str, int], int]:
    return connect_offsets(bootstrap, "mm2-offsets.east.internal", "MirrorSourceConnector", "east")


def test_mm2_creates_its_topics_where_the_defaults_say(mm2_env):
    on_east = {"mm2-offset-syncs.west.internal", "heartbeats"}  # offset syncs on the SOURCE by default
    on_west = {
        "east.checkpoints.internal",
        "mm2-offsets.east.internal",
        "mm2-configs.east.internal",  # where MM2's group discovery is read (core.mm2.default_connect_configs_topic)
        "heartbeats",
        "east.heartbeats",  # once the reverse pair's first heartbeat on east is there and a topic refresh found it
        f"east.{FO_TOPIC}",
    }

    def missing():
        east = set(admin(mm2_env.source.bootstrap).list_topics(timeout=10).topics)
        west = set(admin(mm2_env.target.bootstrap).list_topics(timeout=10).topics)
        return (on_east - east) | (on_west - west)

    # on a fresh pair the first test can run before MM2 has made the topics its heartbeat connectors start
    wait_until(lambda: not missing(), 60, 1, "MM2's topics")
    assert not missing()


def test_true_lag_rpo_and_committed_lag_under_steady_traffic(mm2_env):
    env = mm2_env
    sampler = Sampler(env.config(), timeout_s=5)
    try:
        errors = check_steady_traffic(
            sampler,
            "ew",
            env.source.bootstrap,
            env.target.bootstrap,
            LAG_TOPIC,
            f"east.{LAG_TOPIC}",
            lambda: _connect_offsets(env.target.bootstrap),
        )
    finally:
        sampler.close()
    print(
        f"true-lag above the lower truth bound: max {errors[0]} records; RPO above its lower bound: max {errors[1]:.0f} ms"
    )


def _commit(bootstrap, group, offsets: dict[int, int]):
    for p, o in offsets.items():
        consume_and_commit(bootstrap, FO_TOPIC, group, p, o)


def _resume_and_count(env, group, cps: dict[int, int], committed: dict[int, int]) -> int:
    """A real translate-and-resume: apply MM2's checkpoints for the group on the target, resume a consumer there and
    count the records it reads again (source offset below the group's commit; value v{i} is record i, partition
    i % 2, source offset i // 2)."""
    target_topic = f"east.{FO_TOPIC}"
    a = admin(env.target.bootstrap)
    a.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(target_topic, p, o) for p, o in cps.items()])]
    )[group].result(30)
    consumer = Consumer(
        {
            "bootstrap.servers": env.target.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([target_topic])
    ends = end_offsets(env.target.bootstrap, target_topic)
    again, reached, deadline = 0, {p for p in committed if cps[p] >= ends[p]}, time.monotonic() + 30
    while len(reached) < len(committed) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        source_offset = int(msg.value().decode()[1:].rstrip(".")) // 2
        if source_offset < committed[msg.partition()]:
            again += 1
        else:
            reached.add(msg.partition())
    consumer.close()
    assert len(reached) == len(committed)
    return again


def _mm2_checkpoints(env, group) -> dict[int, tuple[int, int]]:
    from mirrorwatch.mirror.mm2_records import read_mm2_state

    state = read_mm2_state(env.config(), env.config().flows["ew"])
    return {
        p: (cp.upstream_offset, cp.downstream_offset)
        for (t, p), cp in state.checkpoints.get(group, {}).items()
        if t == FO_TOPIC
    }


def test_failover_check_predicts_the_redelivery_of_a_real_resume(mm2_env):
    env = mm2_env
    produce_numbered(env.source.bootstrap, FO_TOPIC, 2000, partitions=2, start=2)  # v2.. (v0, v1 came first)
    ends = end_offsets(env.source.bootstrap, FO_TOPIC)
    wait_until(lambda: end_offsets(env.target.bootstrap, f"east.{FO_TOPIC}") == ends, 90, 0.5, "MM2 caught up")
    groups = {f"mm2g-{RUN}-a": {0: 300, 1: 650}, f"mm2g-{RUN}-b": {0: 5, 1: 777}, f"mm2g-{RUN}-end": dict(ends)}
    for group, offsets in groups.items():
        _commit(env.source.bootstrap, group, offsets)
    for group, offsets in groups.items():
        wait_until(
            lambda: {p: u for p, (u, _) in _mm2_checkpoints(env, group).items()} == offsets,
            60,
            1,
            f"MM2 checkpoints of {group}",
        )
    result = run_cli("failover", "check", "--config", str(env.config_path), "--json", "--timeout", "60", timeout=120)
    assert result.returncode in (0, 1, 2) and result.stdout, result.stderr
    report = json.loads(result.stdout)
    assert report["mirror"] == "mm2"
    by_group = {g["group"]: g for g in report["groups"]}
    approximate = set()
    for group, offsets in groups.items():
        cps = {p: d for p, (_, d) in _mm2_checkpoints(env, group).items()}
        measured = _resume_and_count(env, group, cps, offsets)
        print(
            f"{group}: commits {offsets}, MM2 checkpoints {cps}, re-delivered {measured}, predicted {by_group[group]['duplicates']}"
        )
        assert by_group[group]["duplicates"] == measured, (group, by_group[group], measured, cps)
        assert by_group[group]["verdict"] == "READY", by_group[group]
        if any(cps[p] != offsets[p] for p in offsets):  # aligned offsets: an exact translation is the commit itself
            approximate.add(group)
            assert any("older offset sync" in r for r in by_group[group]["reasons"]), by_group[group]
    coverage = report["coverage"]
    assert (coverage["groups"], coverage["translated"], coverage["untranslated"]) == (3, 3, [])
    sampler = Sampler(env.config(), timeout_s=5)  # the monitor's figures: coverage and checkpoint age per group
    try:
        wait_until(
            lambda: sampler.coverage["ew"].tracker.caught_up.is_set(), 30, 0.5, "the monitor read the checkpoints"
        )
        monitored = next(v for v in sampler.sample().flow_views() if v.flow == "ew").coverage
        assert (monitored["groups"], monitored["translated"], monitored["untranslated"]) == (3, 3, [])
        assert set(monitored["checkpoint_age_s"]) == set(groups)
    finally:
        sampler.close()
    assert {a["group"] for a in coverage["approximate"]} == approximate
    assert f"mm2g-{RUN}-end" not in approximate  # MM2 syncs the last record it mirrors at each offset flush


def test_commit_beyond_the_last_sync_is_reported(mm2_env):
    """A real group commits past MM2's newest offset sync: MM2 is frozen (SIGSTOP), so it has neither mirrored nor
    synced the records the group read. The failover check and the monitor's coverage say the group is translated
    only approximately, and why; once MM2 runs again, it syncs and checkpoints the commit and both say it is exact.
    """
    import os
    import signal

    from mirrorwatch.mirror.mm2_records import read_mm2_state

    env, group = mm2_env, f"mm2g-{RUN}-beyond"
    produce_numbered(env.source.bootstrap, FO_TOPIC, 40, partitions=2, start=5000)
    ends = end_offsets(env.source.bootstrap, FO_TOPIC)
    wait_until(lambda: end_offsets(env.target.bootstrap, f"east.{FO_TOPIC}") == ends, 90, 0.5, "MM2 caught up")
    _commit(env.source.bootstrap, group, dict(ends))  # at the end MM2 has mirrored: checkpointed exactly
    wait_until(lambda: {p: u for p, (u, _) in _mm2_checkpoints(env, group).items()} == ends, 60, 1, "a checkpoint")

    def report():
        out = run_cli(
            "failover",
            "check",
            "--config",
            str(env.config_path),
            "--group",
            group,
            "--json",
            "--timeout",
            "60",
            timeout=90,
        )
        assert out.stdout, out.stderr
        answer = json.loads(out.stdout)
        assert "groups" in answer, (answer, out.stderr[-2000:])  # an error object: say which
        return answer

    def monitored():
        sampler = Sampler(env.config(), timeout_s=5)
        try:
            wait_until(lambda: sampler.coverage["ew"].tracker.caught_up.is_set(), 30, 0.5, "the monitor's checkpoints")
            return next(v for v in sampler.sample().flow_views() if v.flow == "ew").coverage
        finally:
            sampler.close()

    os.kill(env.mm2.proc.pid, signal.SIGSTOP)
    try:
        last = read_mm2_state(env.config(), env.config().flows["ew"]).latest_sync[(FO_TOPIC, 0)][0]
        produce_numbered(env.source.bootstrap, FO_TOPIC, 60, partitions=2, start=6000)
        beyond = end_offsets(env.source.bootstrap, FO_TOPIC)
        _commit(env.source.bootstrap, group, dict(beyond))  # read and committed what MM2 has not mirrored yet
        assert beyond[0] > last + 1
        frozen = report()
        (g,) = frozen["groups"]
        why = f"commit {beyond[0]} is beyond MM2's last offset sync ({last}): translated approximately"
        assert any(why in r for r in g["reasons"]), g
        coverage = monitored()
        (untranslated,) = [u for u in coverage["untranslated"] if u["group"] == group]
        assert f"commit {beyond[0]} on {FO_TOPIC}[0] is beyond the last offset sync ({last})" in untranslated["reason"]
    finally:
        os.kill(env.mm2.proc.pid, signal.SIGCONT)  # the rest of the module shares this MM2
    wait_until(
        lambda: {p: u for p, (u, _) in _mm2_checkpoints(env, group).items()} == beyond,
        90,
        1,
        "MM2 checkpointing the commit after it resumed",
        alive=env.mm2,
    )
    (g,) = report()["groups"]
    assert not any("beyond" in r for r in g["reasons"]), g  # MM2 synced the records it mirrored at its flush
    assert g["verdict"] == "READY", g
    assert group not in {u["group"] for u in monitored()["untranslated"]}


def test_failback_tail_bounds_an_mm2_flows_tail(mm2_env, tmp_path):
    """MirrorMaker 2 killed, records written on: `mirror failback tail`'s lower and upper bounds hold the number
    of source records the target never received (an independent reader's count, by value), and the export (the
    upper bound) holds every one of them (issue 35: MM2's sparse syncs make the tail a range)."""
    env = mm2_env
    produce_numbered(env.source.bootstrap, FO_TOPIC, 200, partitions=2, start=500_000)
    ends = end_offsets(env.source.bootstrap, FO_TOPIC)
    wait_until(
        lambda: all(_connect_offsets(env.target.bootstrap).get((FO_TOPIC, p)) == e for p, e in ends.items()),
        60,
        0.5,
        "MM2 committed every record of the topic",
    )
    env.mm2.kill()
    try:
        produce_numbered(env.source.bootstrap, FO_TOPIC, 300, partitions=2, start=600_000)
        out = tmp_path / "tail.jsonl"
        result = run_cli("failback", "tail", "--config", str(env.config_path), "--out", str(out), "--json", timeout=180)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        on_source = {m.value() for m in read_all(env.source.bootstrap, FO_TOPIC)}
        on_target = {m.value() for m in read_all(env.target.bootstrap, f"east.{FO_TOPIC}")}
        missing = on_source - on_target
        assert {f"v{i}".encode() for i in range(600_000, 600_300)} <= missing
        rows = [r for r in report["partitions"] if r["topic"] == FO_TOPIC]
        lower, upper = sum(r["records_lower_bound"] for r in rows), sum(r["records"] for r in rows)
        assert lower <= len(missing) <= upper, (lower, len(missing), upper)
        exported = {
            base64.b64decode(row["value"])
            for row in map(json.loads, out.read_text().splitlines())
            if row["topic"] == FO_TOPIC
        }
        assert missing <= exported and len(exported) == upper
    finally:
        env.mm2.start()
    wait_until(
        lambda: (
            sum(end_offsets(env.target.bootstrap, f"east.{FO_TOPIC}").values())
            >= sum(end_offsets(env.source.bootstrap, FO_TOPIC).values())
        ),
        240,
        1,
        "MM2 mirroring again after its restart",
        alive=env.mm2,
    )


def test_sigkill_mm2_then_restart(mm2_env, tmp_path):
    """MM2 killed under traffic: the evaluator goes to ERR (partitions STOP), heartbeats go stale, the canary goes
    CRITICAL, and the shipped alerts fire on a real Prometheus scraping the real `monitor run` and `canary run`
    (every ``for:`` 5 s, thresholds lowered as the live grafana tests once did). Restarted: all recover."""
    from harness.prometheus_server import free_port, prometheus_server, write_rules_copy
    from harness.services import Service

    from .support.real_stack import BIN, Traffic

    env = mm2_env
    # MM2 has a committed position for every partition of the flow before it dies
    produce_numbered(env.source.bootstrap, LAG_TOPIC, 30, partitions=3)
    ends = end_offsets(env.source.bootstrap, LAG_TOPIC)
    wait_until(
        lambda: all(_connect_offsets(env.target.bootstrap).get((LAG_TOPIC, p)) == e for p, e in ends.items()),
        60,
        0.5,
        "MM2 committed the first records",
    )
    ports = {"monitor": free_port(), "canary": free_port()}
    body = json.loads(json.dumps(env.config_dict))
    body["monitor"].update({"metrics_port": ports["monitor"], "window": 5})
    body["canary"].update({"metrics_port": ports["canary"], "interval_s": 1})
    path = tmp_path / "services.yaml"
    path.write_text(yaml.safe_dump(body))
    rules = write_rules_copy(
        tmp_path / "rules.yml", "5s", {"MirrorwatchTrueLagHigh": 100, "MirrorwatchHeartbeatStale": 5}
    )
    services = [Service(n, [str(BIN / n), "run", "--config", str(path)], tmp_path) for n in ports]
    traffic = Traffic(env.source.bootstrap, LAG_TOPIC).start()
    alerts = {
        "MirrorwatchEvaluatorError",
        "MirrorwatchCanaryCritical",
        "MirrorwatchTrueLagHigh",
        "MirrorwatchHeartbeatStale",
    }
    try:
        with prometheus_server(
            {f"mirrorwatch-{n}": [f"127.0.0.1:{p}"] for n, p in ports.items()}, [rules], workdir=tmp_path / "prometheus"
        ) as prom:

            def flow_value(expr):
                return {r["metric"].get("flow"): float(r["value"][1]) for r in prom.query(expr)}.get("ew")

            def firing():
                assert all(s.alive() for s in services), [s.log_tail() for s in services]
                return {a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"}

            def healthy():
                return (
                    flow_value("flow_group:mirrorwatch_group_status:max") == 0
                    and flow_value("mirrorwatch_canary_status") == 0
                    and flow_value('mirrorwatch_flow_info{mirror="mm2"}') == 1
                    and not alerts & firing()
                )

            prom.wait_for(healthy, 180, "the MM2 flow healthy in Prometheus")
            assert run_check(path, timeout_s=30).rc == 0
            env.mm2.kill()
            prom.wait_for(lambda: alerts <= firing(), 180, f"{sorted(alerts)} firing after MM2 was killed")
            # every page says which mirror it is about (joined from the monitor's mirrorwatch_flow_info)
            pages = [
                a["labels"] for a in prom.alerts() if a["state"] == "firing" and a["labels"]["alertname"] in alerts
            ]
            assert {p.get("mirror") for p in pages} == {"mm2"}, pages
            assert flow_value("flow_group:mirrorwatch_group_status:max") == 2  # ERR: the partitions are STOP
            assert flow_value("mirrorwatch_heartbeat_age_seconds") > 5
            dead = run_check(path, timeout_s=5)
            assert dead.rc == 2 and dead.body["status"] == "CRITICAL", dead.stdout
            env.mm2.start()
            prom.wait_for(lambda: env.mm2.is_running() and healthy(), 300, "the MM2 flow recovered after a restart")
            # MM2's first heartbeats after the restart have to cross the mirror and reach a scrape
            prom.wait_for(
                lambda: (age := flow_value("mirrorwatch_heartbeat_age_seconds")) is not None and age < 5,
                60,
                "fresh MM2 heartbeats",
            )
            assert run_check(path, timeout_s=30).rc == 0
    finally:
        traffic.stop()
        for service in services:
            service.stop()


def test_monitor_lag_with_a_config_written_from_mm2_properties(mm2_env, tmp_path):
    """`mirrorwatch config from-mm2` on this MM2's own mm2.properties writes a config that watches it with no hand
    edits: `monitor lag` has MM2's committed position, true lag and RPO on every partition."""
    env = mm2_env
    out = tmp_path / "from-mm2.yaml"
    body = write_config_and_lag("from-mm2", env.mm2.dir / "mm2.properties", out, source="east")
    assert body["mirror"] == "mm2" and (body["source"], body["target"]) == ("east", "west")
    # the reverse pair runs with exactly-once source support (east.exactly.once.source.support): said, the other not
    imported = config_from_dict(yaml.safe_load(out.read_text()))
    assert [imported.flows[f].mirror.exactly_once for f in ("east-west", "west-east")] == [False, True]
    rows = [r for r in body["partitions"] if r["topic"] in (LAG_TOPIC, FO_TOPIC)]
    assert {(r["topic"], r["partition"]) for r in rows} >= {(FO_TOPIC, 0), (FO_TOPIC, 1)}
    for r in rows:
        if r["source_end"] > 0:  # MM2 keeps no position for a partition it never had a record of
            assert None not in (r["committed"], r["committed_lag"], r["true_lag"], r["time_lag_s"]), r


def test_exactly_once_mm2_true_lag_never_below_a_read_committed_count(mm2_env):
    """MM2 with exactly-once source support (the module's MM2, its west->east pair): the monitor, told so
    (``exactly_once: true``), never reports less true lag than a read_committed reader's count says there is."""
    body = {
        "clusters": mm2_env.config_dict["clusters"],
        "flows": {
            "we": {
                "source": "west",
                "target": "east",
                "topics": [EOS_TOPIC],
                "checkpoint_groups": [],
                "mirror": {"kind": "mm2", "exactly_once": True, "offset_flush_interval_s": 1},
            }
        },
        "monitor": {"interval_s": 1, "history": False, "http_port": None, "metrics_port": None},
    }
    sampler = Sampler(config_from_dict(body))
    try:
        figures = check_transactional_traffic(
            sampler, "we", mm2_env.target.bootstrap, mm2_env.source.bootstrap, EOS_TOPIC, f"west.{EOS_TOPIC}"
        )
    finally:
        sampler.close()
    print(f"MM2 exactly-once: {figures}")
