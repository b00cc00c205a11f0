"""The mirror engine's acknowledgement rule (mirror/acknowledgement.py): every case of where acked_next lands,
what may be committed, and which failed record the engine names. Pure: plain values, no Kafka."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from mirrorwatch.mirror.acknowledgement import (
    AckReason,
    RecordFailure,
    acknowledged_next,
    commit_position,
    culprit,
    failure_message,
    lowest_failure,
)

R = AckReason
CASES = [
    # (case, source_offset, in_flight, read_next, previous acked_next, failed_at) → (acked_next, reason)
    ("first report, nothing known yet", 9, False, None, None, None, 10, R.REPORTED),
    ("report, read exactly up to it", 9, False, 10, 5, None, 10, R.REPORTED),
    ("report with more in flight: read position does not count", 9, True, 20, 5, None, 10, R.REPORTED),
    ("nothing in flight, read further: loop-guard skips count", 9, False, 20, 5, None, 20, R.LOOP_GUARD_SKIPPED),
    ("read position behind the report (re-sent after a seek)", 9, False, 4, None, None, 10, R.REPORTED),
    ("never backwards: a skip had moved it further", 9, True, 30, 25, None, 25, R.KEPT),
    ("never backwards beats the read position", 9, False, 20, 25, None, 25, R.KEPT),
    ("equal to the previous: the report's own reason", 9, False, None, 10, None, 10, R.REPORTED),
    ("a failure below the report holds it", 9, False, 10, 5, 7, 7, R.HELD_AT_FAILURE),
    ("a failure below a loop-guard skip holds it", 9, False, 20, 5, 15, 15, R.HELD_AT_FAILURE),
    ("a failure below the previous holds it", 9, True, 30, 25, 12, 12, R.HELD_AT_FAILURE),
    ("a failure above changes nothing", 9, False, 10, 5, 40, 10, R.REPORTED),
    ("a failure exactly at acked_next changes nothing", 9, False, 10, 5, 10, 10, R.REPORTED),
    ("offset 0", 0, False, None, None, None, 1, R.REPORTED),
]


@pytest.mark.parametrize(
    "case,offset,in_flight,read_next,previous,failed_at,expected,reason", CASES, ids=[c[0] for c in CASES]
)
def test_acknowledged_next(case, offset, in_flight, read_next, previous, failed_at, expected, reason):
    ack = acknowledged_next(offset, in_flight, read_next, previous, failed_at)
    assert (ack.acked_next, ack.reason) == (expected, reason)


def test_every_reason_has_a_case():
    assert {c[-1] for c in CASES} == set(AckReason)


@pytest.mark.parametrize("acked_next,failed_at,expected", [(10, None, 10), (10, 7, 7), (10, 10, 10), (10, 12, 10)])
def test_commit_position(acked_next, failed_at, expected):
    assert commit_position(acked_next, failed_at) == expected


@pytest.mark.parametrize("failed_at,offset,expected", [(None, 8, 8), (5, 8, 5), (9, 8, 8)])
def test_lowest_failure_counts(failed_at, offset, expected):
    assert lowest_failure(failed_at, offset) == expected


def failure(offset: int, size: int, name: str = "MSG_SIZE_TOO_LARGE") -> RecordFailure:
    return RecordFailure("orders", 2, offset, "east.orders", size, name, "Broker: Message size too large", False)


def test_too_large_batch_names_the_largest_record():
    batch = [failure(100, 10), failure(101, 5_000_000), failure(102, 20)]
    assert culprit(batch).offset == 101
    assert failure_message(batch, "west") == (
        "cannot mirror orders[2] offset 101 (5000000 bytes) to west:east.orders: Broker: Message size too large "
        "(MSG_SIZE_TOO_LARGE); stopped without skipping it"
    )


def test_records_failed_after_the_refusal_are_not_the_culprit():
    # a report covers a run: the refused run's records fail as too large, later runs with the fatal error
    failures = [failure(10, 50), failure(11, 8_003), failure(12, 40), failure(13, 90_000, "_FATAL")]
    assert culprit(failures).offset == 11
    # produce() refused a record with the fatal error before the refused run's report was served
    assert culprit([failure(30, 10, "_FATAL"), *failures]).offset == 11


@pytest.mark.parametrize(
    "fifo,unmarked,read_next,expected",
    [
        (False, 0, 50, (50, AckReason.LOOP_GUARD_SKIPPED)),  # nothing in flight: the records read since were skipped
        (False, 3, 50, (41, AckReason.REPORTED)),  # records sent without a report of their own are still in flight
        (True, 0, 50, (41, AckReason.REPORTED)),
    ],
)
def test_records_without_their_own_report_count_as_in_flight(fifo, unmarked, read_next, expected):
    # PartitionState.acknowledged passes in_flight = reports due or records sent since the newest report-carrying one
    assert tuple(acknowledged_next(40, fifo or unmarked > 0, read_next, 30, None)) == expected


def test_other_errors_name_the_first_record_without_a_size():
    failures = [failure(7, 30, "TOPIC_AUTHORIZATION_FAILED"), failure(8, 90, "TOPIC_AUTHORIZATION_FAILED")]
    assert culprit(failures).offset == 7
    assert "offset 7 to west" in failure_message(failures, "west")


def test_unknown_size_is_not_printed_and_no_failure_no_message():
    assert "bytes" not in failure_message([failure(3, -1)], "west")
    assert failure_message([], "west") is None


@pytest.mark.parametrize(
    "code, fatal, outcome",
    [
        (KafkaError.MSG_SIZE_TOO_LARGE, False, "record"),  # refused again if done again: stop, never skip
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, False, "record"),
        (KafkaError.POLICY_VIOLATION, False, "record"),
        (KafkaError._MSG_TIMED_OUT, False, "abort"),  # the target away past the transaction timeout
        (KafkaError.REQUEST_TIMED_OUT, False, "abort"),
        (KafkaError._STATE, False, "abort"),  # a transaction that must be aborted first
        (KafkaError.INVALID_PRODUCER_EPOCH, False, "abort"),  # the target timed the transaction out
        (KafkaError._FENCED, True, "fenced"),  # a newer producer with our id
        (KafkaError.INVALID_PRODUCER_EPOCH, True, "fenced"),
        (KafkaError._FATAL, False, "fenced"),
    ],
)
def test_exactly_once_failure_outcomes(code, fatal, outcome):
    from mirrorwatch.mirror.transactions import transaction_failure

    assert transaction_failure(code, fatal) == outcome
