"""Mirror engine behaviour on the real clusters: policies, active-active, topic changes, offset syncs."""

from __future__ import annotations

import time

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

from harness.helpers import admin, create_topic, end_offsets, produce_numbered, read_all, wait_for_topic
from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from mirrorwatch.core.records import OffsetSync

from .support.mirror_flows import committed_offsets, config_for, count_on


def test_identity_policy_keeps_names(source, target, topic_name, mirror_config, tmp_path):
    create_topic(source.bootstrap, topic_name, 3)
    produce_numbered(source.bootstrap, topic_name, 300, partitions=3)
    cfg = config_for(mirror_config, topic_name, f"g-{topic_name}", policy="identity")
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        wait_until(lambda: count_on(target.bootstrap, topic_name) >= 300, 60, what="identity mirror", alive=mirror)
    records = read_all(target.bootstrap, topic_name)
    assert len(records) == 300 and all(dict(m.headers())["mw.origin"] == b"east" for m in records)


def _active_active(source, target, topic, tmp_path, policy):
    create_topic(source.bootstrap, topic, 3)
    create_topic(target.bootstrap, topic, 3)
    clusters = {"east": source.config(), "west": target.config()}
    flows = {
        "east-west": {"source": "east", "target": "west", "topics": [topic], "policy": policy, "group": f"ew-{topic}"},
        "west-east": {"source": "west", "target": "east", "topics": [topic], "policy": policy, "group": f"we-{topic}"},
    }
    cfg = {"clusters": clusters, "flows": flows, "mirror": fast_mirror_settings(heartbeats=False)}
    ew = MirrorProcess(cfg, tmp_path / "aa.yaml", flow="east-west", log_name="ew.log").start()
    we = MirrorProcess(cfg, tmp_path / "aa.yaml", flow="west-east", log_name="we.log").start()
    try:
        produce_numbered(source.bootstrap, topic, 500, partitions=3)
        produce_numbered(target.bootstrap, topic, 400, partitions=3, start=10_000)
        return ew, we
    except Exception:
        ew.kill(), we.kill()
        raise


def test_active_active_prefix_never_loops(source, target, topic_name, tmp_path):
    ew, we = _active_active(source, target, topic_name, tmp_path, "prefix")
    try:
        wait_until(
            lambda: (
                count_on(target.bootstrap, f"east.{topic_name}") >= 500
                and count_on(source.bootstrap, f"west.{topic_name}") >= 400
            ),
            60,
            what="both directions",
            alive=ew,
        )
        time.sleep(3)  # quiescence: anything looping would show up by now
    finally:
        assert ew.terminate() == 0 and we.terminate() == 0
    assert count_on(target.bootstrap, f"east.{topic_name}") == 500
    assert count_on(source.bootstrap, f"west.{topic_name}") == 400
    for bootstrap, other in ((source.bootstrap, "east"), (target.bootstrap, "west")):
        names = admin(bootstrap).list_topics(timeout=10).topics
        assert not any(n.endswith(f".{other}.{topic_name}") or n.startswith(f"{other}.{other}.") for n in names)


def test_active_active_identity_never_loops(source, target, topic_name, tmp_path):
    ew, we = _active_active(source, target, topic_name, tmp_path, "identity")
    try:
        wait_until(
            lambda: count_on(target.bootstrap, topic_name) >= 900 and count_on(source.bootstrap, topic_name) >= 900,
            60,
            what="both directions (identity)",
            alive=ew,
        )
        time.sleep(3)
    finally:
        assert ew.terminate() == 0 and we.terminate() == 0
    for bootstrap in (source.bootstrap, target.bootstrap):
        values = [m.value() for m in read_all(bootstrap, topic_name)]
        assert len(values) == 900 and len(set(values)) == 900  # each record once, in each direction


def test_new_topic_partitions_and_config_are_synced(source, target, topic_name, mirror_config, tmp_path):
    cfg = config_for(mirror_config, f"{topic_name}.*", f"g-{topic_name}")
    first = f"{topic_name}-a"
    create_topic(source.bootstrap, first, 2)
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        wait_for_topic(target.bootstrap, f"east.{first}", 2)
        later = f"{topic_name}-b"  # created while running: picked up within the refresh interval (1 s)
        create_topic(source.bootstrap, later, 2, config={"retention.ms": "3600000"})
        produce_numbered(source.bootstrap, later, 50, partitions=2)
        wait_until(lambda: count_on(target.bootstrap, f"east.{later}") == 50, 30, what="the new topic", alive=mirror)
        # partition increase and a config change on the source
        src_admin = admin(source.bootstrap)
        src_admin.create_partitions([NewPartitions(first, 4)])[first].result(30)
        entry = ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, first, incremental_configs=[entry])
        src_admin.incremental_alter_configs([resource])[resource].result(30)
        wait_for_topic(target.bootstrap, f"east.{first}", 4, timeout_s=30)
        produce_numbered(source.bootstrap, first, 40, partitions=4)
        wait_until(
            lambda: end_offsets(target.bootstrap, f"east.{first}").get(3, 0) == 10,
            60,
            what="records in the new partition",
            alive=mirror,
        )

        tgt_admin = admin(target.bootstrap)

        def target_retention(topic):
            res = ConfigResource(ConfigResource.Type.TOPIC, topic)
            return tgt_admin.describe_configs([res])[res].result(10)["retention.ms"].value

        wait_until(lambda: target_retention(f"east.{first}") == "7200000", 30, what="retention.ms synced", alive=mirror)
        assert target_retention(f"east.{later}") == "3600000"


