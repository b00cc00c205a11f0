"""Late is not lost (issue #27): the tracker's overdue, late and lost, table-driven, without Kafka.

Each case is a script of steps on one Tracker (warn 1 s, crit 5 s, retain 60 s) and the figures expected at
the end. Steps: ("sent", seq, partitions, produced_ms), ("arrive", seq, partition, arrived_ms) (produced at
seq × 1000), ("unsent", seq, partition), ("expire", now_ms).
"""

from __future__ import annotations

import pytest

from mirrorwatch.canary.events import BASIS_LOG_APPEND, Arrival
from mirrorwatch.canary.tracker import Tracker
from mirrorwatch.core.records import CanaryEvent


def _run(steps) -> Tracker:
    t = Tracker("r1", "east", warn_s=1, crit_s=5, retain_s=60)
    for step in steps:
        kind, *args = step
        if kind == "sent":
            seq, partitions = args
            t.sent(seq, partitions, seq * 1000)
        elif kind == "arrive":
            seq, partition, at = args
            event = CanaryEvent("r1", seq, seq * 1000, "east", partition)
            t.arrived(Arrival(event, partition, at, BASIS_LOG_APPEND))
        elif kind == "unsent":
            t.unsent(*args, "boom")
        else:
            t.expire(*args)
    return t


# name, steps, (lost, late, overdue events, duplicates, reordered), statuses of the probes resolved, in order
CASES = [
    (
        "frozen mirror: past crit is overdue, not lost",
        [("sent", 1, [0, 1]), ("sent", 2, [0, 1]), ("expire", 7000)],
        (0, 0, 4, 0, 0),
        ["CRITICAL", "CRITICAL"],
    ),
    (
        "thaw: the overdue events arrive in order, each counted late once",
        [("sent", 1, [0]), ("sent", 2, [0]), ("expire", 7000)]
        + [("arrive", 1, 0, 60_000), ("arrive", 2, 0, 60_001), ("expire", 61_000)],
        (0, 2, 0, 0, 0),
        ["CRITICAL", "CRITICAL"],
    ),
    (
        "arrives past crit before expire() ran: late, and its probe is judged on its latency",
        [("sent", 1, [0]), ("arrive", 1, 0, 6500)],
        (0, 1, 0, 0, 0),
        ["WARNING"],
    ),
    (
        "a later event arrives while an earlier one had not (still within crit): lost at once",
        [("sent", 1, [0, 1]), ("sent", 2, [0, 1]), ("arrive", 1, 1, 1010)]
        + [("arrive", 2, 0, 2010), ("arrive", 2, 1, 2011)],
        (1, 0, 0, 0, 0),
        ["CRITICAL", "OK"],
    ),
    (
        "an overdue event becomes lost when a later one of its partition arrives",
        [("sent", 1, [0, 1]), ("expire", 6000), ("sent", 7, [0, 1])] + [("arrive", 7, 0, 7010), ("arrive", 7, 1, 7011)],
        (2, 0, 0, 0, 0),
        ["CRITICAL", "CRITICAL"],  # probe 7 itself arrived fine, but judges the loss found since probe 1
    ),
    (
        "a later event on another partition says nothing about this one",
        [("sent", 1, [0]), ("expire", 6000), ("sent", 7, [1]), ("arrive", 7, 1, 7010)],
        (0, 0, 1, 0, 0),
        ["CRITICAL", "OK"],
    ),
    (
        "a lost event that arrives anyway: reordered, still lost, not late",
        [("sent", 1, [0]), ("sent", 2, [0]), ("arrive", 2, 0, 2010), ("arrive", 1, 0, 2020)],
        (1, 0, 0, 0, 1),
        ["CRITICAL", "OK"],  # probe 2 had resolved before the reorder; it marks the next probe (WARNING)
    ),
    (
        "a duplicate of an arrived event: counted once, nothing lost",
        [("sent", 1, [0]), ("arrive", 1, 0, 1010), ("arrive", 1, 0, 1020), ("sent", 2, [0])] + [("arrive", 2, 0, 2010)],
        (0, 0, 0, 1, 0),
        ["OK", "WARNING"],
    ),
    (
        "an event the source refused is neither overdue nor lost when a later one arrives",
        [("sent", 1, [0]), ("unsent", 1, 0), ("sent", 2, [0]), ("arrive", 2, 0, 2010), ("expire", 9000)],
        (0, 0, 0, 0, 0),
        ["UNKNOWN", "OK"],
    ),
    (
        "refused only after its probe was judged: no longer overdue, and not lost when a later one arrives",
        [("sent", 1, [0]), ("expire", 6000), ("unsent", 1, 0), ("sent", 7, [0]), ("arrive", 7, 0, 7010)],
        (0, 0, 0, 0, 0),
        ["CRITICAL", "OK"],
    ),
    (
        "retain: an overdue event older than retain_s is forgotten, and arriving then counts nothing",
        [("sent", 1, [0]), ("expire", 6000), ("expire", 61_001), ("arrive", 1, 0, 61_002)],
        (0, 0, 0, 0, 0),
        ["CRITICAL"],
    ),
]


@pytest.mark.parametrize("steps, figures, statuses", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_late_vs_lost(steps, figures, statuses):
    t = _run(steps)
    assert (t.lost, t.late, t.overdue_events, t.duplicates, t.reordered) == figures
    assert [p.status for p in t.take_resolved()] == statuses


def test_oldest_overdue_age_and_which_events():
    t = _run([("sent", 1, [0, 1]), ("sent", 3, [0]), ("expire", 8000)])
    assert t.overdue_events == 3 and t.oldest_overdue_s(10_000) == 9.0
    t = _run([("sent", 1, [0]), ("expire", 8000), ("arrive", 1, 0, 9000)])
    assert t.oldest_overdue_s(10_000) == 0.0


def test_probe_says_which_partitions_are_lost_and_which_overdue():
    t = _run([("sent", 1, [0, 1, 2]), ("sent", 2, [0]), ("arrive", 2, 0, 2010), ("expire", 7000)])
    first = next(p for p in t.take_resolved() if p.seq == 1)
    assert (first.missing, first.lost, first.overdue) == ((0, 1, 2), {0}, (1, 2))


def test_mark_lost_turns_an_overdue_event_lost_once():
    t = _run([("sent", 1, [0]), ("expire", 6000)])
    assert t.mark_lost(1, 0) and not t.mark_lost(1, 0) and (t.lost, t.overdue_events) == (1, 0)


def test_check_mode_knows_which_other_runs_events_arrived():
    """The one-shot check (own_only=False) asks which canary events of other runs the target reader saw."""
    t = Tracker("r1", "east", warn_s=1, crit_s=5, own_only=False)
    later = CanaryEvent("service-run", 7, 1000, "east", 1)
    t.arrived(Arrival(later, 1, 1010, BASIS_LOG_APPEND))
    assert t.has_arrived(later) and t.saw_partition(1) and not t.saw_partition(0)
    assert not t.has_arrived(CanaryEvent("service-run", 7, 1000, "west", 1))  # another source cluster's
    assert not t.has_arrived(CanaryEvent("service-run", 8, 2000, "east", 1)) and t.lost == 0


@pytest.mark.parametrize("crit_s, timeout_ms", [(30.0, 24_000), (6.0, 4_800), (1.0, 1_000), (0.5, 1_000)])
def test_the_producer_gives_up_on_an_event_before_its_probe_is_judged(crit_s, timeout_ms):
    from mirrorwatch.canary.service import delivery_timeout_ms

    assert delivery_timeout_ms(crit_s) == timeout_ms
