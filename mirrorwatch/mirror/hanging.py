"""Exactly-once: a transaction left open on a target partition, and whether it holds records we committed.

Kafka can end a transaction without writing its markers on some partitions (a single broker's unclean restart: its
coordinator completes the transaction while it loads, before it knows the partitions' leaders, and skips them as
"likely deleted"). The transaction then stays open there for good: read_committed readers stop at it. Whether it was
*committed* or *aborted* is decided, and the partitions that got their markers say which, but the one left open
does not. Aborting it is right when it was aborted, and loses records when it was committed (a coordinator killed
between its decision to commit and its markers): the positions committed with it already claim them.

So each position the engine commits carries a claim in its metadata (:func:`claim_metadata`): the target offset of
the newest record it covers, the position before the transaction that wrote it, and the transactional id that
wrote it. Reading a position back, the open transaction's first offset (the partition's last stable offset) is
compared with the claim (:func:`verdict`):

- the claim reaches into the open transaction: it was **committed**. Written by our transactional id, the engine
  takes the partition: its next commit marker there ends the open transaction as committed too (a partition's
  producer state ends a producer id's open transaction from its first offset, whatever the epoch). Written by
  another id, it waits and says at ERROR never to abort it;
- the claim stops before it: it holds nothing we committed (ours aborted, or someone else's). The partition waits;
  past the transaction timeout it says at ERROR that it hangs, with the command to abort it.

If a transaction of ours that wrote to such a partition is aborted before it commits, its abort marker ends the
open one as aborted too: the committed records are gone from the target, and the partition starts again from the
claim's earlier position (:meth:`HangingWatch.decide`). A successor process remembers nothing of what its
predecessor took (its own init_transactions writes that abort marker), so once the transaction a claim reaches
into has ended, the claimed record is read back (:func:`aborted_claims`): a read_committed reader that does not
find it at its offset means it ended aborted, and the partition starts again from the claim's earlier position too.
docs/exactly-once.md, "Known limits", says what is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from enum import Enum

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from ..core.clients import refresh_leader_epochs
from ..core.reading import read_at_offsets

log = logging.getLogger("mirrorwatch.mirror")

Key = tuple[str, int]
# a partition with a transaction open on it: (its last stable offset, its end offset); (-1, -1): not known
OpenAt = tuple[int, int]
UNKNOWN: OpenAt = (-1, -1)
CLAIM_PREFIX = "mirrorwatch-claim:"
# past the transaction timeout, the coordinator's check for expired transactions (every 10 s by default) and its
# markers: a transaction still open this long has outlived its timeout
HANGING_MARGIN_S = 30.0
OFFSETS_TIMEOUT_S = 5.0
# the consumer settings aborted_claims relies on (with no group, read_committed: core.clients.make_consumer): the
# end of a partition is an event, an offset gone by retention an error rather than a jump; one record is enough
CLAIM_READER = {"enable.partition.eof": True, "auto.offset.reset": "error", "max.partition.fetch.bytes": 65536}


@dataclass(frozen=True)
class Claim:
    target_offset: int  # the target offset of the newest record the committed position covers
    rewind_to: int  # the position before the transaction that wrote it (-1: not known)
    writer: str  # the transactional id that committed it


def claim_metadata(claim: Claim) -> str:
    return f"{CLAIM_PREFIX}{claim.target_offset}:{claim.rewind_to}:{claim.writer}"


def parse_claim(metadata: str | None) -> Claim | None:
    """The claim in a committed position's metadata; None for no claim (a position committed before claims were
    written, or by something else) or one that does not parse."""
    if not metadata or not metadata.startswith(CLAIM_PREFIX):
        return None
    target_offset, _, rest = metadata[len(CLAIM_PREFIX) :].partition(":")
    rewind_to, _, writer = rest.partition(":")
    try:
        return Claim(int(target_offset), int(rewind_to), writer)
    except ValueError:
        return None


class Verdict(Enum):
    START = "start"  # no transaction open: start from the committed position
    TAKE_COMMITTED = "take-committed"  # open, and committed by us: start; our next commit there ends it committed
    WAIT_COMMITTED = "wait-committed"  # open, and committed by another transactional id: wait, never abort it
    WAIT = "wait"  # open, holding nothing we committed: wait for it to end (a hanging one is aborted by a person)
    REWIND = "rewind"  # the records our position claims ended aborted: start again before them


def claim_decided(open_at: OpenAt | None, claim: Claim | None) -> bool:
    """Whether the transaction that wrote the claimed record has ended (no transaction open on the partition, or
    the open one starts after that record): whether reading the record back can tell how it ended (pure)."""
    return claim is not None and (open_at is None or open_at[0] > claim.target_offset)


def verdict(
    stable_offset: int | None,
    claim: Claim | None,
    ours: str,
    taken: bool,
    written_since: bool = False,
    claim_aborted: bool = False,
) -> Verdict:
    """What to do with a partition whose position was read (pure). ``stable_offset``: the partition's last stable
    offset when a transaction is open there (-1: the check could not be made), None when none is open. ``taken``:
    this process took the partition before on TAKE_COMMITTED and has not committed there since; ``written_since``:
    the partition's end has grown since it was taken (a transaction of ours wrote there and was then aborted: its
    abort marker, perhaps not written yet, ends the open one as aborted too); ``claim_aborted``: a read_committed
    reader does not see the claimed record at its offset (its transaction ended aborted)."""
    if claim_aborted:
        return Verdict.REWIND
    held_by_claim = claim is not None and stable_offset is not None and 0 <= stable_offset <= claim.target_offset
    if taken and (stable_offset is None or (held_by_claim and written_since)):
        return Verdict.REWIND
    if stable_offset is None:
        return Verdict.START
    if not held_by_claim:
        return Verdict.WAIT
    assert claim is not None
    return Verdict.TAKE_COMMITTED if claim.writer == ours else Verdict.WAIT_COMMITTED


class HangingWatch:
    """The positions thread's memory of the open transactions it met: since when each partition waits, what it
    said, and which partitions it took on TAKE_COMMITTED (their claims) until a commit of ours there ends them."""

    def __init__(self, transactional_id: str, hanging_after_s: float) -> None:
        self.transactional_id = transactional_id
        self.hanging_after_s = hanging_after_s  # the transaction timeout + HANGING_MARGIN_S
        self._open_since: dict[Key, float] = {}
        self._said: set[Key] = set()
        # taken partitions: their claim and their end offset when taken. Read by the positions thread and the data
        # loop: replaced, never mutated
        self.taken: dict[Key, tuple[Claim, int]] = {}

    def decide(
        self,
        key: Key,
        open_at: OpenAt | None,
        claim: Claim | None,
        position: int,
        now: float,
        claim_aborted: bool = False,
    ) -> int | None:
        """Where the partition starts, or None while it waits (saying so once, at ERROR, once it hangs).
        ``open_at``: the partition's (last stable offset, end) while a transaction is open there, else None;
        ``claim_aborted``: the record the position claims was read back and is not there (:func:`aborted_claims`)."""
        stable_offset = None if open_at is None else open_at[0]
        end = -1 if open_at is None else open_at[1]
        taken_claim, taken_end = self.taken.get(key, (None, -1))
        taken = taken_claim is not None
        written_since = taken and end > taken_end >= 0
        outcome = verdict(
            stable_offset, taken_claim or claim, self.transactional_id, taken, written_since, claim_aborted
        )
        if outcome in (Verdict.WAIT, Verdict.WAIT_COMMITTED):
            assert stable_offset is not None
            self._waiting(key, stable_offset, claim if outcome == Verdict.WAIT_COMMITTED else None, now)
            return None
        if outcome == Verdict.REWIND:
            rewound_claim = taken_claim or claim
            assert rewound_claim is not None  # REWIND comes of a claim: taken, or read back
            return self._rewound(key, rewound_claim)
        self._open_since.pop(key, None)
        self._said.discard(key)
        if outcome == Verdict.START:
            return position
        if outcome == Verdict.TAKE_COMMITTED and not taken:
            assert claim is not None  # TAKE_COMMITTED comes of a claim
            self.taken = {**self.taken, key: (claim, end)}
            _say_taken(key, stable_offset)
        return position

    def committed(self, last_written: dict[Key, int]) -> None:
        """From the data loop, after a commit: a taken partition whose newest record written is past its claim had
        that record committed, and with it the open transaction before it."""
        done = [key for key, (claim, _) in self.taken.items() if last_written.get(key, -1) > claim.target_offset]
        if done:
            self.taken = {key: taken for key, taken in self.taken.items() if key not in done}

    def _rewound(self, key: Key, claim: Claim) -> int | None:
        topic, partition = key
        if claim.rewind_to < 0:  # kept taken: it waits for good, said once
            if key in self._said:
                return None
            self._said.add(key)
            log.error(
                "exactly-once: the committed transaction left open on %s[%d] was aborted, and where its records "
                "began is not known: they are missing from the target. Mirror them again from the position before "
                "offset %d on the target (mirror reset-to-time), then restart the mirror",
                topic,
                partition,
                claim.target_offset,
            )
            return None
        self.taken = {k: c for k, c in self.taken.items() if k != key}
        log.warning(
            "exactly-once: the committed transaction whose records our position on %s[%d] claims (up to offset %d) "
            "ended aborted (with one of ours, or by hand): its records are gone from the target; mirroring them "
            "again from %d",
            topic,
            partition,
            claim.target_offset,
            claim.rewind_to,
        )
        return claim.rewind_to

    def _waiting(self, key: Key, stable_offset: int, committed_by: Claim | None, now: float) -> None:
        since = self._open_since.setdefault(key, now)
        if now - since < self.hanging_after_s or key in self._said or stable_offset < 0:
            return
        self._said.add(key)
        topic, partition = key
        if committed_by is not None:
            log.error(
                "exactly-once: a transaction has stayed open on %s[%d] from offset %d for %.0f s, and it holds "
                "records that transactional id %s committed (its position claims offset %d): Kafka never wrote its "
                "markers there. Do NOT abort it: that loses them. A mirror with that transactional id ends it at "
                "its next commit on %s[%d]",
                topic,
                partition,
                stable_offset,
                now - since,
                committed_by.writer,
                committed_by.target_offset,
                topic,
                partition,
            )
            return
        log.error(
            "exactly-once: a transaction has stayed open on %s[%d] for %.0f s, past any transaction timeout, and "
            "holds nothing the mirror committed: it is hanging (Kafka never wrote its markers). The mirror does "
            "not write to %s[%d] until it ends (what it wrote could be committed with it: duplicates). Abort it: "
            "kafka-transactions.sh --bootstrap-server <target> abort --topic %s --partition %d --start-offset %d",
            topic,
            partition,
            now - since,
            topic,
            partition,
            topic,
            partition,
            stable_offset,
        )


def _say_taken(key: Key, stable_offset: int | None) -> None:
    log.warning(
        "exactly-once: a transaction is open on %s[%d] from offset %s and our committed position claims records "
        "in it: it was committed (its markers there not written yet, or never). Taking the partition: our next "
        "commit there ends it as committed. Do not abort it",
        key[0],
        key[1],
        stable_offset,
    )


def open_transactions(admin: AdminClient, keys: list[Key]) -> dict[Key, OpenAt]:
    """Target partitions with a transaction open on them (last stable offset below the end), each with its last
    stable offset: the positions thread does not start them (positions.py says why). Raises when an offset cannot be
    read."""
    tps = [TopicPartition(t, p) for t, p in keys]
    refresh_leader_epochs(admin, OFFSETS_TIMEOUT_S)  # once, for both reads below

    def offsets(level: IsolationLevel) -> dict[Key, int]:
        futures = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in tps},  # type: ignore[no-untyped-call]
            isolation_level=level,
            request_timeout=OFFSETS_TIMEOUT_S,
        )
        return {(tp.topic, tp.partition): f.result(OFFSETS_TIMEOUT_S + 1).offset for tp, f in futures.items()}

    stable, ends = offsets(IsolationLevel.READ_COMMITTED), offsets(IsolationLevel.READ_UNCOMMITTED)
    return {key: (stable[key], ends[key]) for key in keys if stable[key] < ends[key]}


def aborted_claims(new_reader: Callable[[], Consumer], claimed: dict[Key, int], timeout_s: float) -> set[Key]:
    """Of these target partitions (each with the offset of the record its position claims, below the last stable
    offset), those where a read_committed reader does not find that record: the transaction that wrote it ended
    aborted (it skips to a later record, or to the end). A record gone by retention counts as there: nothing can be
    mirrored again from before the log's start. Raises when a partition gives no answer within ``timeout_s``."""
    if not claimed:
        return set()
    reader = new_reader()  # read_committed, assign-only, with CLAIM_READER's settings
    told, aborted = set(), set()
    try:
        with closing(read_at_offsets(reader, claimed, timeout_s, poll_s=0.2)) as answers:
            for key, stands in answers:
                if key is None:
                    continue  # a client-level event: no partition told
                told.add(key)
                if isinstance(stands, KafkaError):
                    if stands.code() != KafkaError._AUTO_OFFSET_RESET:
                        raise KafkaException(stands)
                    continue  # gone by retention: counts as there
                if not stands:
                    aborted.add(key)  # read_committed skipped it: the transaction that wrote it ended aborted
    finally:
        reader.close()
    pending = [key for key in claimed if key not in told]
    if pending:
        raise TimeoutError(
            f"no answer within {timeout_s:.0f} s reading back {', '.join(f'{t}[{p}]' for t, p in pending)}"
        )
    return aborted
