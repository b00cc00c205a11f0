"""The sampler on real clusters, against a stand-in mirror: the test itself commits the mirror group's offsets on
the source, copies records to the target and writes OffsetSync records, so every expected lag is known exactly.
(The real engine's tests are in test_monitor_engine.py.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time

import pytest

from harness.helpers import create_topic, produce_numbered
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.monitor.cli import main
from mirrorwatch.monitor.kafka_io import ClusterReader, reported_reachable
from mirrorwatch.monitor.sampler import Sampler

from .support.outages import local_only
from .support.standin_mirror import GROUP, PARTS, StandInMirror, commit


def flow_config(source, target, topic, **monitor) -> dict:
    return {
        "clusters": {"east": source.config(), "west": target.config()},
        # the stand-in mirrors only ``topic``: the flow does not own the pair's heartbeats and canary topics (which
        # other tests of the session create on these clusters), so the monitor measures only ``topic``
        "flows": {"ew": {"source": "east", "target": "west", "topics": [topic], "internal_topics": False}},
        "mirror": {"commit_interval_s": 0.5},  # the stand-in "commits" at most this often
        "monitor": {"interval_s": 1, "window": 3, "history": False, **monitor},
    }


def sample_until(sampler: Sampler, check, timeout_s: float = 20):
    """Sample until ``check(view)`` holds (the sync tracker reads asynchronously)."""
    deadline = time.monotonic() + timeout_s
    while True:
        view = sampler.sample().views[0]
        if check(view) or time.monotonic() > deadline:
            return view
        time.sleep(0.3)


def wait_for_syncs(sampler: Sampler, topic: str, check, timeout_s: float = 20) -> None:
    """Wait until the sampler's sync tracker holds, for every partition, a sync that satisfies ``check``."""
    tracker = next(iter(sampler.trackers.values()))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        latest = tracker.latest()
        if all((topic, p) in latest and check(latest[(topic, p)]) for p in range(PARTS)):
            return
        time.sleep(0.1)
    raise AssertionError(f"offset syncs for {topic} not seen within {timeout_s}s")


def lags(view) -> list[tuple]:
    return [(r["committed_lag"], r["read_lag"], r["true_lag"]) for r in view.rows()]


@pytest.fixture
def mirror(source, target, topic_name):
    return StandInMirror(source, target, topic_name)


def test_idle_mirror_all_three_lags_exactly_zero(source, target, mirror):
    produce_numbered(source.bootstrap, mirror.topic, 30, PARTS)
    produce_numbered(target.bootstrap, f"east.{mirror.topic}", 30, PARTS)
    mirror.state(committed=10, acked=10, read=10)
    sampler = Sampler(config_from_dict(flow_config(source, target, mirror.topic)))
    try:
        view = sample_until(sampler, lambda v: all(r["acked_next"] == 10 for r in v.rows()))
        assert lags(view) == [(0, 0, 0)] * PARTS
        assert [r["time_lag_s"] for r in view.rows()] == [0.0] * PARTS
        assert [r["status"] for r in view.rows()] == ["OK"] * PARTS and view.status_name == "OK"
        assert not any(r["target_behind"] for r in view.rows())
    finally:
        sampler.close()


def test_stopped_mirror_with_k_records(source, target, mirror):
    produce_numbered(source.bootstrap, mirror.topic, 30, PARTS)
    produce_numbered(target.bootstrap, f"east.{mirror.topic}", 30, PARTS)
    mirror.state(committed=10, acked=10, read=10)
    k = 12
    produced_at = time.time()
    produce_numbered(source.bootstrap, mirror.topic, k, PARTS, start=30)  # mirror stopped: nothing moves
    sampler = Sampler(config_from_dict(flow_config(source, target, mirror.topic)))
    try:
        view = sample_until(sampler, lambda v: all(r["acked_next"] == 10 for r in v.rows()))
        rows = view.rows()
        assert sum(r["true_lag"] for r in rows) == k and sum(r["committed_lag"] for r in rows) == k
        age = time.time() - produced_at
        for r in rows:  # time lag ≈ age of the oldest unmirrored record (exact mode reads its timestamp)
            assert 0 <= r["time_lag_s"] <= age + 1.0
    finally:
        sampler.close()


