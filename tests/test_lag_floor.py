"""The fault suite's floor under the monitor's true lag (tests/support/lag_floor.py), fed known answers: planted
under-reports must be caught, honest reports must pass."""

from __future__ import annotations

import pytest

from .support.lag_floor import Poll, Reported, TargetCopies, below_the_floor, floor_at, longest_stall_s

# one target partition: records a0..a4 at offsets 0-4, a commit marker at 5, a2 and a3 again (duplicates) at 6-7
COPIES = TargetCopies([0, 1, 2, 3, 4, 6, 7], ["a0", "a1", "a2", "a3", "a4", "a2", "a3"], read_to=9)


@pytest.mark.parametrize(
    "offset, distinct",
    [
        (0, 0),
        (3, 3),
        (5, 5),  # the marker holds no record
        (8, 5),  # duplicates are not more records
        (9, 5),
        (10, None),  # past what the oracle read: unknown
    ],
)
def test_distinct_records_below_an_offset(offset, distinct):
    assert COPIES.distinct_below(offset) == distinct


SOURCES = [Poll(1_000, (10,)), Poll(2_000, (20,)), Poll(3_000, (30,))]  # source ends, when answered
STABLES = [Poll(1_500, (2,)), Poll(2_500, (5,)), Poll(3_500, (9,))]  # last stable offsets, when asked


@pytest.mark.parametrize(
    "ts_ms, floor",
    [
        (2_000, 20 - 5),  # the source end answered at the sample's time, the stable offset asked after it
        (2_400, 20 - 5),
        (2_600, 20 - 5),  # the later stable offset: 9 holds the same 5 distinct records
        (999, None),  # no source end answered before the sample
        (3_600, None),  # no stable offset asked after it
    ],
)
def test_the_floor_takes_the_polls_that_bracket_the_sample(ts_ms, floor):
    assert floor_at(ts_ms, 0, SOURCES, STABLES, COPIES) == floor


@pytest.mark.parametrize(
    "ts_ms, true_lag, caught",
    [
        (2_000, 15, False),  # exactly the floor
        (2_000, 40, False),  # above it: the monitor may say more
        (2_000, 14, True),  # one record short: caught
        (2_600, 13, True),  # the duplicates at 6-7 counted as two more records delivered: caught
        (2_000, 0, True),  # "caught up" while 15 records are missing
    ],
)
def test_an_under_report_is_caught(ts_ms, true_lag, caught):
    checked, below = below_the_floor([Reported(ts_ms, 0, true_lag)], SOURCES, STABLES, [COPIES])
    assert checked == 1
    assert bool(below) is caught


def test_an_offset_a_leaderless_partition_answered_gives_no_floor():
    """A partition without a leader answers -1 without an error: read as offset -1, it would count no record on
    the target, and the floor would be the whole source."""
    assert floor_at(2_000, 0, SOURCES, [Poll(2_500, (-1,))], COPIES) is None
    assert floor_at(2_000, 0, [Poll(2_000, (-1,))], STABLES, COPIES) is None


def test_samples_without_a_floor_are_not_counted():
    checked, below = below_the_floor([Reported(500, 0, 0), Reported(9_000, 0, 0)], SOURCES, STABLES, [COPIES])
    assert (checked, below) == (0, [])


@pytest.mark.parametrize(
    "polls, stall_s",
    [
        # steady progress on both partitions: the longest gap between advances is one poll interval
        ([Poll(0, (0, 0)), Poll(1_000, (5, 5)), Poll(2_000, (10, 10)), Poll(3_000, (15, 15))], 1.0),
        # partition 1 stands still from 1 s to 3 s although partition 0 moves on
        ([Poll(0, (0, 0)), Poll(1_000, (5, 5)), Poll(2_000, (10, 5)), Poll(3_000, (15, 9))], 2.0),
        # no answers at all between 0.5 s and 3 s: silence counts as standing still
        ([Poll(0, (0, 0)), Poll(500, (5, 5)), Poll(3_000, (10, 10))], 2.5),
        # nothing moves after the last advance at 1 s until the window's end at 3 s
        ([Poll(0, (0, 0)), Poll(1_000, (5, 5)), Poll(2_000, (5, 5)), Poll(3_000, (5, 5))], 2.0),
        # the first poll in the window holds no advance over the one before it: the stall starts at the window
        ([Poll(-500, (5, 5)), Poll(1_500, (5, 5)), Poll(2_500, (8, 8))], 2.5),
        ([], 3.0),  # no poll at all: the whole window
    ],
)
def test_the_longest_stall_inside_a_window(polls, stall_s):
    assert longest_stall_s(polls, 0, 3_000) == stall_s
