"""The open-transaction age and the hanging-transaction rule (monitor/transactions.py), with plain values: a table of
sample sequences per partition, the clock across layout changes, and the reason lines on-call reads; which target
partitions are looked at for a trailing transaction marker (monitor/markers.py). The real-broker
test (a transaction left open on a transactional flow's target) is in tests/test_transactional_target.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mirrorwatch.monitor.markers import LOOKS_PER_CYCLE, marker_candidates
from mirrorwatch.monitor.transactions import (
    NOT_OPEN,
    REASONS_SHOWN,
    OpenTransactionClock,
    hanging,
    hanging_reasons,
    open_transaction_ages,
)

# (case, samples of (end, stable, now_ms), the ages expected after each sample)
CASES = [
    ("nothing open", [(10, 10, 0), (12, 12, 1000)], [0.0, 0.0]),
    ("open, first seen: 0 (not known since when)", [(10, 7, 5000)], [0.0]),
    ("the same LSO below the end ages", [(10, 7, 0), (12, 7, 1000), (15, 7, 3500)], [0.0, 1.0, 3.5]),
    ("the LSO moved (a newer transaction): the clock restarts", [(10, 7, 0), (12, 7, 2000), (14, 11, 3000)], [0, 2, 0]),
    (
        "closed, then open again at the same offset later: afresh",
        [(10, 7, 0), (12, 7, 1000), (12, 12, 2000), (14, 12, 3000), (14, 12, 4000)],
        [0, 1, 0, 0, 1],
    ),
    ("an unread LSO: unknown, the clock kept", [(10, 7, 0), (12, -1, 1000), (12, 7, 2000)], [0, math.nan, 2]),
    ("an unread end: unknown, the clock kept", [(10, 7, 0), (-1, 7, 1000), (12, 7, 3000)], [0, math.nan, 3]),
    ("never read", [(-1, -1, 0)], [math.nan]),
    ("an idle open transaction (end unchanged) still ages", [(8, 7, 0), (8, 7, 60_000)], [0, 60]),
]


@pytest.mark.parametrize("samples,expected", [(s, e) for _, s, e in CASES], ids=[c for c, _, _ in CASES])
def test_open_transaction_age_over_samples(samples, expected):
    stable, since = np.array([-1]), np.array([NOT_OPEN])
    ages = []
    for end, lso, now in samples:
        stable, since, age = open_transaction_ages(stable, since, np.array([end]), np.array([lso]), now)
        ages.append(float(age[0]))
    np.testing.assert_allclose(ages, expected, equal_nan=True)


def test_the_partitions_of_one_sample_are_independent():
    """The table's first sample and second sample for several partitions at once: the vector form is the same rule."""
    stable, since = np.full(4, -1), np.full(4, NOT_OPEN)
    stable, since, _ = open_transaction_ages(stable, since, np.array([10, 10, 10, -1]), np.array([10, 7, 7, 3]), 0)
    stable, since, age = open_transaction_ages(stable, since, np.array([11, 12, 12, 5]), np.array([11, 7, 9, 3]), 4000)
    np.testing.assert_allclose(age, [0.0, 4.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "ages,threshold,expected",
    [
        ([0.0, 2.9, 3.0, 3.1, math.nan], 3.0, [False, False, False, True, False]),  # longer than, unknown is not
        ([119.0, 121.0], 120.0, [False, True]),
    ],
)
def test_hanging_is_longer_than_the_threshold(ages, threshold, expected):
    assert hanging(np.array(ages), threshold).tolist() == expected


def test_the_clock_follows_partitions_across_a_layout_change():
    clock = OpenTransactionClock()
    keys = [("t", 0), ("t", 1)]
    clock.sample(keys, np.array([10, 10]), np.array([5, 5]), 0)
    clock.sample(keys, np.array([10, 10]), np.array([5, 5]), 2000)
    # partition 1 leaves, 2 arrives (a new topic partition): 0 keeps its clock, 2 starts afresh
    age = clock.sample([("t", 0), ("t", 2)], np.array([10, 10]), np.array([5, 5]), 3000)
    assert age.tolist() == [3.0, 0.0]


def _row(partition: int, open_s: float = 200.0) -> dict:
    return {
        "topic": "east.orders",
        "partition": partition,
        "open_s": open_s,
        "last_stable_offset": 1234,
        "target_end": 1300,
    }


def test_the_reason_names_the_partition_and_the_commands():
    (line,) = hanging_reasons([_row(3)], "west-1:9092", {("east.orders", 3): 2}, 120.0, command_config=False)
    assert "hanging transaction on target partition east.orders[3]" in line
    assert "last stable offset 1234 < end 1300" in line
    assert "kafka-transactions.sh --bootstrap-server west-1:9092 find-hanging --broker-id 2" in line
    assert (
        "kafka-transactions.sh --bootstrap-server west-1:9092 abort --topic east.orders --partition 3 "
        "--start-offset 1234" in line
    )


def test_a_secured_target_and_an_unknown_leader_say_what_to_fill_in():
    (line,) = hanging_reasons([_row(0)], "west-1:9093", {}, 120.0, command_config=True)
    assert "--command-config <target client properties>" in line and "--broker-id <leader id>" in line


def test_many_hanging_partitions_are_named_up_to_a_few_then_counted():
    rows = [_row(p) for p in range(REASONS_SHOWN + 4)]
    lines = hanging_reasons(rows, "w:9092", {}, 120.0, command_config=False)
    assert len(lines) == REASONS_SHOWN + 1 and lines[-1].startswith("and 4 more target partitions")


A, B, C = ("t", 0), ("t", 1), ("t", 2)
# (case, keys, ends, stable, looked before, cycle, chosen, looked after)
MARKER_CASES = [
    ("a written partition, nothing open: looked at", [A], {A: 10}, {A: 10}, {}, 1, [A], {A: (10, 1)}),
    ("never written: nothing to look at", [A], {A: 0}, {A: 0}, {}, 1, [], {}),
    ("open (the LSO check's): not looked at", [A], {A: 10}, {A: 7}, {}, 1, [], {}),
    ("an offset not read: not looked at", [A, B], {A: -1, B: 5}, {A: 3, B: -1}, {}, 1, [], {}),
    ("the end did not move: the same offset, not again", [A], {A: 10}, {A: 10}, {A: (10, 1)}, 2, [], {A: (10, 1)}),
    ("the end moved: looked at again", [A], {A: 12}, {A: 12}, {A: (10, 1)}, 2, [A], {A: (12, 2)}),
    (
        "never looked at first, then the longest ago",
        [A, B, C],
        {A: 5, B: 5, C: 5},
        {A: 5, B: 5, C: 5},
        {A: (4, 3), B: (4, 1)},
        4,
        [C, B, A],
        {A: (5, 4), B: (5, 4), C: (5, 4)},
    ),
]


@pytest.mark.parametrize(
    "keys,ends,stable,looked,cycle,chosen,after",
    [c[1:] for c in MARKER_CASES],
    ids=[c[0] for c in MARKER_CASES],
)
def test_which_target_partitions_are_looked_at_for_a_trailing_marker(keys, ends, stable, looked, cycle, chosen, after):
    looked = dict(looked)
    assert marker_candidates(keys, ends, stable, looked, cycle) == chosen
    assert looked == after


def test_at_most_a_few_partitions_are_looked_at_per_cycle_and_the_rest_next():
    keys = [("t", p) for p in range(LOOKS_PER_CYCLE + 3)]
    ends = {k: 100 for k in keys}
    looked: dict = {}
    first = marker_candidates(keys, ends, ends, looked, 1)
    assert first == keys[:LOOKS_PER_CYCLE]
    ends = {k: 101 for k in keys}  # all written again: the three not looked at yet come first
    assert marker_candidates(keys, ends, ends, looked, 2)[:3] == keys[LOOKS_PER_CYCLE:]