def test_three_lags_side_by_side_invariant(source, target, mirror):
    produce_numbered(source.bootstrap, mirror.topic, 30, PARTS)  # end 10 per partition
    produce_numbered(target.bootstrap, f"east.{mirror.topic}", 3 * 8, PARTS)
    mirror.state(committed=6, acked=8, read=9)
    sampler = Sampler(config_from_dict(flow_config(source, target, mirror.topic)))
    try:
        view = sample_until(sampler, lambda v: all(r["read_position"] == 9 for r in v.rows()))
        assert lags(view) == [(4, 1, 2)] * PARTS  # kafka-consumer-groups says 4, the consumer says 1, truth 2
        # a commit newer than the sync: a commit implies an ack
        commit(source.bootstrap, GROUP, mirror.topic, {p: 9 for p in range(PARTS)})
        view = sampler.sample().views[0]
        assert lags(view) == [(1, 1, 1)] * PARTS
    finally:
        sampler.close()


def test_target_cross_check_flags_missing_target_records(source, target, mirror):
    produce_numbered(source.bootstrap, mirror.topic, 30, PARTS)
    produce_numbered(target.bootstrap, f"east.{mirror.topic}", 3 * 4, PARTS)  # only 4 per partition there
    mirror.state(committed=10, acked=10, read=10, downstream=9)  # the sync claims offset 9 is on the target
    sampler = Sampler(config_from_dict(flow_config(source, target, mirror.topic)))
    try:
        wait_for_syncs(sampler, mirror.topic, lambda s: s.downstream_offset == 9)
        view = sampler.sample().views[0]
        assert all(r["target_behind"] for r in view.rows()), [
            (r["target_end"], r["target_behind"]) for r in view.rows()
        ]
    finally:
        sampler.close()


def test_interpolated_time_lag(source, target, mirror):
    mirror.state(committed=0, acked=0, read=0)
    cfg = config_from_dict(flow_config(source, target, mirror.topic, time_lag_mode="interpolate"))
    sampler = Sampler(cfg)
    try:
        sample_until(sampler, lambda v: all(r["acked_next"] == 0 for r in v.rows()))
        first = time.time()
        produce_numbered(source.bootstrap, mirror.topic, 30, PARTS)
        sampler.sample()
        time.sleep(1.0)
        view = sampler.sample().views[0]
        elapsed = time.time() - first
        for r in view.rows():
            # the records are dated between the sample before and the sample after they appeared
            assert r["time_lag_s"] is not None and 0.0 <= r["time_lag_s"] <= elapsed + 0.5
    finally:
        sampler.close()


