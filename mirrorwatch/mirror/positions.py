"""Exactly-once: which partitions this mirror owns (the positions group's assignment) and where each starts.

The positions group on the target (``naming.positions_group``) hands the partitions out: its consumer subscribes to
the mirrored target topics and never fetches; the source consumer ``assign``s the matching source partitions once
their positions are known. transactions.py holds the transactions that move those positions.

A new owner must never start a partition from a position that a transaction still open on the target may move
(KIP-447's "stable offsets"). A consumer's ``committed()`` with read_committed waits for such a transaction (up to
its timeout, up to ``transaction.timeout.ms`` of the process that died or froze holding it) and answers for all
partitions or none: called from the data loop, one frozen peer's open transaction would stop every partition of
this mirror, its own open transaction included, which could then outlive its own timeout.

So the positions are read by a thread of their own (:class:`PositionReads`), and the data loop only picks up what
arrived: first all wanted partitions in one request; if that times out (a transaction holds one of them, or the
target is away), each alone, so the stable ones start at once and the held ones are asked again until their
transaction is committed or aborted. Kafka Streams does the same for its tasks (KIP-572: a task whose committed
offsets are not stable waits, the others run). Rejected: the admin client's ``list_consumer_group_offsets
(require_stable=True)``, which answers per partition in one request, because confluent-kafka 2.16 crashes the
whole process (SIGSEGV) in it when the group coordinator is not available, as while a restarted target broker
loads (seen in this suite; monitor/kafka_io.py met it first).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_STORED, Consumer, KafkaError, KafkaException, TopicPartition

from ..core.access import error_of
from ..core.clients import make_consumer
from ..core.naming import positions_group
from .consumer_guard import STATS_INTERVAL_MS
from .engine_state import EngineState
from .hanging import UNKNOWN, HangingWatch, OpenAt, claim_decided, parse_claim
from .partition_state import PartitionState

log = logging.getLogger("mirrorwatch.mirror")

Key = tuple[str, int]
# (partition, the token it was asked with, its offset, None, or HELD when a transaction still holds it)
Answer = tuple[Key, int, int, str | None]
HELD = "held"

ASK_AGAIN_S = 0.5  # partitions still waiting: how soon to ask again
# without a transaction timeout to go by (hanging.py): a transaction still open this long has outlived any
DEFAULT_HANGING_AFTER_S = 120.0
ALL_AT_ONCE_TIMEOUT_S = 2.0  # every wanted partition in one request: the usual case, nothing held
ONE_TIMEOUT_S = 1.0  # one partition alone, after the request for all timed out


def sort_answers(answers: list[Answer], wanted: dict[Key, int]) -> tuple[list[tuple[Key, int]], list[Key]]:
    """Which answers to act on (pure). ``wanted``: the partitions still waiting, each with the token of the
    assignment that wants it. Returns (partition, offset) to start from, and the partitions a transaction still
    holds. An answer for a partition revoked meanwhile, or revoked and assigned again since it was asked (a new
    owner may have moved it in between), is dropped: it is asked again."""
    found: dict[Key, int] = {}
    held: dict[Key, None] = {}
    for key, token, offset, problem in answers:
        if wanted.get(key) != token:
            continue
        if problem is None:
            found[key] = offset  # asked twice before the loop picked the first answer up: one start
        elif problem == HELD:
            held[key] = None
    return list(found.items()), [key for key in held if key not in found]


class PositionReads:
    """The partitions waiting for their position on the target, and the thread that asks for them."""

    def __init__(
        self,
        new_consumer: Callable[[], Consumer],
        retrying: Callable[..., None],
        open_transactions: Callable[[list[Key]], dict[Key, OpenAt]] | None = None,
        hanging: HangingWatch | None = None,
        aborted_claims: Callable[[dict[Key, int]], set[Key]] | None = None,
    ) -> None:
        self.new_consumer = new_consumer  # a read_committed consumer of the positions group that never subscribes
        self.retrying = retrying  # the engine's: a warning, unless the cluster watch already said the target is away
        # target partitions with a transaction still open on them, each with its last stable offset (see _ask)
        self.open_transactions = open_transactions
        self.hanging = hanging or HangingWatch("", DEFAULT_HANGING_AFTER_S)
        # of target partitions with the offset their position claims, those whose claimed record ended aborted
        self.aborted_claims = aborted_claims
        self._claims: dict[Key, str | None] = {}  # answered positions' metadata, until the data loop starts them
        self.wanted: dict[Key, int] = {}  # partition → token of the assignment that wants it
        self._token = 0
        self._lock = threading.Lock()
        self._answers: queue.SimpleQueue[Answer] = queue.SimpleQueue()
        self._work = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._held_said: set[Key] = set()  # held partitions already logged, so a long wait is said once
        self._unread: set[tuple[Key, int]] = set()  # answered, not yet picked up by the data loop: not asked again

    def want(self, keys: list[Key]) -> None:
        with self._lock:
            self._token += 1
            for key in keys:
                self.wanted[key] = self._token
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="positions", daemon=True)
            self._thread.start()
        self._work.set()

    def forget(self, keys: list[Key]) -> None:
        with self._lock:
            for key in keys:
                self.wanted.pop(key, None)
                self._held_said.discard(key)

    def clear(self) -> None:
        with self._lock:
            self.wanted.clear()
            self._held_said.clear()
            self._unread.clear()

    def close(self) -> None:
        self._closed.set()
        self._work.set()
        if self._thread is not None:
            self._thread.join(ALL_AT_ONCE_TIMEOUT_S + 1)

    def poll(self) -> list[tuple[Key, int]]:
        """From the data loop, never blocking: the partitions whose position arrived, and where each starts (an
        offset < 0: never committed in the positions group)."""
        answers: list[Answer] = []
        while True:
            try:
                answers.append(self._answers.get_nowait())
            except queue.Empty:
                break
        if not answers:
            return []
        with self._lock:
            found, held = sort_answers(answers, self.wanted)
            for key, _ in found:
                del self.wanted[key]
                self._held_said.discard(key)
            for key, token, _, _ in answers:
                self._unread.discard((key, token))
            news = [key for key in dict.fromkeys(held) if key not in self._held_said]
            self._held_said.update(news)
        if news:
            log.info(
                "exactly-once: waiting for a transaction still open on the target (or the target to answer) "
                "before taking %s: their positions are not stable yet",
                ", ".join(f"{t}[{p}]" for t, p in news),
            )
        return found

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        consumer: Consumer | None = None
        while not self._closed.is_set():
            self._work.wait(ASK_AGAIN_S)
            self._work.clear()
            with self._lock:
                asked = {key: token for key, token in self.wanted.items() if (key, token) not in self._unread}
            if not asked or self._closed.is_set():
                continue
            try:
                consumer = consumer or self.new_consumer()
                if self._ask(consumer, asked):
                    continue
                # nothing answered at all: every one held, or the target away; a new consumer all the same, as
                # after a broker's restart librdkafka 2.16's long-lived clients kept timing out on group requests
                # for minutes while a new one was answered at once (monitor/kafka_io.py met it first)
                log.debug("exactly-once: no position answered; asking again with a new consumer")
            except Exception as exc:  # a coordinator moving, an access problem: ask again, never guess
                self.retrying("exactly-once: reading positions (will retry): %s", exc)
            _close(consumer)
            consumer = None
            self._closed.wait(ASK_AGAIN_S)
        _close(consumer)

    def _ask(self, consumer: Consumer, asked: dict[Key, int]) -> int:
        """Ask for these partitions' positions; the answers go to the data loop. Returns how many were answered."""
        try:
            tps = consumer.committed([TopicPartition(t, p) for t, p in asked], timeout=ALL_AT_ONCE_TIMEOUT_S)
            self._answer_unless_open(asked, {(tp.topic, tp.partition): (tp.offset, tp.metadata) for tp in tps})
            return len(asked)
        except KafkaException as exc:
            if not _timed_out(exc):
                raise
        # a transaction holds one of them (or the target is slow or away): each alone, the stable ones start now
        answered: dict[Key, tuple[int, str | None]] = {}
        for (topic, partition), token in asked.items():
            with self._lock:
                if self._closed.is_set() or self.wanted.get((topic, partition)) != token:
                    continue
            try:
                (tp,) = consumer.committed([TopicPartition(topic, partition)], timeout=ONE_TIMEOUT_S)
            except KafkaException as exc:
                if not _timed_out(exc):
                    raise
                self._answers.put(((topic, partition), token, -1, HELD))
                continue
            answered[(topic, partition)] = (tp.offset, tp.metadata)
        self._answer_unless_open(asked, answered)
        return len(answered)

    def _answer_unless_open(self, asked: dict[Key, int], positions: dict[Key, tuple[int, str | None]]) -> None:
        """Answer these positions, except on a target partition where a transaction is still open (its last stable
        offset below its end) that is not known to be ours and committed: what we write there would be committed
        with it, and the one open could be a copy of what we are about to send again. A predecessor's transaction
        is aborted by our init_transactions, but Kafka can leave it open for good on a partition, its markers never
        written (hanging.py says when, and how a committed one is told from an aborted one). Such a partition waits
        until the transaction ends; so does every partition asked when the check cannot be made (the target away):
        never a guess. Where the transaction that wrote the record a position claims has ended, the record is read
        back: one that ended aborted starts again from before it."""
        if not positions:
            return
        try:
            still_open = self.open_transactions(list(positions)) if self.open_transactions else {}
        except Exception as exc:
            self.retrying("exactly-once: checking the target for open transactions (will retry): %s", exc)
            still_open = dict.fromkeys(positions, UNKNOWN)
        claims = {key: parse_claim(metadata) for key, (_, metadata) in positions.items()}
        decided = {
            key: claim.target_offset
            for key, claim in claims.items()
            if claim is not None and claim_decided(still_open.get(key), claim)
        }
        try:
            aborted = self.aborted_claims(decided) if self.aborted_claims else set()
        except Exception as exc:  # not known how their transactions ended: they wait, never a guess
            self.retrying("exactly-once: reading back the records our positions claim (will retry): %s", exc)
            aborted, still_open = set(), {**still_open, **dict.fromkeys(decided, UNKNOWN)}
        now = time.monotonic()
        for key, (offset, metadata) in positions.items():
            start = self.hanging.decide(key, still_open.get(key), claims[key], offset, now, key in aborted)
            if start is None:
                self._answers.put((key, asked[key], -1, HELD))
                continue
            with self._lock:
                self._claims[key] = metadata
            self._answer(key, asked[key], start)

    def claim_of(self, key: Key) -> str | None:
        """From the data loop, once the partition starts: the claim its committed position carries (kept as it is
        by a commit that does not move it)."""
        with self._lock:
            return self._claims.pop(key, None)

    def _answer(self, key: Key, token: int, offset: int) -> None:
        with self._lock:
            self._unread.add((key, token))
        self._answers.put((key, token, offset, None))


