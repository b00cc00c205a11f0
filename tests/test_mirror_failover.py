"""Checkpoints, `mirror failover translate|reset-to-time` and `mirror topology` on the real clusters."""

from __future__ import annotations

import json
import time
from datetime import UTC

from confluent_kafka import Consumer, Producer

from harness.helpers import create_topic, end_offsets, produce_numbered
from harness.mirror_harness import MirrorProcess, wait_until

from .support.mirror_cli import run_cli
from .support.mirror_flows import committed_offsets, config_for, consume_and_commit, count_on


def test_checkpoints_translate_conservatively_and_apply(source, target, topic_name, mirror_config, tmp_path):
    create_topic(source.bootstrap, topic_name, 2)
    produce_numbered(source.bootstrap, topic_name, 2000, partitions=2)
    group = f"app-{topic_name}"
    consume_and_commit(source.bootstrap, topic_name, group, 0, 537)
    consume_and_commit(source.bootstrap, topic_name, group, 1, 1000)  # fully consumed
    cfg = config_for(mirror_config, topic_name, f"g-{topic_name}", checkpoint_groups=[f"app-{topic_name}"])
    cfg["mirror"]["offset_sync_every"] = 100
    path = tmp_path / "m.yaml"
    with MirrorProcess(cfg, path) as mirror:
        wait_until(lambda: count_on(target.bootstrap, f"east.{topic_name}") == 2000, 60, what="mirroring", alive=mirror)
        result = wait_until(
            lambda: (
                (r := run_cli("failover", "translate", "--config", str(path), "--group", group, "--json")).returncode
                == 0
                and r
            ),
            30,
            what="a translation",
        )
    plan = json.loads(result.stdout)
    assert plan["mode"] == "live"
    rows = {r["partition"]: r for r in plan["partitions"]}
    # one-to-one mirror: the truth for source offset C is target offset C; translation never passes it
    assert rows[0]["source_offset"] == 537 and rows[0]["target_offset"] <= 537
    assert rows[0]["max_duplicates"] == 537 - rows[0]["target_offset"] >= 0
    assert rows[1]["target_offset"] == 1000 and rows[1]["max_duplicates"] == 0  # idle sync: exact
    # checkpoints were written too, and --apply commits on the target (the group is not active there)
    applied = run_cli("failover", "translate", "--config", str(path), "--group", group, "--apply", "--json")
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["applied"] == 2
    on_target = committed_offsets(target.bootstrap, group, f"east.{topic_name}", 2)
    assert on_target == {0: rows[0]["target_offset"], 1: 1000}


def test_reset_to_time_picks_first_record_at_or_after(source, target, topic_name, mirror_config, tmp_path):
    create_topic(source.bootstrap, topic_name, 1)
    t0 = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": source.bootstrap})
    for i in range(100):
        producer.produce(topic_name, value=f"v{i}".encode(), partition=0, timestamp=t0 + i * 1000)
    producer.flush(30)
    cfg = config_for(mirror_config, topic_name, f"g-{topic_name}")
    path = tmp_path / "m.yaml"
    with MirrorProcess(cfg, path) as mirror:
        wait_until(lambda: count_on(target.bootstrap, f"east.{topic_name}") == 100, 60, what="mirroring", alive=mirror)
        wait_until(lambda: end_offsets(target.bootstrap, f"east.{topic_name}")[0] == 100, 10, what="target end")
    from datetime import datetime

    when = datetime.fromtimestamp((t0 + 41_500) / 1000, tz=UTC).isoformat()  # between records 41 and 42
    group = f"reset-{topic_name}"

    def planned():
        # the plan reads the offset syncs, the last of which the idle engine writes after its final flush
        plan = run_cli("failover", "reset-to-time", "--config", str(path), "--group", group, "--time", when, "--json")
        assert plan.returncode == 0, plan.stderr
        rows = [r for r in json.loads(plan.stdout)["partitions"] if r["topic"] == topic_name]
        return rows if rows and rows[0]["target_offset"] == 42 else None

    rows = wait_until(planned, 30, 0.5, "a plan through the idle sync") or []
    assert rows == [{"topic": topic_name, "target_topic": f"east.{topic_name}", "partition": 0, "target_offset": 42}]
    applied = run_cli("failover", "reset-to-time", "--config", str(path), "--group", group, "--time", when, "--apply")
    assert applied.returncode == 0, applied.stderr
    assert committed_offsets(target.bootstrap, group, f"east.{topic_name}", 1) == {0: 42}
    # an active group on the target is refused, with one line
    consumer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group})
    consumer.subscribe([f"east.{topic_name}"])
    wait_until(lambda: consumer.poll(0.5) is not None or consumer.assignment(), 30, what="active group")
    refused = run_cli("failover", "reset-to-time", "--config", str(path), "--group", group, "--time", when, "--apply")
    consumer.close()
    assert refused.returncode == 2 and "is active on 'west'" in refused.stderr and refused.stderr.count("\n") == 1
    bad = run_cli("failover", "reset-to-time", "--config", str(path), "--group", group, "--time", "yesterday")
    assert bad.returncode == 2 and "is not an ISO 8601 time" in bad.stderr and "Traceback" not in bad.stderr


def test_topology_lists_upstream_from_heartbeats(source, target, topic_name, mirror_config, tmp_path):
    create_topic(source.bootstrap, topic_name, 1)
    cfg = config_for(mirror_config, topic_name, f"g-{topic_name}")
    path = tmp_path / "m.yaml"
    with MirrorProcess(cfg, path) as mirror:
        wait_until(lambda: count_on(target.bootstrap, "east.heartbeats") > 0, 30, what="heartbeats", alive=mirror)

        def east_upstreams():
            result = run_cli("topology", "--config", str(path), "--cluster", "west", "--json")
            assert result.returncode == 0, result.stderr
            upstreams = json.loads(result.stdout)["upstreams"]
            return [u for u in upstreams if u["upstream"] == "east" and u["topic"] == "east.heartbeats"]

        east = wait_until(east_upstreams, 30, 0.5, "east among the upstreams", alive=mirror)
    assert east and east[0]["age_s"] < 30


def test_unreachable_target_exits_3(tmp_path, write_config):
    path = write_config(
        {
            "clusters": {"east": {"bootstrap.servers": "127.0.0.1:1"}, "west": {"bootstrap.servers": "127.0.0.1:2"}},
            "flows": {"ew": {"source": "east", "target": "west"}},
        }
    )
    result = run_cli("failover", "translate", "--config", str(path), "--group", "g")
    assert result.returncode == 3 and result.stderr.strip() == "mirror: cannot reach cluster 'west' at 127.0.0.1:2"
