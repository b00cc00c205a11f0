"""Real clusters, real faults (issue 34): on ONE pair of three-node KRaft clusters, our engine at-least-once, our
engine exactly-once and MirrorMaker 2 (dedicated mode) mirror side by side under steady load through one fault plan,
and an independent oracle (tests/support/oracle.py: no engine code) judges what each target holds.

The plan, each fault followed by a wait for full ISR on both clusters and for every contestant to have mirrored all
the source had acknowledged (polled, never slept):
  a clean rolling restart of every source node, then of every target node; SIGKILL of the leader of a mirrored source
  partition, then its restart; SIGKILL of the node that coordinates the at-least-once mirror's group (on the source),
  of the exactly-once mirror's transaction coordinator and of its positions group's coordinator (on the target), each
  restarted; the target's active controller SIGKILLed and restarted; the leader of a target partition frozen
  (SIGSTOP) past its broker session, then thawed.
The bars (docs/reliability.md says what each costs a user): 0 lost and per-key order kept for everyone; exactly-once
0 duplicates for a read_committed reader; at-least-once and MM2 duplicates per fault within IN_FLIGHT_BOUND; the
monitor's true lag never below the truth (tests/support/lag_floor.py) for either engine's flow.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaException

from harness.mirror_harness import wait_until
from mirrorwatch.core.naming import positions_group

from .support.fault_rig import COMMIT_INTERVAL_S, CONTESTANTS, PARTITIONS, RATE, Measured, Rig
from .support.lag_floor import TargetCopies, below_the_floor
from .support.oracle import Verdict, judge
from .support.paging_watch import CANARY_CRITICAL

# the whole plan runs in the module's fixtures, inside its first test's setup: this bound is the plan's
pytestmark = pytest.mark.timeout(1800)

# Duplicates one fault may cause an at-least-once copier that keeps running: what it delivered since its last
# successful commit (one commit interval of traffic) plus what was in flight when the fault hit (up to one more
# second of traffic: a produce request's retries through a leader change, a commit that timed out).
IN_FLIGHT_BOUND = int(RATE * (COMMIT_INTERVAL_S + 1.0))


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    started = Rig(tmp_path_factory.mktemp("faults"))
    try:
        started.start()
        yield started
    finally:
        started.stop()


def _rolling(cluster):
    def fault() -> None:
        for node in cluster:
            cluster.restart_node(node.node_id)
            cluster.wait_in_sync(180)

    return fault


def _kill_and_restart(cluster, which, moved_from):
    """SIGKILL the node ``which()`` names, wait until ``moved_from(node)`` says its role went elsewhere, restart it."""

    def fault() -> None:
        node_id = which()
        cluster.node(node_id).kill()
        try:
            wait_until(lambda: moved_from(node_id), 60, 0.3, f"{cluster.name}: node {node_id}'s role taken over")
        finally:
            cluster.start_node(node_id)

    return fault


def _freeze_past_session(cluster, which):
    def fault() -> None:
        node_id = which()
        node = cluster.node(node_id)
        node.freeze()
        try:
            wait_until(lambda: _fenced(cluster, node_id), 60, 0.5, f"{cluster.name}: node {node_id} fenced")
        finally:
            node.thaw()

    return fault


def _fenced(cluster, node_id) -> bool:
    try:
        return node_id not in cluster.brokers()
    except KafkaException:  # the metadata request can go to the frozen node itself and time out: ask again
        return False


def _changed(read, node_id) -> bool:
    try:
        return read() not in (node_id, -1)
    except Exception:  # noqa: BLE001 - a coordinator moving answers with errors for a moment: ask again
        return False


@pytest.fixture(scope="module")
def plan(rig) -> list[Measured]:
    east, west = rig.east, rig.west
    alo_topic, eos_target = rig.topics["alo"], rig.target_topic("eos")
    faults = [
        ("rolling restart of the source", _rolling(east)),
        ("rolling restart of the target", _rolling(west)),
        (
            "source partition leader SIGKILLed",
            _kill_and_restart(
                east, lambda: east.leader_of(alo_topic, 0), lambda n: _changed(lambda: east.leader_of(alo_topic, 0), n)
            ),
        ),
        (
            "mirror group coordinator SIGKILLed",
            _kill_and_restart(
                east,
                lambda: east.group_coordinator(rig.groups["alo"]),
                lambda n: _changed(lambda: east.group_coordinator(rig.groups["alo"]), n),
            ),
        ),
        (
            "transaction coordinator SIGKILLed",
            _kill_and_restart(
                west,
                lambda: west.transaction_coordinator(rig.transactional_id),
                lambda n: _changed(lambda: west.transaction_coordinator(rig.transactional_id), n),
            ),
        ),
        (
            # its static member's session times out while the coordinator moves, and librdkafka fences that consumer
            # for good (mirror/consumer_guard.py): the mirror stood still here until fatal errors replaced it
            "exactly-once positions group coordinator SIGKILLed",
            _kill_and_restart(
                west,
                lambda: west.group_coordinator(positions_group(rig.groups["eos"])),
                lambda n: _changed(lambda: west.group_coordinator(positions_group(rig.groups["eos"])), n),
            ),
        ),
        (
            "target active controller SIGKILLed",
            _kill_and_restart(west, west.active_controller, lambda n: _changed(west.active_controller, n)),
        ),
        (
            "target partition leader frozen past its session",
            _freeze_past_session(west, lambda: west.leader_of(eos_target, 0)),
        ),
    ]
    for name, fault in faults:
        measured = rig.run_fault(name, fault)
        print(f"fault: {json.dumps(measured.__dict__)}")
    return rig.measured


@pytest.fixture(scope="module")
def verdicts(rig, plan) -> dict[str, Verdict]:
    acknowledged = {name: writer.finish() for name, writer in rig.writers.items()}
    rig.current = "the end of the plan"
    rig.wait_caught_up(acknowledged, timeout_s=180)
    print(f"stalled: {rig.stalled}")
    out = {name: judge(acknowledged[name], rig.readers[name].all()) for name in CONTESTANTS}
    for name, verdict in out.items():
        print(f"verdict {name}: {verdict}")
    return out


@pytest.mark.parametrize("contestant", ["alo", "eos"])
def test_the_monitors_true_lag_is_never_below_the_truth(verdicts, rig, contestant):
    """Every sample the monitor gave during the plan, against the truth's floor (tests/support/lag_floor.py: the
    source's end before the sample, less the distinct records below the target's last stable offset after it)."""
    reader = rig.readers[contestant]
    copies = [TargetCopies(reader.offsets[p], reader.received[p], reader.read_to(p)) for p in range(PARTITIONS)]
    reported = rig.monitor.reported(contestant)
    checked, below = below_the_floor(reported, rig.truth.sources[contestant], rig.truth.stables[contestant], copies)
    assert checked >= len(reported) // 2 > 0, f"{checked} of {len(reported)} samples had a floor"
    assert not below, f"{len(below)} of {checked} samples below the truth: {below[:10]}"


@pytest.mark.parametrize("contestant", ["alo", "eos", "mm2"])
def test_nothing_is_lost_and_every_key_keeps_its_order(verdicts, rig, contestant):
    verdict = verdicts[contestant]
    assert verdict.records > RATE * 60, verdict  # the plan ran under load
    assert (verdict.lost, verdict.order_violations, verdict.gaps) == (0, 0, 0), (str(verdict), rig.stalled)


def test_exactly_once_duplicates_nothing_for_a_read_committed_reader(verdicts, plan):
    assert verdicts["eos"].duplicates == 0, (str(verdicts["eos"]), [(m.fault, m.duplicates.get("eos")) for m in plan])


@pytest.mark.parametrize("contestant", ["alo", "mm2"])
def test_at_least_once_duplicates_stay_within_one_fault_in_flight_window(plan, contestant):
    over = [(m.fault, m.duplicates.get(contestant)) for m in plan if m.duplicates.get(contestant, 0) > IN_FLIGHT_BOUND]
    assert not over, f"{contestant}: more than {IN_FLIGHT_BOUND} duplicates in: {over}"


def test_the_plan_covered_every_fault_on_three_partitions(plan, rig):
    assert [m.fault for m in plan][:2] == ["rolling restart of the source", "rolling restart of the target"]
    assert len(plan) == 8 and all(len(r.received) == PARTITIONS for r in rig.readers.values())


@pytest.mark.parametrize("fault", ["rolling restart of the source", "rolling restart of the target"])
def test_a_clean_rolling_restart_never_turns_the_evaluator_err(plan, rig, fault):
    seen = rig.monitor.during(fault)
    statuses: dict[tuple[str, str], int] = {}
    for s in seen:
        statuses[(s.flow, s.status)] = statuses.get((s.flow, s.status), 0) + 1
    print(f"monitor during {fault}: {statuses}")
    for reasons in sorted({s.reasons for s in seen if s.status != "OK"})[:5]:
        print(f"  not OK because: {reasons}")
    faults = [m.fault for m in plan]
    died = rig.monitor_died_during
    assert died is None or faults.index(died) > faults.index(fault), f"the monitor died: {rig.monitor.exit_said()}"
    assert len(seen) >= 10, statuses  # it answered all along
    err = [s for s in seen if s.status == "ERR"]
    assert not err, f"{len(err)} ERR answers, e.g. {err[:3]}"


@pytest.mark.parametrize("fault", ["rolling restart of the source", "rolling restart of the target"])
def test_a_clean_rolling_restart_pages_nobody(plan, rig, fault):
    """The shipped rules and Alertmanager configuration, unchanged: no notification of any kind, no alert firing,
    nothing still pending once the fault is over, and the canary never CRITICAL."""
    looks = rig.paging.during(fault)
    pending = sorted({a for look in looks for a in look.alerts if a.endswith(" pending")})
    print(f"alerts pending at some point during {fault}: {pending or 'none'}")
    assert len(looks) >= 10, "Prometheus answered all along"
    firing = sorted({a for look in looks for a in look.alerts if a.endswith(" firing")})
    assert not firing, f"firing during {fault}: {firing}\n{_warnings(rig)}"
    assert rig.still_alerting[fault] == (), f"still active once {fault} was over: {rig.still_alerting[fault]}"
    critical = [look for look in looks if look.canary_status == CANARY_CRITICAL]
    assert not critical, f"the canary said CRITICAL {len(critical)} times during {fault}:\n{rig.canary_log()}"
    notified = rig.paging.notified_at[fault]
    assert notified == 0, f"{notified} notifications by the end of {fault}: {rig.paging.notifications(notified)}"


HARD_FAULTS = [
    "source partition leader SIGKILLed",
    "mirror group coordinator SIGKILLed",
    "transaction coordinator SIGKILLed",
    "exactly-once positions group coordinator SIGKILLed",
    "target active controller SIGKILLed",
    "target partition leader frozen past its session",
]
# MirrorwatchFlowInTrouble's `for:` in the shipped rules: a mirror behind this long really stood still
STOOD_STILL_S = 30.0


@pytest.mark.parametrize("fault", HARD_FAULTS)
def test_a_hard_fault_pages_at_most_once_and_only_for_a_mirror_that_stood_still(plan, rig, fault):
    """One broker of three killed or frozen: at most one page (a critical notification through the shipped
    Alertmanager config), and one only if a mirror really stopped: a target partition of our engine stood still
    STOOD_STILL_S or more during the fault or its catch-up, or a contestant took that long to catch up after it."""
    pages = rig.paging.pages[fault]
    (measured,) = [m for m in plan if m.fault == fault]
    print(
        f"pages during {fault}: {pages or 'none'}; stood still {measured.stood_still_s}, caught up {measured.catch_up_s}"
    )
    assert len(pages) <= 1, pages
    if pages:
        stood_still = max([*measured.stood_still_s.values(), *measured.catch_up_s.values()], default=0.0)
        assert stood_still >= STOOD_STILL_S, f"{pages}, {measured}\n{_warnings(rig)}"


def _warnings(rig) -> str:
    """What the services logged above INFO (and the monitor's asking again), for a failure's message."""
    out = []
    for name in ("monitor", "canary", "alo", "eos"):
        path = rig.base / f"{name}.log"
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        keep = [line for line in lines if " WARNING " in line or " ERROR " in line or "asking a new client" in line]
        out.append(f"--- {name}.log ({len(keep)} lines above INFO)\n" + "\n".join(keep[-40:]))
    return "\n".join(out)
