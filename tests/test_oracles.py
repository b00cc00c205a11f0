"""The checkers that decide "0 lost, 0 duplicates" are fed known-bad input and must catch each planted fault: a
loss, a duplicate, a reorder and a gap (issue 37 item 6). Three checkers: the fault suite's oracle
(tests/support/oracle.py ``judge``), the exactly-once tests' ``delivery`` (tests/support/exactly_once.py) and the
soak's ``check`` (bench/soak_check.py). Plain values only."""

from __future__ import annotations

import pytest

from bench.soak_check import check
from tests.support.exactly_once import Delivery, delivery
from tests.support.oracle import Unbroken, Verdict, judge, parse

# ------------------------------------------------------------------ the fault suite's oracle
ACKED = {"a": 3, "b": 2}
CLEAN = [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]


@pytest.mark.parametrize(
    "case, received, acknowledged, expected",
    [
        # (records, lost, duplicates, order violations, gaps)
        ("clean", CLEAN, ACKED, (5, 0, 0, 0, 0)),
        ("loss at the tail", CLEAN[:2] + CLEAN[3:], ACKED, (4, 1, 0, 0, 0)),
        ("a key never arrived", CLEAN[:3], ACKED, (3, 2, 0, 0, 0)),
        ("duplicate", CLEAN[:2] + [("a", 1)] + CLEAN[2:], ACKED, (6, 0, 1, 0, 0)),
        ("replay after a crash", CLEAN[:3] + [("a", 1), ("a", 2)] + CLEAN[3:], ACKED, (7, 0, 2, 0, 0)),
        ("reorder", [("a", 0), ("a", 2), ("a", 1)] + CLEAN[3:], ACKED, (5, 0, 0, 1, 0)),
        ("gap", [("a", 0), ("a", 2)] + CLEAN[3:], ACKED, (4, 1, 0, 0, 1)),
        ("two gaps", [("a", 0), ("a", 2), ("a", 4)], {"a": 5}, (3, 2, 0, 0, 2)),
        ("a gap of two is one gap", [("a", 0), ("a", 3)], {"a": 4}, (2, 2, 0, 0, 1)),
    ],
)
def test_the_oracle_catches_each_planted_fault(case, received, acknowledged, expected):
    verdict = judge(acknowledged, received)
    assert (verdict.records, verdict.lost, verdict.duplicates, verdict.order_violations, verdict.gaps) == expected
    assert verdict.exact == (expected[1:] == (0, 0, 0, 0))


@pytest.mark.parametrize(
    "received, acknowledged",
    [
        (CLEAN, ACKED),
        (CLEAN[:2] + CLEAN[3:], ACKED),
        (CLEAN[:3], ACKED),
        ([("a", 2), ("a", 1), ("a", 0)] + CLEAN[3:], ACKED),  # out of order, complete
        ([("a", 0), ("a", 2)] + CLEAN[3:], ACKED),  # a hole below the last one received
        ([("a", 0), ("a", 1), ("a", 1)], {"a": 2}),  # a duplicate
        ([("a", 0), ("a", 1), ("a", 2)], {"a": 2}),  # more than acknowledged (written after the snapshot)
        ([], {"a": 0}),
        ([], ACKED),
    ],
)
def test_the_waits_shortcut_agrees_with_the_oracle_on_what_is_lost(received, acknowledged):
    unbroken = Unbroken()
    for key, number in received:
        unbroken.add(key, number)
    assert unbroken.holds_all(acknowledged) == (judge(acknowledged, received).lost == 0)


def test_the_oracle_names_what_it_found():
    said = str(judge({"a": 3}, [("a", 0), ("a", 2), ("a", 2)]))
    assert "1 lost" in said and "1 duplicates" in said and "1 gaps" in said and "a lost 1 from #1" in said


def test_the_oracle_reports_records_the_source_never_acknowledged():
    verdict = judge({"a": 1}, [("a", 0), ("a", 1)])
    assert any("never acknowledged: a#1" in e for e in verdict.examples)


