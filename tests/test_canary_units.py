"""Canary bookkeeping and reporting without Kafka: matching, lost vs late, duplicates, reorders, the JSON."""

from __future__ import annotations

import pytest

from mirrorwatch.canary.events import BASIS_LOG_APPEND, Arrival
from mirrorwatch.canary.report import CheckResult
from mirrorwatch.canary.status import worst
from mirrorwatch.canary.tracker import Tracker
from mirrorwatch.core.records import CanaryEvent

from .support.canary_json import check_json_schema


def arrive(tracker, seq, partition, produced, arrived, run="r1", source="east"):
    tracker.arrived(Arrival(CanaryEvent(run, seq, produced, source, partition), partition, arrived, BASIS_LOG_APPEND))


def test_all_arrive_under_warn_is_ok_with_latencies():
    t = Tracker("r1", "east", warn_s=1, crit_s=5)
    t.sent(1, [0, 1], 1000)
    arrive(t, 1, 0, 1000, 1040)
    assert t.take_resolved() == []
    arrive(t, 1, 1, 1000, 1070)
    (probe,) = t.take_resolved()
    assert probe.status == "OK" and probe.latencies_ms == {0: 40, 1: 70}
    assert t.take_latencies() == [0.04, 0.07]


def test_slow_event_is_warning():
    t = Tracker("r1", "east", warn_s=1, crit_s=5)
    t.sent(1, [0], 0)
    arrive(t, 1, 0, 0, 1500)
    assert t.take_resolved()[0].status == "WARNING"


def test_missing_at_crit_is_overdue_not_lost_then_late_when_it_arrives():
    t = Tracker("r1", "east", warn_s=1, crit_s=5)
    t.sent(1, [0, 1, 2], 0)
    arrive(t, 1, 1, 0, 100)
    t.expire(4999)
    assert t.take_resolved() == []
    t.expire(5000)
    (probe,) = t.take_resolved()
    assert probe.status == "CRITICAL" and probe.missing == probe.overdue == (0, 2) and t.lost == 0
    assert (t.overdue_events, t.oldest_overdue_s(8000)) == (2, 8.0)
    arrive(t, 1, 0, 0, 9000)  # the mirror came back
    t.expire(20000)
    assert (t.lost, t.late, t.duplicates, t.reordered, t.overdue_events) == (0, 1, 0, 0, 1)


def test_duplicate_counted_once_and_not_as_reorder():
    t = Tracker("r1", "east", warn_s=1, crit_s=5)
    for seq in (1, 2):
        t.sent(seq, [0], seq * 1000)
        arrive(t, seq, 0, seq * 1000, seq * 1000 + 10)
    arrive(t, 1, 0, 1000, 2100)  # at-least-once replay of seq 1
    assert (t.duplicates, t.reordered) == (1, 0) and t.anomaly_pending
    t.sent(3, [0], 3000)
    arrive(t, 3, 0, 3000, 3010)
    assert t.take_resolved()[-1].status == "WARNING" and not t.anomaly_pending  # the anomaly marks the next probe


def test_lower_sequence_after_higher_is_reordered():
    t = Tracker("r1", "east", warn_s=1, crit_s=5)
    t.sent(1, [0], 0)
    t.sent(2, [0], 1000)
    arrive(t, 2, 0, 1000, 1100)
    arrive(t, 1, 0, 0, 1101)
    assert (t.reordered, t.duplicates) == (1, 0)


def test_own_only_ignores_other_runs_but_check_mode_judges_them():
    service, check = Tracker("r1", "east", 1, 5, own_only=True), Tracker("r1", "east", 1, 5, own_only=False)
    for t in (service, check):
        arrive(t, 5, 0, 0, 10, run="other")
        arrive(t, 4, 0, 0, 11, run="other")
        arrive(t, 4, 0, 0, 12, run="other")
    assert (service.reordered, service.duplicates) == (0, 0)
    assert (check.reordered, check.duplicates) == (1, 1)


def test_other_source_is_ignored():
    t = Tracker("r1", "east", 1, 5, own_only=False)
    arrive(t, 1, 0, 0, 10, source="west")
    arrive(t, 1, 0, 0, 10, source="west")
    assert t.duplicates == 0


def test_unsent_everywhere_resolves_unknown():
    t = Tracker("r1", "east", 1, 5)
    t.sent(1, [0, 1], 0)
    t.unsent(1, 0, "boom")
    t.unsent(1, 1, "boom")
    assert t.take_resolved()[0].status == "UNKNOWN" and t.lost == 0


def test_old_keys_are_forgotten():
    t = Tracker("r1", "east", 1, 5, retain_s=60)
    t.sent(1, [0], 0)
    arrive(t, 1, 0, 0, 10)
    t.expire(70_000)
    assert not t._seen and not t._highest


def test_worst():
    assert (
        worst("OK", "WARNING") == "WARNING" and worst("CRITICAL", "UNKNOWN") == "UNKNOWN" and worst(None) == "UNKNOWN"
    )


