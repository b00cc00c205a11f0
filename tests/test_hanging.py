"""A transaction left open on a target partition: what a committed position's claim says of it (pure logic;
tests/test_position_reads.py plays it on a real broker)."""

from __future__ import annotations

import pytest

from mirrorwatch.mirror.hanging import (
    Claim,
    HangingWatch,
    Verdict,
    claim_decided,
    claim_metadata,
    parse_claim,
    verdict,
)

OURS = Claim(target_offset=10, rewind_to=100, writer="ours")
THEIRS = Claim(target_offset=10, rewind_to=100, writer="theirs")


@pytest.mark.parametrize(
    "metadata, claim",
    [
        (claim_metadata(OURS), OURS),
        (claim_metadata(Claim(0, -1, "g-host:with:colons")), Claim(0, -1, "g-host:with:colons")),
        (None, None),
        ("", None),
        ("written by someone else", None),
        ("mirrorwatch-claim:x:1:ours", None),
    ],
)
def test_a_claim_reads_back_as_written(metadata, claim):
    assert parse_claim(metadata) == claim


@pytest.mark.parametrize(
    "stable, claim, taken, written, expected",
    [
        (None, None, False, False, Verdict.START),  # nothing open
        (None, OURS, False, False, Verdict.START),
        (11, OURS, False, False, Verdict.WAIT),  # open after what we claim: not ours to end
        (5, None, False, False, Verdict.WAIT),  # no claim: never a guess
        (-1, OURS, False, False, Verdict.WAIT),  # the check could not be made
        (10, OURS, False, False, Verdict.TAKE_COMMITTED),  # open from the record we claim: committed, by us
        (3, OURS, False, False, Verdict.TAKE_COMMITTED),
        (10, THEIRS, False, False, Verdict.WAIT_COMMITTED),  # committed by another mirror: never abort it
        (10, OURS, True, False, Verdict.TAKE_COMMITTED),  # taken, still open: still ours to end
        (None, OURS, True, False, Verdict.REWIND),  # taken, ended without our commit: aborted
        (11, OURS, True, False, Verdict.WAIT),  # taken, ended, someone else's open after it: wait, then rewind
        (-1, OURS, True, False, Verdict.WAIT),
        (10, OURS, True, True, Verdict.REWIND),  # taken, one of ours wrote there and was aborted
        (None, OURS, True, True, Verdict.REWIND),
        (11, OURS, True, True, Verdict.WAIT),  # ended, another open after it: wait, then rewind
    ],
)
def test_what_an_open_transaction_means_for_a_partition(stable, claim, taken, written, expected):
    assert verdict(stable, claim, "ours", taken, written) == expected


@pytest.mark.parametrize(
    "stable, claim, taken, expected",
    [
        (None, OURS, False, Verdict.REWIND),  # nothing open, the claimed record not there: it ended aborted
        (11, OURS, False, Verdict.REWIND),  # another transaction open after it: it ended aborted all the same
        (None, THEIRS, False, Verdict.REWIND),  # whoever committed it: the records are gone, mirror them again
        (None, OURS, True, Verdict.REWIND),
    ],
)
def test_a_claimed_record_read_back_and_not_found_starts_before_it(stable, claim, taken, expected):
    assert verdict(stable, claim, "ours", taken, claim_aborted=True) == expected


@pytest.mark.parametrize(
    "open_at, claim, decided",
    [
        (None, OURS, True),  # nothing open: the claimed record's transaction has ended
        ((11, 20), OURS, True),  # the open one starts after the claimed record
        ((10, 20), OURS, False),  # open from the claimed record: not ended
        ((3, 20), OURS, False),
        ((-1, -1), OURS, False),  # not known
        (None, None, False),  # no claim: nothing to read back
    ],
)
def test_a_claimed_record_is_read_back_only_once_its_transaction_has_ended(open_at, claim, decided):
    assert claim_decided(open_at, claim) is decided


def test_a_successor_whose_claimed_record_ended_aborted_starts_before_it():
    """Issue 34's plan in a fresh-clone run: the predecessor took a partition whose committed transaction Kafka left
    open, wrote there, and was killed before committing; its successor's init_transactions aborted what it left, and
    that marker ended the committed one too. The successor took nothing itself: only the read-back tells it."""
    watch = HangingWatch("ours", 60.0)
    key = ("t", 0)
    assert watch.decide(key, None, OURS, 120, now=0.0, claim_aborted=True) == 100
    unknown = Claim(10, -1, "ours")
    assert watch.decide(key, None, unknown, 120, now=1.0, claim_aborted=True) is None  # never a guess
    assert watch.decide(key, None, OURS, 120, now=2.0) == 120  # read back and there: its position stands


def test_a_taken_partition_is_ours_until_a_commit_writes_past_its_claim():
    watch = HangingWatch("ours", 60.0)
    key = ("t", 0)
    assert watch.decide(key, (10, 12), OURS, 120, now=0.0) == 120
    watch.committed({key: 10})  # nothing written past the claim yet
    assert key in watch.taken
    watch.committed({key: 11})
    assert key not in watch.taken
    assert watch.decide(key, None, OURS, 130, now=1.0) == 130  # ended committed: its position stands


def test_a_taken_partition_whose_transaction_ended_aborted_starts_before_it():
    watch = HangingWatch("ours", 60.0)
    key = ("t", 0)
    assert watch.decide(key, (10, 12), OURS, 120, now=0.0) == 120
    assert watch.decide(key, (10, 12), OURS, 120, now=0.5) == 120  # asked again, nothing written there: still ours
    assert watch.decide(key, None, OURS, 120, now=1.0) == 100
    assert key not in watch.taken
    unknown = Claim(10, -1, "ours")
    assert watch.decide(key, (10, 12), unknown, 120, now=2.0) == 120
    assert watch.decide(key, None, unknown, 120, now=3.0) is None  # where to start again is not known: it waits
    assert watch.decide(key, None, unknown, 120, now=4.0) is None  # for good, never a guess


def test_a_taken_partition_written_and_aborted_starts_before_it_while_the_markers_are_still_on_their_way():
    """Right after our abort, the open transaction can still look open (its markers are written after the abort
    returns): the end having grown says one of ours wrote there, and its abort marker ends the open one aborted."""
    watch = HangingWatch("ours", 60.0)
    key = ("t", 0)
    assert watch.decide(key, (10, 12), OURS, 120, now=0.0) == 120
    assert watch.decide(key, (10, 30), OURS, 120, now=1.0) == 100