def test_statuses_from_sampled_behaviour(source, target, mirror):
    produce_numbered(source.bootstrap, mirror.topic, 30, PARTS)
    mirror.state(committed=5, acked=5, read=5)
    sampler = Sampler(config_from_dict(flow_config(source, target, mirror.topic)))
    try:
        sample_until(sampler, lambda v: all(r["acked_next"] == 5 for r in v.rows()))
        # paused with lag but alive (a new sync each cycle, positions unchanged) → STALL once the window is full
        # of repeated commits (a commit interval apart; the tracker reads each sync asynchronously)
        deadline = time.monotonic() + 20
        while True:
            view = sampler.sample().views[0]
            if {r["status"] for r in view.rows()} == {"STALL"}:
                break
            assert time.monotonic() < deadline, view.rows()
            mirror.state(committed=None, acked=5, read=5)
            time.sleep(0.6)
        assert view.status_name == "ERR"
        # stopped: no commits, no syncs → STOP once the silence outlasts the window's span
        view = sample_until(sampler, lambda v: {r["status"] for r in v.rows()} == {"STOP"})
        assert {r["status"] for r in view.rows()} == {"STOP"} and view.status_name == "ERR"
        # offsets reset backwards → REWIND
        commit(source.bootstrap, GROUP, mirror.topic, {p: 2 for p in range(PARTS)})
        view = sampler.sample().views[0]
        assert {r["status"] for r in view.rows()} == {"REWIND"}
        # catching up → OK; producer faster than the mirror → WARN
        for committed in (6, 7, 8):
            commit(source.bootstrap, GROUP, mirror.topic, {p: committed for p in range(PARTS)})
            view = sampler.sample().views[0]
        assert view.status_name == "OK"
        for i, committed in enumerate((9, 10, 11)):
            produce_numbered(source.bootstrap, mirror.topic, 3 * PARTS, PARTS, start=100 + 10 * i)
            commit(source.bootstrap, GROUP, mirror.topic, {p: committed for p in range(PARTS)})
            view = sampler.sample().views[0]
        assert {r["status"] for r in view.rows()} == {"WARN"} and view.status_name == "WARN"
        # caught up → OK
        commit(source.bootstrap, GROUP, mirror.topic, {p: 10**6 for p in range(PARTS)})
        assert sampler.sample().views[0].status_name == "OK"
    finally:
        sampler.close()


def test_plain_watched_group_and_notfound(source, target, topic_name):
    create_topic(source.bootstrap, topic_name, 2)
    produce_numbered(source.bootstrap, topic_name, 20, 2)
    commit(source.bootstrap, "billing", topic_name, {0: 4, 1: 10})
    cfg = config_from_dict(
        {
            "clusters": {"east": source.config(), "west": target.config()},
            "monitor": {
                "window": 3,
                "groups": [{"cluster": "east", "group": "billing"}, {"cluster": "west", "group": "nobody-here"}],
            },
        }
    )
    sampler = Sampler(cfg)
    try:
        snap = sampler.sample()
        billing, nobody = snap.views
        rows = [r for r in billing.rows() if r["topic"] == topic_name]
        assert [(r["partition"], r["committed_lag"]) for r in rows] == [(0, 6), (1, 0)]
        assert "true_lag" not in rows[0]  # a plain group has committed lag only
        assert nobody.status_name == "NOTFOUND"
    finally:
        sampler.close()


# ------------------------------------------------------------------------------- CLI