def _result(**kw) -> CheckResult:
    base = dict(
        flow="ew",
        source="east",
        target="west",
        source_topic="mw.canary",
        target_topic="east.mw.canary",
        run_id="abc",
        timeout_s=30.0,
        warn_latency_s=5.0,
        heartbeat_max_age_s=60.0,
        partitions=[0, 1, 2],
    )
    base.update(kw)
    r = CheckResult(**base)
    r.judge()
    return r


def test_lines_read_as_the_issue_asks():
    ok = _result(latencies_ms={0: 184.2, 1: 150.0, 2: 90.0}, heartbeat_age_s=0.8)
    assert ok.line() == "OK east→west round trip 184 ms (3/3 partitions), heartbeat 0.8 s" and ok.exit_code == 0
    crit = _result(missing=[0, 1, 2], overdue_for_s=30.2, heartbeat_age_s=95.0)
    assert (
        crit.line()
        == "CRITICAL east→west 0/3 canary events mirrored within 30 s (overdue partitions 0, 1, 2: 30 s and counting); last heartbeat 95 s ago (limit 60 s)"
    )
    assert crit.exit_code == 2
    lost = _result(latencies_ms={2: 10}, missing=[0, 1], lost_partitions=[1], overdue_for_s=30.4, heartbeat_age_s=1.0)
    assert lost.status == "CRITICAL" and lost.line() == (
        "CRITICAL east→west 1/3 canary events mirrored within 30 s (lost partition 1: a later event arrived "
        "without it; overdue partition 0: 30 s and counting); last heartbeat 1 s ago"
    )
    warn = _result(latencies_ms={0: 10, 1: 10, 2: 10}, duplicates=1, heartbeat_age_s=1.0)
    assert warn.status == "WARNING" and "1 duplicate" in warn.line() and warn.exit_code == 1
    old_beat = _result(latencies_ms={0: 10, 1: 10, 2: 10}, heartbeat_age_s=61.0)
    assert old_beat.status == "CRITICAL" and "last heartbeat 61 s ago (limit 60 s)" in old_beat.line()
    partly_refused = _result(
        latencies_ms={0: 10, 1: 10}, unsent={2: "Broker: Not enough in-sync replicas"}, heartbeat_age_s=1.0
    )
    assert partly_refused.status == "WARNING" and "1 not written to the source" in partly_refused.line()
    unknown = _result(error="cannot reach source cluster 'east' at 127.0.0.1:1: refused")
    assert (
        unknown.line() == "UNKNOWN east→west cannot reach source cluster 'east' at 127.0.0.1:1: refused"
        and unknown.exit_code == 3
    )


def test_json_schema_from_a_result():
    body = _result(
        latencies_ms={0: 12.5, 1: 13.0}, missing=[2], heartbeat_age_s=0.5, timings_ms={"total": 3.0}
    ).to_json()
    check_json_schema(body)
    assert body["status"] == "CRITICAL" and body["missing_partitions"] == [2] and body["partitions"][2]["seen"] is False
    assert [p["state"] for p in body["partitions"]] == ["arrived", "arrived", "overdue"]
    assert (body["overdue_partitions"], body["lost_partitions"], body["overdue"], body["lost"]) == ([2], [], 1, 0)
    lost = _result(
        latencies_ms={0: 1.0},
        missing=[1, 2],
        lost_partitions=[2],
        lost=1,
        overdue_for_s=30.1,
        timings_ms={"total": 1.0},
    )
    body = lost.to_json()
    check_json_schema(body)
    assert [p["state"] for p in body["partitions"]] == ["arrived", "overdue", "lost"] and body["overdue_for_s"] == 30.1
    assert (body["overdue_partitions"], body["lost_partitions"], body["overdue"], body["lost"]) == ([1], [2], 1, 1)


def test_canary_imports_only_the_core():
    import subprocess
    import sys

    code = (
        "import sys, mirrorwatch.canary.cli, mirrorwatch.canary.check, mirrorwatch.canary.service; "
        "bad = [m for m in sys.modules if m.startswith(('mirrorwatch.mirror', 'mirrorwatch.monitor'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "previous_ends, previous_next, next_, stuck",
    [
        (None, None, {0: 5}, False),  # first look: nothing to compare with
        ({0: 5, 1: 7}, {0: 5, 1: 7}, {0: 5, 1: 7}, False),  # caught up, nothing new: a stopped mirror looks so
        ({0: 9, 1: 7}, {0: 5, 1: 7}, {0: 5, 1: 7}, True),  # records 5..8 were there and are still unread
        ({0: 9, 1: 7}, {0: 5, 1: 7}, {0: 6, 1: 7}, False),  # it read one: slow, not stuck
        ({0: 9, 1: 9}, {0: 5, 1: 5}, {0: 5, 1: 6}, False),  # moving on one partition: the client fetches
        ({0: 5}, {0: 5}, {0: 5}, False),  # a record arriving after the previous look does not count yet
        ({0: 9}, {}, {0: 5}, False),  # a partition the reader did not have then: no verdict on it
    ],
)
def test_reader_stuck(previous_ends, previous_next, next_, stuck):
    from mirrorwatch.canary.reader_guard import reader_stuck

    assert reader_stuck(previous_ends, previous_next, next_) is stuck
