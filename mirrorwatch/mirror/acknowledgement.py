"""The acknowledgement rule: how far the target has everything of a source partition, and what may be committed.

Pure (no Kafka calls): the engine's partition state feeds it the newest delivery report and its own positions.
``acked_next`` is "last source offset acknowledged by the target + 1" (the true lag reads it through the
offset syncs); commits and syncs never pass it, and never pass the first record that could not be written.

The rule, in order (each step may move the answer; the reason names the step that had the last word):

1. ``REPORTED``: the target acknowledged everything sent through ``source_offset``: ``source_offset + 1``.
2. ``LOOP_GUARD_SKIPPED``: nothing else is in flight and the engine has read further: records between were
   skipped by the identity policy's loop guard (never sent, so never reported) and count as handled.
3. ``KEPT``: ``acked_next`` never goes back: a loop-guard skip may already have moved it past this report.
4. ``HELD_AT_FAILURE``: a record at ``failed_at`` could not be written: never at or past it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


class MirrorFailure(Exception):
    """A record that cannot be written to the target: the engine stopped rather than skip it."""

    exit_code = 1


class RecordsLost(MirrorFailure):
    """The source log start passed the engine's position (retention, DeleteRecords, a recreated topic): records
    were removed before they were mirrored, and ``mirror.on_records_lost`` is ``stop``."""

    exit_code = 4


class AckReason(Enum):
    REPORTED = "the target acknowledged everything through the reported record"
    LOOP_GUARD_SKIPPED = "nothing in flight: records read after the report were skipped by the loop guard"
    KEPT = "an earlier position was further (a loop-guard skip had moved it)"
    HELD_AT_FAILURE = "a record at or below could not be written: never past it"


class Acknowledgement(NamedTuple):
    acked_next: int
    reason: AckReason


def acknowledged_next(
    source_offset: int, in_flight: bool, read_next: int | None, acked_next: int | None, failed_at: int | None
) -> Acknowledgement:
    """The new ``acked_next`` after the target acknowledged everything sent through ``source_offset``.

    ``in_flight``: records of this partition still await their reports; ``read_next``: the next source offset
    the engine will fetch (None = not known yet); ``acked_next``: the previous answer (None = none yet);
    ``failed_at``: the lowest offset that could not be written (None = none)."""
    answer, reason = source_offset + 1, AckReason.REPORTED
    if not in_flight and read_next is not None and read_next > answer:
        answer, reason = read_next, AckReason.LOOP_GUARD_SKIPPED
    if acked_next is not None and acked_next > answer:
        answer, reason = acked_next, AckReason.KEPT
    if failed_at is not None and failed_at < answer:
        answer, reason = failed_at, AckReason.HELD_AT_FAILURE
    return Acknowledgement(answer, reason)


def commit_position(acked_next: int, failed_at: int | None) -> int:
    """The offset to commit for the mirror group: what the target has, never past a record that failed."""
    return acked_next if failed_at is None else min(acked_next, failed_at)


def lowest_failure(failed_at: int | None, source_offset: int) -> int:
    """``failed_at`` after the record at ``source_offset`` could not be written (the lowest failure counts)."""
    return source_offset if failed_at is None else min(failed_at, source_offset)


TOO_LARGE = "MSG_SIZE_TOO_LARGE"  # librdkafka's name for a record (or its batch) over the broker's limit
FATAL = "_FATAL"  # every produce() after the producer's fatal error (enable.gapless.guarantee) fails with it


@dataclass(frozen=True, slots=True)
class RecordFailure:
    """A record the target refused; the engine stops rather than skip it."""

    topic: str
    partition: int
    offset: int
    target_topic: str
    size: int  # key + value bytes; -1 when unknown (refused before it was sent)
    error_name: str  # librdkafka's error name, e.g. MSG_SIZE_TOO_LARGE
    error_text: str
    retriable: bool


def culprit(failures: list[RecordFailure]) -> RecordFailure:
    """The record to name: the first failure, unless the broker refused a batch for a too-large record (it
    refuses the whole batch holding it, and a report covers a run of records): then the largest record refused
    as too large. Records failed afterwards for another reason (the producer's fatal error after the refusal
    fails every later record) are not candidates."""
    # a record refused at produce() because the producer had already failed fatally is not the cause
    first = next((f for f in failures if f.error_name != FATAL), failures[0])
    if first.error_name == TOO_LARGE:
        return max((f for f in failures if f.error_name == TOO_LARGE), key=lambda f: f.size)
    return first


def failure_message(failures: list[RecordFailure], target_cluster: str) -> str | None:
    """One line naming the record that could not be written (the culprit, not its batch-mates)."""
    if not failures:
        return None
    f = culprit(failures)
    detail = f" ({f.size} bytes)" if f.size >= 0 and f.error_name == TOO_LARGE else ""
    return (
        f"cannot mirror {f.topic}[{f.partition}] offset {f.offset}{detail} to {target_cluster}:{f.target_topic}: "
        f"{f.error_text} ({f.error_name}); stopped without skipping it"
    )