@pytest.mark.parametrize(
    "value, expected", [(b"k1:0 ", ("k1", 0)), (b"k12:345 ......", ("k12", 345)), (b"k3:7", ("k3", 7))]
)
def test_the_oracle_reads_key_and_number_from_the_value(value, expected):
    assert parse(value) == expected


def test_a_verdict_is_exact_only_when_nothing_was_found():
    assert Verdict(5, 0, 0, 0, 0).exact and not Verdict(5, 0, 0, 0, 1).exact


# ------------------------------------------------------------------ tests/support/exactly_once.py delivery
class Record:
    """The two things ``delivery`` reads of a consumed message."""

    def __init__(self, partition: int, number: int) -> None:
        self._partition, self._key = partition, f"k{number}".encode()

    def partition(self) -> int:
        return self._partition

    def key(self) -> bytes:
        return self._key


def records(numbers: list[int], partitions: int = 2) -> list[Record]:
    return [Record(n % partitions, n) for n in numbers]


@pytest.mark.parametrize(
    "case, numbers, expected",
    [
        # six records, produce_numbered's way: record i in partition i % 2; (records, lost, duplicates, order)
        ("clean", [0, 2, 4, 1, 3, 5], Delivery(6, 0, 0, 0)),
        ("loss", [0, 2, 4, 1, 3], Delivery(5, 1, 0, 0)),
        # a copy right after its original is also a step that does not go up
        ("duplicate", [0, 2, 2, 4, 1, 3, 5], Delivery(7, 0, 1, 1)),
        ("reorder", [0, 4, 2, 1, 3, 5], Delivery(6, 0, 0, 1)),
        ("gap", [0, 4, 1, 3, 5], Delivery(5, 1, 0, 0)),
    ],
)
def test_delivery_catches_each_planted_fault(case, numbers, expected):
    assert delivery(records(numbers), 6, 2) == expected


# ------------------------------------------------------------------ bench/soak_check.py check
def soak_records(per_key: dict[str, list[int]], partition_of: dict[str, int]) -> dict[int, list]:
    """The soak's shape: {partition: [(offset, key, value)]}, value = the key's sequence number."""
    out: dict[int, list] = {}
    for key, numbers in per_key.items():
        rows = out.setdefault(partition_of[key], [])
        for n in numbers:
            rows.append((len(rows), key.encode(), str(n).encode()))
    return out


PARTITION_OF = {"key-0": 0, "key-1": 1}
SOURCE = soak_records({"key-0": [0, 1, 2, 3], "key-1": [0, 1, 2]}, PARTITION_OF)
NO_WINDOW: list = []
# a fault window over source offsets [1, 3) of partition 0 (the group's commit, the source's end at the fault)
WINDOW = [({0: 1, 1: 0}, {0: 3, 1: 0})]


@pytest.mark.parametrize(
    "case, target, windows, expected",
    [
        # (lost, duplicates, duplicates outside the in-flight windows, order violations)
        ("clean", {"key-0": [0, 1, 2, 3], "key-1": [0, 1, 2]}, NO_WINDOW, (0, 0, 0, 0)),
        ("loss", {"key-0": [0, 1, 2], "key-1": [0, 1, 2]}, NO_WINDOW, (1, 0, 0, 0)),
        ("duplicate outside a window", {"key-0": [0, 1, 2, 3, 3], "key-1": [0, 1, 2]}, WINDOW, (0, 1, 1, 0)),
        ("duplicate inside a window", {"key-0": [0, 1, 2, 1, 2, 3], "key-1": [0, 1, 2]}, WINDOW, (0, 2, 0, 0)),
        ("reorder", {"key-0": [0, 2, 1, 3], "key-1": [0, 1, 2]}, NO_WINDOW, (0, 0, 0, 1)),
        ("gap", {"key-0": [0, 2, 3], "key-1": [0, 1, 2]}, NO_WINDOW, (1, 0, 0, 0)),
    ],
)
def test_soak_check_catches_each_planted_fault(case, target, windows, expected):
    assert check(SOURCE, soak_records(target, PARTITION_OF), windows) == expected
