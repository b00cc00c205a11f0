"""Scale-out: several `mirror run` processes of one flow share its partitions through the mirror group."""

from __future__ import annotations

import time
from collections import Counter

from harness.helpers import admin, create_topic, end_offsets, produce_numbered, read_all
from harness.mirror_harness import MirrorProcess, wait_until
from mirrorwatch.core.naming import checkpoints_topic
from mirrorwatch.core.records import Checkpoint, RecordFormatError

from .support.mirror_flows import committed_offsets, config_for, consume_and_commit, count_on


def ours(messages) -> list[Checkpoint]:
    """mirrorwatch's checkpoints in the topic: a MirrorMaker 2 on the same pair (test_mm2.py) writes its own,
    binary ones to the same-named topic (docs/mirrormaker2.md), and the engine skips those too."""
    found = []
    for m in messages:
        try:
            found.append(Checkpoint.from_value(m.value()))
        except RecordFormatError:
            continue
    return found


def assignments(bootstrap: str, group: str) -> list[set[tuple[str, int]]]:
    """Each member's partitions, as the group coordinator sees them."""
    client = admin(bootstrap)  # keep a reference: a collected client fails its pending futures
    described = client.describe_consumer_groups([group])[group].result(10)
    return [{(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} for m in described.members]


def test_two_workers_split_a_flow_and_the_survivor_takes_over(source, target, topic_name, mirror_config, tmp_path):
    parts, group = 6, f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, parts)
    produce_numbered(source.bootstrap, topic_name, 20_000, partitions=parts)
    app = f"app-{topic_name}"
    for p in range(parts):
        consume_and_commit(source.bootstrap, topic_name, app, p, 1000)
    cfg = config_for(mirror_config, topic_name, group, checkpoint_groups=[app])  # checkpoints every 1 s
    first = MirrorProcess(cfg, tmp_path / "a.yaml", log_name="a.log").start()
    second = MirrorProcess(cfg, tmp_path / "b.yaml", log_name="b.log").start()
    try:

        def split():
            # each member's share of this topic (the heartbeats topic is mirrored by the flow too)
            owned = [{p for t, p in m if t == topic_name} for m in assignments(source.bootstrap, group)]
            return len(owned) == 2 and all(owned) and not (owned[0] & owned[1]) and len(owned[0] | owned[1]) == parts

        wait_until(split, 60, what="both workers to own part of the flow", alive=second)
        wait_until(
            lambda: count_on(target.bootstrap, f"east.{topic_name}") >= 20_000, 60, what="20k mirrored", alive=first
        )
        # each worker checkpoints only the partitions it owns: together every partition, once per interval
        since = int(time.time() * 1000)

        def window_closed():
            # every partition has a checkpoint dated after the 6 s window: all of the window's are on the topic
            ts = [cp for cp in ours(read_all(target.bootstrap, checkpoints_topic("east"))) if cp.group == app]
            return ts if {cp.partition for cp in ts if cp.ts_ms >= since + 6000} == set(range(parts)) else None

        written = wait_until(window_closed, 60, 1.0, "checkpoints after the 6 s window", alive=first)
        emitted = Counter(cp.partition for cp in written if since <= cp.ts_ms < since + 6000)
        # two writers per partition would give ~12; a reader waiting out its timeout (fixed) gave 1 per ~10 s
        assert set(emitted) == set(range(parts)) and 2 <= min(emitted.values()) and max(emitted.values()) <= 7, emitted
        # one worker dies without a goodbye: after the session timeout the other owns everything and goes on
        first.kill()
        produce_numbered(source.bootstrap, topic_name, 6_000, partitions=parts, start=20_000)
        wait_until(
            lambda: (
                committed_offsets(source.bootstrap, group, topic_name, parts)
                == end_offsets(source.bootstrap, topic_name)
            ),
            90,
            what="the survivor to commit everything",
            alive=second,
        )
        members = assignments(source.bootstrap, group)
        assert len(members) == 1 and len(members[0]) >= parts
    finally:
        first.kill()
        second.terminate()
    seen = Counter(int(m.value()[1:]) for m in read_all(target.bootstrap, f"east.{topic_name}"))
    assert set(seen) == set(range(26_000)), "lost records"
