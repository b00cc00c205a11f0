"""Leader election (core/leader.py) and the monitor's notified-status record (monitor/notified.py): the pure rules
table-driven, the election on the real local cluster in one process (the two-process handovers, SIGKILL and
SIGSTOP, are tests/test_monitor_ha.py)."""

from __future__ import annotations

import time
import uuid

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from harness.helpers import admin
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.leader import AlwaysLeader, Election, Lease, election_for, export_leader_gauge
from mirrorwatch.core.status import GroupStatus as G
from mirrorwatch.monitor.notified import PREFIX, parse_records, record_key, record_value, takeover_changes

# (steps, expected holds() after the last step, expected term). Steps on a lease of 3 s:
# ("assign",), ("revoke",), ("refute",), ("confirm", sent_at, now), ("at", now) just moves the clock.
LEASE_CASES = [
    ("assigned, never confirmed", [("assign",), ("at", 0.1)], False, 0),
    ("confirmed commit", [("assign",), ("confirm", 1.0, 1.1), ("at", 2.0)], True, 1),
    ("lease counted from the send", [("assign",), ("confirm", 1.0, 1.1), ("at", 4.0)], False, 1),
    (
        "renewed before it lapsed: same term",
        [("assign",), ("confirm", 1, 1.1), ("confirm", 2, 2.1), ("at", 4.5)],
        True,
        1,
    ),
    ("lapsed, then renewed: a new term", [("assign",), ("confirm", 1, 1.1), ("confirm", 5, 5.1), ("at", 5.2)], True, 2),
    # a process frozen past the session: its clock ran on, and a commit sent before the freeze does not count
    ("thawed after a freeze", [("assign",), ("confirm", 1, 1.1), ("at", 20.0)], False, 1),
    ("an answer slower than the lease", [("assign",), ("confirm", 1, 4.5)], False, 0),
    ("revoked", [("assign",), ("confirm", 1, 1.1), ("revoke",), ("at", 1.2)], False, 1),
    ("commit refused: expelled", [("assign",), ("confirm", 1, 1.1), ("refute",), ("at", 1.2)], False, 1),
    ("a commit accepted after the revoke", [("assign",), ("revoke",), ("confirm", 1, 1.1)], False, 0),
    (
        "an older answer never shortens it",
        [("assign",), ("confirm", 2, 2.1), ("confirm", 1, 2.2), ("at", 4.5)],
        True,
        1,
    ),
]


@pytest.mark.parametrize("steps,holds,term", [c[1:] for c in LEASE_CASES], ids=[c[0] for c in LEASE_CASES])
def test_lease(steps, holds, term):
    lease, now = Lease(lease_s=3.0), 0.0
    for step in steps:
        if step[0] == "assign":
            lease.assigned()
        elif step[0] == "revoke":
            lease.revoked()
        elif step[0] == "refute":
            lease.refuted()
        elif step[0] == "confirm":
            now = step[2]
            lease.confirmed(step[1], now)
        else:
            now = step[1]
    assert (lease.holds(now), lease.term) == (holds, term)


A, B, C = ("east", "billing"), ("east", "mirrorwatch-ew"), ("west", "audit")
TAKEOVER_CASES = [
    ("nothing notified, all OK", {}, {A: G.OK, B: G.OK}, []),
    ("nothing notified, one unhealthy", {}, {A: G.ERR, B: G.OK}, [(A, G.OK)]),
    ("the old leader notified it", {A: G.ERR}, {A: G.ERR}, []),
    ("changed after the old leader's last POST", {A: G.ERR}, {A: G.OK, B: G.WARN}, [(A, G.ERR), (B, G.OK)]),
    ("changed again to another bad status", {A: G.WARN}, {A: G.ERR}, [(A, G.WARN)]),
    ("a group no longer watched is not notified", {C: G.ERR}, {A: G.OK}, []),
]


@pytest.mark.parametrize("notified,current,owed", [c[1:] for c in TAKEOVER_CASES], ids=[c[0] for c in TAKEOVER_CASES])
def test_takeover_changes(notified, current, owed):
    assert takeover_changes(notified, current) == owed


def test_notified_records_round_trip():
    records = {
        record_key(A): record_value(A, G.ERR, 1),
        record_key(("east", "a/b")): record_value(("east", "a/b"), G.WARN, 2),
        f"{PREFIX}east/broken": b"not json",
        "other/key": b"{}",
    }
    assert record_value(A, G.OK, 3) is None  # OK is the implicit status: a tombstone
    assert parse_records(records) == {A: G.ERR, ("east", "a/b"): G.WARN}


def test_disabled_is_always_the_leader():
    config = config_from_dict({"clusters": {"east": {"bootstrap.servers": "127.0.0.1:1"}}})
    election = election_for(config, "monitor")
    assert isinstance(election, AlwaysLeader) and election.state() == (True, 1)
    registry = CollectorRegistry()
    export_leader_gauge(election, registry)
    assert generate_latest(registry).endswith(b"\nmirrorwatch_is_leader 1.0\n")


def _wait(check, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s} s")


def members(bootstrap: str, group: str) -> list:
    client = admin(bootstrap)  # keep a reference: a collected client fails its pending futures
    return client.describe_consumer_groups([group])[group].result(10).members


def test_two_members_one_leader_and_a_quick_handover_on_stop(source):
    """Two elections of one service on the real cluster: exactly one leads; one that stops leaves the group, so the
    other leads at once (not after the session timeout); the shared records are read back as written."""
    config = config_from_dict(
        {
            "clusters": {"east": source.config()},
            "leader": {"enabled": True, "session_timeout_s": 6, "topic": f"mw-leader-{uuid.uuid4().hex[:6]}"},
        }
    )
    service = f"test-{uuid.uuid4().hex[:6]}"
    first, second = Election(config, service).start(), Election(config, service).start()
    try:
        leader = _wait(lambda: [e for e in (first, second) if e.is_leader()], 60, "a leader")
        assert len(leader) == 1
        leader, follower = leader[0], second if leader[0] is first else first
        time.sleep(2 * leader.renew_s)  # renewals go on, the follower stays a follower
        assert leader.is_leader() and not follower.is_leader()

        assert leader.write_record(f"{PREFIX}x", b"1") and leader.write_record(f"{PREFIX}y", b"2")
        assert leader.write_record(f"{PREFIX}x", None) and leader.write_record("canary/other", b"3")
        assert follower.read_records(PREFIX) == {f"{PREFIX}y": b"2"}

        leader.stop()
        assert not leader.is_leader()
        # it left the group (rather than leaving the other to wait out the session timeout)
        assert len(members(source.bootstrap, leader.group)) == 1
        _wait(follower.is_leader, 60, "the follower to lead")
    finally:
        first.stop()
        second.stop()


def test_a_session_timeout_the_brokers_refuse_is_one_line(source):
    config = config_from_dict(
        {
            "clusters": {"east": source.config()},
            "leader": {"enabled": True, "session_timeout_s": 1, "topic": f"mw-leader-{uuid.uuid4().hex[:6]}"},
        }
    )
    election = Election(config, f"test-{uuid.uuid4().hex[:6]}").start()
    try:
        fatal = _wait(lambda: election.fatal, 60, "the refusal")
        assert "leader.session_timeout_s=1 s" in fatal and "group.min.session.timeout.ms" in fatal
        assert not election.is_leader()
    finally:
        election.stop()
