"""MirrorMaker 2 support, pure parts: decoders on bytes captured from the real MM2 4.3.1, the target-side position
estimate, checkpoint re-delivery and translation coverage, the config section and its defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.lag import target_side_acked_next
from mirrorwatch.core.mm2 import (
    any_heartbeat,
    assigned_groups,
    decode_checkpoint,
    decode_connect_config,
    decode_connect_offset,
    decode_heartbeat,
    decode_offset_sync,
    flow_policy,
    mm2_topics,
)
from mirrorwatch.core.records import Checkpoint, Heartbeat, RecordFormatError
from mirrorwatch.core.translation import (
    GroupDiscovery,
    checkpoint_redelivery,
    downstream_of,
    translation_coverage,
)

CAPTURED = json.loads((Path(__file__).parent / "fixtures" / "mm2_records.json").read_text())
b = bytes.fromhex


@pytest.mark.parametrize(
    "i, expected", [(0, ("orders", 0, 0, 0)), (1, ("orders", 0, 101, 101)), (2, ("orders", 0, 202, 202))]
)
def test_offset_sync_from_real_mm2(i, expected):
    r = CAPTURED["offset_syncs"][i]
    s = decode_offset_sync(b(r["k"]), b(r["v"]))
    assert (s.topic, s.partition, s.upstream_offset, s.downstream_offset) == expected


@pytest.mark.parametrize("i, expected", [(0, (0, 500, 405)), (1, (1, 1000, 910)), (2, (2, 1000, 708))])
def test_checkpoint_from_real_mm2(i, expected):
    r = CAPTURED["checkpoints"][i]
    cp = decode_checkpoint(b(r["k"]), b(r["v"]), r["ts"])
    # MM2 names the *target* topic in its checkpoints
    assert (cp.group, cp.topic) == ("billing", "east.orders")
    assert (cp.partition, cp.upstream_offset, cp.downstream_offset) == expected
    assert cp.ts_ms == r["ts"]


def test_heartbeats_from_real_mm2():
    own, crossed = CAPTURED["heartbeats"]
    beat = decode_heartbeat(b(own["k"]), b(own["v"]))
    assert (beat.source, beat.target, beat.ts_ms) == ("east", "west", 0x1A209CF036B)
    beat = any_heartbeat(b(crossed["k"]), b(crossed["v"]))
    assert (beat.source, beat.target) == ("west", "east")  # written on east by the west->east heartbeat connector
    ours = Heartbeat("east", "west", 123)
    assert any_heartbeat(ours.key(), ours.to_value()) == ours


@pytest.mark.parametrize(
    "key, value, expected",
    [
        (
            b'["MirrorSourceConnector",{"cluster":"east","partition":2,"topic":"orders"}]',
            b'{"offset":41}',
            ("east", "orders", 2, 41, 42),
        ),
        # a Connect cluster names the connectors as it likes (Strimzi: "<source>-><target>.MirrorSourceConnector")
        (
            b'["src->dst.MirrorSourceConnector",{"cluster":"src","partition":0,"topic":"orders"}]',
            b'{"offset":99}',
            ("src", "orders", 0, 99, 100),
        ),
        (b'["MirrorCheckpointConnector",{"cluster":"east"}]', b'{"offset":1}', None),
        # the heartbeat connector's positions have no topic (captured from the real worker)
        (
            b'["src->dst.MirrorHeartbeatConnector",{"sourceClusterAlias":"src","targetClusterAlias":"dst"}]',
            b'{"offset":0}',
            None,
        ),
        (b'["MirrorSourceConnector",{"cluster":"east","partition":2,"topic":"orders"}]', None, None),
    ],
)
def test_connect_offsets(key, value, expected):
    pos = decode_connect_offset(key, value)
    assert (None if pos is None else (pos.cluster, pos.topic, pos.partition, pos.offset, pos.next_offset)) == expected


@pytest.mark.parametrize(
    "decode, key, value",
    [
        (decode_offset_sync, b"\x00\x06orders\x00\x00\x00\x00", b"\x00" * 15),  # truncated
        (decode_offset_sync, b"\x00\x09orders", b"\x00" * 16),  # string longer than the key
        (decode_heartbeat, b"\x00\x01a\x00\x01b", b"\x00\x01" + b"\x00" * 8),  # unknown version
        (decode_heartbeat, None, None),
    ],
)
def test_bad_records_are_refused(decode, key, value):
    with pytest.raises(RecordFormatError):
        decode(key, value)


def test_bad_connect_offset_key():
    with pytest.raises(RecordFormatError):
        decode_connect_offset(b"not json", b'{"offset":1}')


# ------------------------------------------------------------------------------ target-side estimate
# MM2 publishes no acknowledged position: the one estimator (core.lag) runs with sync_acked_next unknown (-1)


@pytest.mark.parametrize(
    "source_end, committed, up, down, target_end, expected",
    [
        (1000, 900, 950, 950, 980, 980),  # aligned offsets: the target end is the position
        (1000, 900, 950, 450, 480, 980),  # target offsets shifted by 500
        (
            1000,
            990,
            950,
            950,
            980,
            990,
        ),  # MM2 committed more than the target shows (an older end read): the commit wins
        (1000, -1, 950, 950, 1200, 1000),  # never past the source end
        (1000, 700, -1, -1, 980, 700),  # no sync yet: the committed position
        (1000, -1, -1, -1, -1, -1),  # nothing known
        (1000, -1, 950, 950, 950, -1),  # target end not past the sync's record: not usable
    ],
)
def test_target_side_acked_next(source_end, committed, up, down, target_end, expected):
    assert int(target_side_acked_next([source_end], [committed], [up], [down], [-1], [target_end])[0]) == expected


def test_identity_policy_trusts_only_mm2s_commit():
    # other writers may share an identity-named target partition: its end offset proves nothing
    assert int(target_side_acked_next([1000], [700], [950], [950], [-1], [980], one_to_one=False)[0]) == 700


def test_redelivery_and_translation_from_the_sync_history():
    syncs = [(0, 0), (101, 101), (404, 404), (505, 505)]
    assert downstream_of(syncs, 500) == 500
    assert downstream_of(syncs, -1) is None
    # MM2 checkpointed commit 500 at 405 (its kept sync 404, +1): resuming there re-reads 95 records
    assert checkpoint_redelivery(syncs, 500, 405) == 95
    assert checkpoint_redelivery(syncs, 505, 505) == 0


def test_translation_coverage_reasons():
    now = 100_000
    cp = lambda up, ts=now: Checkpoint("g", "orders", 0, up, up, ts)  # noqa: E731
    commits = {
        "fresh": {("orders", 0): 500},
        "none": {("orders", 0): 500},
        "stale": {("orders", 0): 500},
        "idle": {("orders", 0): 400},
        "beyond": {("orders", 0): 900},
        "stopped": {("orders", 0): 950},  # a stopped mirror: old checkpoint behind the commit, which is past the syncs
    }
    checkpoints = {
        "fresh": {("orders", 0): cp(500)},
        "stale": {("orders", 0): cp(450, now - 120_000)},
        "idle": {("orders", 0): cp(400, now - 600_000)},
        "beyond": {("orders", 0): cp(900)},
        "stopped": {("orders", 0): cp(700, now - 90_000)},
    }
    out = translation_coverage(commits, checkpoints, {("orders", 0): 800}, now, 60, {("fresh", "orders", 0): 95})
    assert (out["groups"], out["translated"], out["ratio"]) == (6, 2, 0.3333)
    reasons = {u["group"]: u["reason"] for u in out["untranslated"]}
    assert set(reasons) == {
        "none",
        "stale",
        "beyond",
        "stopped",
    }  # an old checkpoint at the group's (unchanged) commit is fine
    assert reasons["none"].startswith("no checkpoint")
    assert out["approximate"] == [
        {
            "group": "fresh",
            "redelivered": 95,
            "reason": "translated through an older offset sync: resuming re-delivers 95 records",
        }
    ]
    assert "120 s old" in reasons["stale"]
    assert "beyond the last offset sync (800)" in reasons["beyond"]
    assert reasons["stopped"] == (
        "checkpoint for orders[0] is 90 s old (limit 60 s) and behind the commit; "
        "commit 950 on orders[0] is beyond the last offset sync (800): translated approximately"
    )


# ------------------------------------------------------------------------------ config


def _config(**mirror):
    return config_from_dict(
        {
            "clusters": {"east": {"bootstrap.servers": "a:1"}, "west": {"bootstrap.servers": "b:1"}},
            "flows": {"ew": {"source": "east", "target": "west", "mirror": {"kind": "mm2", **mirror}}},
        }
    )


def test_mm2_defaults_are_mm2s_own():
    flow = _config().flows["ew"]
    t = mm2_topics(flow)
    # as the real MM2 4.3.1 created them (tests/test_mm2.py lists both clusters)
    assert (t.offset_syncs, t.offset_syncs_cluster) == ("mm2-offset-syncs.west.internal", "east")
    assert (t.checkpoints, t.heartbeats, t.mirrored_heartbeats) == (
        "east.checkpoints.internal",
        "heartbeats",
        "east.heartbeats",
    )
    assert t.connect_offsets == "mm2-offsets.east.internal"
    assert flow_policy(flow).target_topic("orders") == "east.orders"


def test_mm2_aliases_and_policy():
    flow = _config(source_alias="dc1", target_alias="dc2", separator="_", offset_syncs_topic_location="target").flows[
        "ew"
    ]
    t = mm2_topics(flow)
    assert (t.offset_syncs, t.offset_syncs_cluster, t.checkpoints) == (
        "mm2-offset-syncs.dc2.internal",
        "west",
        "dc1.checkpoints.internal",
    )
    assert flow_policy(flow).target_topic("orders") == "dc1_orders"
    assert flow_policy(_config(policy="identity").flows["ew"]).target_topic("orders") == "orders"


def test_mm2_bad_kind_is_one_line():
    from mirrorwatch.core.config import ConfigError

    with pytest.raises(ConfigError, match=r"flows\.ew\.mirror\.kind"):
        _config(kind="mm3")


# ------------------------------------------------------------------------------ surfaces


def test_an_mm2_flow_is_marked_on_the_exporter_and_the_api():
    import numpy as np
    from prometheus_client.parser import text_string_to_metric_families

    from mirrorwatch.monitor.api import flow_body
    from mirrorwatch.monitor.exporter import TextRenderer

    from .support.monitor_views import mirror_view, snapshot

    coverage = {
        "groups": 2,
        "translated": 1,
        "ratio": 0.5,
        "approximate": [],
        "checkpoint_age_s": {"billing": 3.5},
        "untranslated": [{"group": "audit", "reason": "no checkpoint for orders[0]"}],
    }
    mm2 = mirror_view(
        flow="mm2-flow",
        group="MirrorSourceConnector",
        engine="mm2",
        heartbeat_age_s=1.25,
        read_position=np.array([-1, -1], np.int64),
        read_lag=np.array([-1, -1], np.int64),
        coverage=coverage,
    )
    snap = snapshot(mirror_view(), mm2)
    clock = lambda: 1_700_000_100.0  # noqa: E731

    def parse(text):
        return sorted(
            (s.name, tuple(sorted(s.labels.items())), s.value)
            for f in text_string_to_metric_families(text)
            for s in f.samples
        )

    fast = parse(TextRenderer(clock).render(snap).decode())
    info = {dict(l)["flow"]: dict(l)["mirror"] for n, l, _ in fast if n == "mirrorwatch_flow_info"}
    assert info == {"ew": "mirrorwatch", "mm2-flow": "mm2"}
    assert (
        "mirrorwatch_heartbeat_age_seconds",
        (("flow", "mm2-flow"), ("source", "east"), ("target", "west")),
        1.25,
    ) in fast
    assert [v for n, l, v in fast if n == "mirrorwatch_translation_coverage_ratio"] == [0.5]
    assert [dict(l)["group"] for n, l, _ in fast if n == "mirrorwatch_checkpoint_age_seconds"] == ["billing"]
    kinds = {dict(l)["kind"] for n, l, _ in fast if n == "mirrorwatch_lag_records" and dict(l)["flow"] == "mm2-flow"}
    assert kinds == {"committed", "true"}  # MM2 publishes no read position
    body = flow_body(mm2)
    assert (body["mirror"], body["heartbeat_age_s"], body["coverage"]["ratio"]) == ("mm2", 1.25, 0.5)
    assert body["partitions"][0]["read_lag"] is None


# ------------------------------------------------------------------------------ group discovery (Connect config topic)

CP = "src->dst.MirrorCheckpointConnector"


@pytest.mark.parametrize(
    "key, value, expected",
    [
        # shapes captured from the real Connect worker's config topic (connect-runtime 4.3.1)
        (f"commit-{CP}".encode(), b'{"tasks":1}', (("tasks", CP), 1)),
        (f"commit-{CP}".encode(), b'{"tasks":0}', (("tasks", CP), 0)),
        (
            f"task-{CP}-0".encode(),
            b'{"properties":{"connector.class":"x","sasl.jaas.config":"secret","task.assigned.groups":"app1,app2"}}',
            (("task", CP, 0), frozenset({"app1", "app2"})),
        ),
        (f"task-{CP}-3".encode(), b'{"properties":{"task.assigned.groups":""}}', (("task", CP, 3), frozenset())),
        (f"task-{CP}-x".encode(), b'{"properties":{}}', None),
        (f"connector-{CP}".encode(), b'{"properties":{"connector.class":"x"}}', None),
        (b"session-key", b'{"key":"abc","algorithm":"HmacSHA256"}', None),
        (f"task-{CP}-0".encode(), None, None),  # a tombstone
    ],
)
def test_connect_config_records(key, value, expected):
    assert decode_connect_config(key, value) == expected


def test_bad_connect_config_record():
    with pytest.raises(RecordFormatError):
        decode_connect_config(b"commit-x", b"not json")


@pytest.mark.parametrize(
    "latest, expected",
    [
        ({}, None),  # nothing known of the connector
        ({("tasks", CP): 0}, set()),  # no group found yet: the connector runs no task
        ({("tasks", CP): 1, ("task", CP, 0): frozenset({"a"}), ("task", CP, 1): frozenset({"old"})}, {"a"}),
        ({("tasks", CP): 2, ("task", CP, 0): frozenset({"a"}), ("task", CP, 1): frozenset({"b"})}, {"a", "b"}),
        ({("tasks", "other"): 1, ("task", "other", 0): frozenset({"a"})}, None),
    ],
)
def test_assigned_groups(latest, expected):
    assert assigned_groups(latest, CP) == expected


@pytest.mark.parametrize(
    "first_seen_s_ago, expected",
    [
        (None, "not yet discovered by MM2 (next refresh within 600 s)"),  # a one-shot check: a whole interval
        (0, "not yet discovered by MM2 (next refresh within 600 s)"),
        (550.5, "not yet discovered by MM2 (next refresh within 50 s)"),
        (610, "not yet discovered by MM2 (its next refresh is due now)"),
        (
            700,
            "not discovered by MM2 700 s after it first committed, though MM2 looks for new groups every 600 s: "
            "check the checkpoint connector's groups and groups.exclude, and its task",
        ),
    ],
)
def test_group_discovery_reason(first_seen_s_ago, expected):
    now = 1_000_000
    seen = {} if first_seen_s_ago is None else {"g": int(now - first_seen_s_ago * 1000)}
    assert GroupDiscovery(frozenset(), 600, seen).reason("g", now) == expected


def test_coverage_says_when_mm2_has_not_found_a_group_yet():
    now = 100_000
    commits = {"new": {("orders", 0): 5}, "known": {("orders", 0): 5}, "lost": {("orders", 0): 5}}
    checkpoints = {"known": {("orders", 0): Checkpoint("known", "orders", 0, 5, 5, now)}}
    found = frozenset({"known", "lost"})
    out = translation_coverage(
        commits, checkpoints, {("orders", 0): 4}, now, 60, None, GroupDiscovery(found, 20, {"new": now - 5_000})
    )
    reasons = {u["group"]: u["reason"] for u in out["untranslated"]}
    # found by MM2 but without a checkpoint: a real gap; not found yet: MM2 has not looked since it committed
    assert reasons == {
        "new": "not yet discovered by MM2 (next refresh within 15 s)",
        "lost": "no checkpoint for orders[0]",
    }
    assert (out["groups"], out["translated"]) == (3, 1)
    # without the Connect config topic nothing is known of discovery: the reason stays "no checkpoint"
    plain = translation_coverage(commits, checkpoints, {("orders", 0): 4}, now, 60)
    assert {u["group"]: u["reason"] for u in plain["untranslated"]}["new"] == "no checkpoint for orders[0]"