def _timed_out(exc: KafkaException) -> bool:
    err = error_of(exc)
    return err is not None and err.code() == KafkaError._TIMED_OUT


def _close(consumer: Consumer | None) -> None:
    if consumer is not None:
        try:
            consumer.close()
        except Exception as exc:
            log.debug("closing the positions reader: %s", exc)


class PositionsGroup(EngineState):
    """A mixin of MirrorEngine (with ExactlyOnce): the positions group's consumer and its rebalance callbacks."""

    def _make_members(self) -> Consumer:
        props: dict[str, Any] = {
            "isolation.level": "read_committed",  # it never fetches; as every consumer made through core
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": self.settings.consumer.get("session.timeout.ms", 10_000),
            "heartbeat.interval.ms": 2_000,
        }
        if self.settings.instance_id:
            props["group.instance.id"] = self.settings.instance_id
        # its group state, watched as the source consumer's is under at-least-once (consumer_guard.py)
        props["statistics.interval.ms"] = STATS_INTERVAL_MS
        props["stats_cb"] = self._on_stats
        return make_consumer(
            self.target_cluster,
            f"mirrorwatch-mirror-{self.flow_name}",
            positions_group(self.group),
            **props,
        )

    def _eos_assign(self, members: Consumer, partitions: list[TopicPartition]) -> None:
        members.incremental_assign(partitions)
        members.pause(partitions)  # it never fetches: its offsets are source positions, not target ones
        self._take(partitions)

    def _take(self, target_partitions: list[TopicPartition]) -> None:
        """Start mirroring the source partitions of these target partitions from their positions on the target,
        as each position arrives (``_start_from``, from the data loop): never a guess, never a wait here."""
        assert self.position_reads is not None
        self.position_reads.want([(tp.topic, tp.partition) for tp in target_partitions])

    def _start_from(self, found: list[tuple[Key, int]]) -> None:
        assert self.position_reads is not None
        source_tps = []
        for (target_topic, partition), offset in found:
            topic = self.policy.source_topic(target_topic)
            if topic is None:
                continue
            key = (topic, partition)
            state = self.partitions[key] = PartitionState(key, self)
            state.txn_claim = self.position_reads.claim_of((target_topic, partition))
            if offset >= 0:
                state.committed = state.read_next = state.acked_next = offset
                state.txn_position = offset
                source_tps.append(TopicPartition(topic, partition, offset))
            else:
                # never committed here: the source group's commit (a flow that ran at-least-once before), else
                # auto.offset.reset; the first fetched record then says where it starts
                source_tps.append(TopicPartition(topic, partition, OFFSET_STORED))
        if not source_tps:
            return
        self.consumer.incremental_assign(source_tps)
        self.owned = frozenset(self.partitions)
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in source_tps))

    def _eos_revoke(self, members: Consumer, partitions: list[TopicPartition]) -> None:
        """Hand over cleanly: commit what was written (still under our generation), then let go."""
        try:
            self._commit_transaction()
        except Exception as exc:  # never raise from a rebalance callback: the next owner resumes from the target
            log.warning("handing over revoked partitions: %s", exc)
        self._drop(partitions)
        members.incremental_unassign(partitions)

    def _eos_lost(self, members: Consumer, partitions: list[TopicPartition]) -> None:
        """Another member may own them now: nothing written since the last commit may become visible."""
        log.warning(
            "exactly-once: the positions group's assignment was lost (outside the group past its session: frozen, "
            "or cut off); nothing written since the last commit becomes visible"
        )
        self._abort("the positions group's assignment was lost")
        self._drop(partitions)  # cooperative: the whole assignment is lost at once, nothing is kept to rewind

    def _drop(self, target_partitions: list[TopicPartition]) -> None:
        assert self.position_reads is not None
        self.position_reads.forget([(tp.topic, tp.partition) for tp in target_partitions])
        source_tps = []
        for tp in target_partitions:
            topic = self.policy.source_topic(tp.topic)
            if topic is not None and self.partitions.pop((topic, tp.partition), None) is not None:
                source_tps.append(TopicPartition(topic, tp.partition))
        if source_tps:
            try:
                self.consumer.incremental_unassign(source_tps)
            except KafkaException as exc:
                log.debug("unassigning %s: %s", source_tps, exc)
        self.owned = frozenset(self.partitions)

    def _replace_members(self) -> None:
        """The positions group's consumer stayed outside its group while the target answered (the librdkafka
        state consumer_guard.py describes): abort what it cannot commit, leave it (never closed: see there) and
        join with a new one, which takes partitions and positions afresh."""
        self._abort("the positions group's consumer is being replaced", always=True)
        self._unassign_all()
        assert self.members is not None  # made with the engine under exactly-once
        self._retire(self.members)
        self.members = self._make_members()  # it subscribes as the source consumer would (consumer_guard.py)

    def _serve_members(self) -> None:
        """From the data loop: serve the positions group (its rebalances run their callbacks here) and a fatal
        producer error seen inside a poll (replaced here, between batches, never under _send's feet)."""
        assert self.members is not None  # made with the engine under exactly-once
        event = self.members.poll(0)  # it never fetches: only its errors come out here
        err = event.error() if event is not None else None
        if err is not None:
            log.debug("the positions group's consumer: %s", err.str())
            self._note_consumer_error(err)  # a fatal one replaces it (consumer_guard.py)
        assert self.position_reads is not None
        found = self.position_reads.poll()
        if found:
            self._start_from(found)
        err, self._fence_pending = self._fence_pending, None
        if err is not None:
            self._fenced(err)

    def _unassign_all(self) -> None:
        """Forget every partition and stop fetching them (their states stay detached for late reports)."""
        assert self.position_reads is not None
        self.position_reads.clear()
        self.partitions.clear()
        self.owned = frozenset()
        try:
            self.consumer.incremental_unassign(self.consumer.assignment())
        except KafkaException as exc:
            log.debug("unassigning the source partitions: %s", exc)

    def _rewind(self) -> None:
        """Every partition the positions group gave us back to its position committed on the target (records read
        since are read again)."""
        self._unassign_all()
        if not self._stop.is_set():
            assert self.members is not None  # made with the engine under exactly-once
            self._take(list(self.members.assignment()))