def read_syncs(bootstrap, topic="mw.offset-syncs.east.internal") -> dict[tuple[str, int], OffsetSync]:
    latest = {}
    for m in read_all(bootstrap, topic):
        sync = OffsetSync.from_value(m.value())
        latest[(sync.topic, sync.partition)] = sync
    return latest


def test_offset_syncs_exact_when_idle(source, target, topic_name, mirror_config, tmp_path):
    create_topic(source.bootstrap, topic_name, 4)
    produce_numbered(source.bootstrap, topic_name, 4321, partitions=4)
    cfg = config_for(mirror_config, topic_name, f"g-{topic_name}")
    cfg["mirror"]["offset_sync_every"] = 500
    cfg["mirror"]["provenance_header"] = True  # off by default under the prefix policy; asked for here
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        wait_until(lambda: count_on(target.bootstrap, f"east.{topic_name}") == 4321, 60, what="mirroring", alive=mirror)
        source_ends = end_offsets(source.bootstrap, topic_name)

        def exact():
            syncs = read_syncs(target.bootstrap)
            return all(
                syncs.get((topic_name, p)) and syncs[(topic_name, p)].acked_next == end
                for p, end in source_ends.items()
            )

        wait_until(exact, 20, what="idle offset syncs", alive=mirror)
    syncs, target_ends = read_syncs(target.bootstrap), end_offsets(target.bootstrap, f"east.{topic_name}")
    for p, end in source_ends.items():
        sync = syncs[(topic_name, p)]
        assert (sync.upstream_offset, sync.downstream_offset) == (end - 1, target_ends[p] - 1)
        assert sync.read_position == end
    assert all(dict(m.headers())["mw.origin"] == b"east" for m in read_all(target.bootstrap, f"east.{topic_name}"))


def test_sigterm_exits_0_within_10s_with_acked_committed(source, target, topic_name, mirror_config, tmp_path):
    import threading

    create_topic(source.bootstrap, topic_name, 3)
    cfg = config_for(mirror_config, topic_name, f"g-{topic_name}")
    cfg["mirror"]["commit_interval_s"] = 30  # so the final commit is the shutdown's own
    # a commit interval must be shorter than the group's session timeout (a config rule): lengthen the latter
    cfg["mirror"]["consumer"] = {"session.timeout.ms": 45_000}
    producing = threading.Thread(
        target=produce_numbered,
        args=(source.bootstrap, topic_name, 60_000),
        kwargs={"partitions": 3, "value_size": 500},
    )
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        producing.start()
        wait_until(
            lambda: (
                count_on(target.bootstrap, f"east.{topic_name}") > 5000
                and min(end_offsets(target.bootstrap, f"east.{topic_name}").values()) > 1000
            ),
            60,
            what="mirroring",
            alive=mirror,
        )
        started = time.monotonic()
        rc = mirror.terminate(timeout=15)
        took = time.monotonic() - started
    producing.join()
    assert rc == 0 and took < 10, (rc, took)
    committed = committed_offsets(source.bootstrap, f"g-{topic_name}", topic_name, 3)
    target_ends = end_offsets(target.bootstrap, f"east.{topic_name}")
    assert sum(committed.values()) > 5000
    for p, offset in committed.items():
        assert 0 < offset <= target_ends[p]  # nothing committed that the target had not acknowledged
        assert offset == target_ends[p]  # and everything acknowledged was committed at shutdown


def test_full_producer_queue_while_offset_syncs_are_due(source, target, topic_name, mirror_config, tmp_path):
    """A tiny producer queue and an offset sync every 7 records: the sync a delivery report asks for often meets
    a full queue. It is sent after the report's poll() returns: a poll inside the report (to make room) aborted the
    process in confluent-kafka (CallState assertion), found by the 1M-record soak while a target restarted."""
    create_topic(source.bootstrap, topic_name, 3)
    produce_numbered(source.bootstrap, topic_name, 20_000, partitions=3)
    cfg = config_for(mirror_config, topic_name, f"g-{topic_name}")
    cfg["mirror"].update(offset_sync_every=7, producer={"queue.buffering.max.messages": 40})
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        wait_until(
            lambda: count_on(target.bootstrap, f"east.{topic_name}") >= 20_000, 90, what="mirroring", alive=mirror
        )
        wait_until(
            lambda: sum(committed_offsets(source.bootstrap, f"g-{topic_name}", topic_name, 3).values()) == 20_000,
            30,
            what="committed",
            alive=mirror,
        )
        assert mirror.terminate(timeout=15) == 0, mirror.log_text()[-3000:]
    assert "Traceback" not in mirror.log_text() and "Fatal Python error" not in mirror.log_text()