def test_cli_lag_table_and_json(source, target, mirror, write_config, capsys):
    produce_numbered(source.bootstrap, mirror.topic, 30, PARTS)
    produce_numbered(target.bootstrap, f"east.{mirror.topic}", 24, PARTS)
    mirror.state(committed=6, acked=8, read=9)
    path = write_config(flow_config(source, target, mirror.topic))
    with pytest.raises(SystemExit) as exit_info:
        main(["lag", "--config", str(path), "--samples", "1"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "COMMITTED-LAG" in out and "TRUE-LAG" in out and "READ-LAG" in out and "TOTAL 3 partitions" in out
    assert "committed-lag 12" in out and "read-lag 3" in out and "true-lag 6" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["lag", "--config", str(path), "--flow", "ew", "--json", "--samples", "2", "--every", "0.2"])
    body = json.loads(capsys.readouterr().out)
    assert exit_info.value.code == 0
    part = body["flows"][0]["partitions"][0]
    assert (part["committed_lag"], part["read_lag"], part["true_lag"]) == (4, 1, 2)


@pytest.mark.parametrize(
    "args,message",
    [
        (["lag", "--config", "{path}", "--flow", "nope"], "flow 'nope' is not defined"),
        (["lag", "--config", "/does/not/exist.yaml"], "cannot read config file"),
        (["lag"], "Missing option '--config'"),
        (["run", "--config", "{bad}"], "monitor.window"),
    ],
)
def test_cli_bad_input_is_one_line_and_nonzero(mirror_config, write_config, capsys, args, message):
    path = write_config(mirror_config)
    bad = write_config({**mirror_config, "monitor": {"window": 1}}, "bad.yaml")
    args = [a.format(path=path, bad=bad) for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    err = capsys.readouterr().err
    assert exit_info.value.code != 0
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_coverage_it_cannot_read_is_unknown_with_why_not_the_last_answer(source, target, mirror, monkeypatch):
    """Fail closed: translation coverage that could not be read (the source's groups: here its address answers
    nothing) is unknown, with the reason, never the previous refresh's answer presented as now's."""
    from mirrorwatch.monitor import coverage
    from mirrorwatch.monitor.kafka_io import ClusterReader

    monkeypatch.setattr(coverage, "REFRESH_S", 0.0)  # every refresh reads (the service reads every 30 s)
    body = flow_config(source, target, mirror.topic)
    body["flows"]["ew"]["checkpoint_groups"] = [f"app-{mirror.topic}"]
    commit(source.bootstrap, f"app-{mirror.topic}", mirror.topic, {0: 0})
    cfg = config_from_dict(body)
    watch = coverage.CoverageWatch(cfg, "ew", cfg.flows["ew"])
    keys = {(mirror.topic, p) for p in range(PARTS)}
    reader = ClusterReader("east", cfg.clusters["east"], 10)
    reader.topics()
    read = watch.refresh(reader, keys, {}, int(time.time() * 1000))
    assert read is not None and read["groups"] == 1 and "error" not in read, read
    with socket.socket() as held:  # a port nothing answers on: bound, never listening
        held.bind(("127.0.0.1", 0))
        body["clusters"]["east"] = {"bootstrap.servers": f"127.0.0.1:{held.getsockname()[1]}"}
        away = ClusterReader("east", config_from_dict(body).clusters["east"], 2)
        unread = watch.refresh(away, keys, {}, int(time.time() * 1000))
    assert unread is not None and unread["ratio"] is None and unread["groups"] == 0, unread
    assert unread["error"].startswith("cannot read the groups on 'east': "), unread


def test_a_metadata_request_left_unanswered_is_asked_again_of_a_new_client(source, mirror_config, topic_name):
    """A node starting a clean shutdown never answers a request it already has (its request handlers stop first),
    while the other nodes would: one timeout made a three-node target in a rolling restart "unreachable" for a
    sample, and the inhibit-only MirrorwatchFlowClusterUnreachable fired. Here the broker is frozen past the first
    request's timeout and thawed within the second's: the sample reads the topics."""
    local_only(source)
    config = config_from_dict(mirror_config)
    create_topic(source.bootstrap, topic_name, 1)
    reader = ClusterReader("east", config.clusters["east"], timeout_s=3.0)
    assert topic_name in reader.topics()
    pid = source.local.proc.pid
    os.kill(pid, signal.SIGSTOP)
    thaw = threading.Timer(3.5, os.kill, (pid, signal.SIGCONT))  # after the first 3 s, early in the second 3 s
    thaw.start()
    try:
        assert topic_name in reader.topics()
    finally:
        thaw.cancel()
        os.kill(pid, signal.SIGCONT)


# (case, failed samples in a row, the cluster was reached before) → what the sample says
REACHABLE = [
    ("answered", 0, True, True),
    ("answered the first time", 0, False, True),
    ("one failed sample after answers: given one more cycle", 1, True, True),
    ("two in a row: unreachable", 2, True, False),
    ("never reached (one-shot command, starting monitor): at once", 1, False, False),
]


@pytest.mark.parametrize("case,failures,reached,expected", REACHABLE, ids=[c[0] for c in REACHABLE])
def test_reported_reachable(case, failures, reached, expected):
    assert reported_reachable(failures, reached) is expected
