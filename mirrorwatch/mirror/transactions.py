"""Exactly-once delivery (``mirror.delivery: exactly_once``), a mixin of MirrorEngine.

The records of a round and the source positions they reach are committed in ONE transaction on the target. The
positions are the committed offsets of the flow's *positions group* on the target (``naming.positions_group``):
on the mirrored target partition ``(T, p)`` the group's offset is the next SOURCE offset of ``(S, p)`` to mirror.
They are written with ``send_offsets_to_transaction``, so a read_committed reader sees a record exactly when the
position past it is committed, and a restart or a new owner resumes from there.

Who owns a partition: the positions group, on the target. Each mirror process joins it with a consumer that
subscribes to the flow's target topics and never fetches (its partitions stay paused); the source consumer only
``assign``s the source partitions matching what the group gave it (same number, 1:1). Zombie fencing is Kafka's
own (KIP-447): ``send_offsets_to_transaction`` carries the member's generation, and the group coordinator refuses
it from a member that is no longer in the current generation, so a mirror frozen past its session cannot commit
anything it wrote after it lost its partitions; its transaction is aborted. A new owner reads the positions as
stable offsets only (KIP-447): a partition a transaction still holds waits for it, the others start at once
(positions.py).
Rejected designs and the costs: docs/design.md, "Exactly-once mirroring".

What makes every commit safe, the invariant the methods keep:
- every transaction that is committed carries the positions (so the generation check) of at least one owned
  partition; one with nothing to check is aborted, never committed;
- a failed transaction is aborted and every partition goes back to the position committed on the target;
- a lost assignment aborts the open transaction first (its records may duplicate a new owner's).

The source group's offsets are still committed, after each transaction commits (``kafka-consumer-groups`` and
committed lag keep working): they trail the target's positions by at most one transaction.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from ..core.access import Denied, error_of
from ..core.clients import make_consumer, make_producer
from ..core.naming import positions_group, transactional_id
from .acknowledgement import MirrorFailure
from .bounded_calls import CallHung, call_bounded
from .commit_rounds import CommitRounds
from .hanging import (
    CLAIM_READER,
    HANGING_MARGIN_S,
    OFFSETS_TIMEOUT_S,
    Claim,
    HangingWatch,
    aborted_claims,
    claim_metadata,
    open_transactions,
)
from .partition_state import PartitionState
from .positions import PositionReads, PositionsGroup

log = logging.getLogger("mirrorwatch.mirror")

Key = tuple[str, int]

# librdkafka's purge of an aborted transaction's records: their reports are expected, not a failure
PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)
# what the target says about a record itself: it would say it again, so the engine stops rather than skip it
RECORD_REFUSED = {
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError.INVALID_RECORD,
    KafkaError.INVALID_TIMESTAMP,
    KafkaError.POLICY_VIOLATION,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError._INVALID_ARG,
}
ABORT_TIMEOUT_S = 10.0
COMMIT_TIMEOUT_S = 5.0  # one try; a retriable failure (a coordinator moving, a target away) is tried again
# fenced this often within this long: another process uses our transactional id (two of them fence each other
# every few seconds); a zombie's thaw and a target away past the transaction timeout are one fence each
FENCES_LIMIT, FENCES_WINDOW_S = 5, 300.0
STUCK_COMMIT_S = 30.0  # commits failing this long while the target answers: the producer is replaced


def transaction_failure(code: int, fatal: bool) -> str:
    """What a failed report or produce() means under exactly-once (pure): ``"record"`` the target refuses the
    record itself (stop, as at-least-once does), ``"fenced"`` the producer is done (replace it), ``"abort"`` only
    the open transaction is (abort it); in both latter cases the partitions go back to their positions."""
    if code in RECORD_REFUSED:
        return "record"
    return "fenced" if fatal or code == KafkaError._FATAL else "abort"


class TransactionRefused(MirrorFailure):
    """Exactly-once cannot go on: fenced again and again (another process with our transactional id); exits 5."""

    exit_code = 5


class ExactlyOnce(PositionsGroup):
    def _init_exactly_once(self) -> None:
        self.exactly_once = self.settings.delivery == "exactly_once"
        self.members = None  # the positions group's consumer on the target
        self.position_reads: PositionReads | None = None  # partitions assigned, waiting for their positions
        instance = self.settings.instance_id or socket.gethostname()
        self.transactional_id = transactional_id(self.group, instance)
        if self.exactly_once:
            target, client_id, group = self.target_cluster, f"mirrorwatch-mirror-{self.flow_name}", self.group
            self.position_reads = PositionReads(
                lambda: make_consumer(target, client_id, positions_group(group), **{"enable.auto.commit": False}),
                self._retrying,
                lambda keys: open_transactions(self.target_admin, keys),
                HangingWatch(self.transactional_id, self.settings.transaction_timeout_s + HANGING_MARGIN_S),
                lambda claimed: aborted_claims(
                    lambda: make_consumer(target, client_id, None, **CLAIM_READER), claimed, OFFSETS_TIMEOUT_S
                ),
            )
        # What the engine publishes about its progress (offset syncs, the source group's commit) trails by one
        # transaction: commit_transaction() returns once the coordinator has decided, and the markers that make the
        # records readable follow asynchronously, so a sync or a commit claiming them at once could be read before a
        # read_committed reader sees them (the monitor's true lag below the truth). The next transaction cannot add
        # a partition before the previous one's markers are all written (the coordinator answers
        # CONCURRENT_TRANSACTIONS until then), so whatever commits in it may claim the previous one's records.
        self.publisher.hold_syncs = self.exactly_once
        self._syncs_in_txn = False  # the open transaction carries the previous one's syncs: it must commit too
        self._source_positions_due: dict[Key, int] = {}  # the last commit's positions, for the source group
        self.transactions_committed = 0
        self.transactions_aborted = 0
        self.transaction_refused: str | None = None
        self._fences: list[float] = []  # when the producer was fenced (monotonic), within FENCES_WINDOW_S
        self._produced_since_commit = False  # set by the engine's _send; syncs alone come with moved positions
        self._abort_pending: str | None = None  # a report failed in a way that dooms only the transaction
        self._fence_pending: KafkaError | None = None  # the producer failed fatally (seen inside a poll)
        self._fenced_producers: list[Producer] = []
        self._transactions_ready = False
        self._commit_failing_since: float | None = None

    def _transactional_properties(self) -> dict[str, Any]:
        return {
            "transactional.id": self.transactional_id,
            "transaction.timeout.ms": int(self.settings.transaction_timeout_s * 1000),
        }

    # ------------------------------------------------------------------ start-up
    def _init_transactions(self) -> None:
        """From the start-up steps (retried while the target is away): fence and finish what an earlier process
        with our transactional id left open, then open the first transaction. A refused id is an ACL missing."""
        if self._transactions_ready:
            return
        try:
            self.producer.init_transactions(30)
        except KafkaException as exc:
            err = error_of(exc)
            if err is not None and err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise Denied("WRITE", "transactional id", self.transactional_id, "target") from None
            if err is not None and err.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
                raise Denied("IDEMPOTENT_WRITE", "cluster", "kafka-cluster", "target") from None
            raise
        self.producer.begin_transaction()
        self._transactions_ready = True
        log.info("exactly-once: transactional id %s", self.transactional_id)

    # ------------------------------------------------------------------ transactions
    def _report_failed(self, state: PartitionState, err: KafkaError) -> bool:
        """A failed report under exactly-once: True when it is not a record failure. Reports of an aborted
        transaction's records (purged) and of assignments gone are expected; any error that is not about the
        record itself (a timeout, an epoch the target bumped while we were frozen) dooms only the open
        transaction, which is aborted (or its producer replaced) and done again. A record the target refuses for
        what it is stops the engine, as at-least-once does: done again, it would be refused again."""
        if err.code() in PURGED or self.partitions.get(state.key) is not state:
            return True
        return self._transaction_doomed(err)

    def _transaction_doomed(self, err: KafkaError) -> bool:
        """A produce() or report refused under exactly-once: True when it is the transaction's state, not the
        record: the transaction is then aborted, or its producer replaced, before anything commits."""
        outcome = transaction_failure(err.code(), err.fatal())
        if outcome == "fenced":
            self._fence_pending = self._fence_pending or err
        elif outcome == "abort":
            self._abort_pending = self._abort_pending or err.str()
        return outcome != "record"

    def _transaction_hold(self, since_commit_s: float, rounds: CommitRounds) -> float:
        """The hold after a commit the mirror had caught up with (``_commit_transaction``); none after a backlog's
        longest round, where the next records are many and waiting would cost throughput."""
        if not self.exactly_once or since_commit_s >= rounds.longest_s:
            return 0.0
        return self.settings.transaction_hold_s

    def _commit_transaction(self, hold_s: float = 0.0) -> bool:
        """Commit what was produced with the positions it reached. False: nothing committed (aborted or failed).

        ``hold_s``: wait that long after the commit before the next transaction adds a partition. The coordinator
        refuses to add one (CONCURRENT_TRANSACTIONS) until the committed transaction's markers are all written,
        and librdkafka, which has no transactions v2 (KIP-890), asks again only after a fixed 20 ms: a record sent
        at once would wait those 20 ms whenever the markers take longer than the request."""
        self._flush(30)  # every report served: positions and offset syncs settled
        if self._fence_pending is not None:
            self._fenced(self._fence_pending)
            return False
        self._settle_failures()
        if self._stop_reason():
            return False
        owned = []
        for (topic, partition), state in self.partitions.items():
            if state.read_next is not None:
                name = self.target_names.get(topic) or self.policy.target_topic(topic)
                owned.append((state, self._position(state, name, partition, state.read_next)))
        moved = [(state, tp) for state, tp in owned if tp.offset != state.txn_position]
        if not moved and not self._produced_since_commit and not self._syncs_in_txn:
            return True
        if not owned:
            self._abort("nothing owned to commit it with")  # no generation check possible: never commit that
            return False
        offsets = [tp for _, tp in (moved or owned)]
        offsets_sent = False
        assert self.members is not None  # made with the engine under exactly-once
        while True:
            try:
                if not offsets_sent:
                    metadata = self.members.consumer_group_metadata()
                    producer = self.producer
                    call_bounded(
                        lambda: producer.send_offsets_to_transaction(offsets, metadata, COMMIT_TIMEOUT_S),
                        "send_offsets_to_transaction",
                        COMMIT_TIMEOUT_S,
                    )
                    offsets_sent = True
                call_bounded(
                    lambda: self.producer.commit_transaction(COMMIT_TIMEOUT_S), "commit_transaction", COMMIT_TIMEOUT_S
                )
                break
            except KafkaException as exc:
                if not self._retry_commit(exc):
                    return False
            except CallHung as hung:
                self._producer_hung(hung)
                return False
        self.transactions_committed += 1
        self._commit_failing_since = None
        self._produced_since_commit = False
        for state, tp in moved:
            state.txn_position, state.txn_claim = tp.offset, tp.metadata
        assert self.position_reads is not None  # made with the engine under exactly-once
        self.position_reads.hanging.committed({(tp.topic, tp.partition): state.last_downstream for state, tp in moved})
        if hold_s > 0:
            time.sleep(hold_s)
        self.producer.begin_transaction()
        self._syncs_in_txn = self.publisher.release_held()
        # the source group: the previous commit's positions, readable on the target now (see _init_exactly_once)
        due, self._source_positions_due = self._source_positions_due, {state.key: tp.offset for state, tp in owned}
        if due:
            self.publisher.commit(sync=False, positions=due)
        return True

    def _position(self, state: PartitionState, name: str, partition: int, offset: int) -> TopicPartition:
        """A position to commit, with what it claims on the target (hanging.py): a position that moves claims the
        newest record written; one that does not keeps its claim."""
        metadata = state.txn_claim
        if offset != state.txn_position and state.last_downstream >= 0:
            before = -1 if state.txn_position is None else state.txn_position
            metadata = claim_metadata(Claim(state.last_downstream, before, self.transactional_id))
        return TopicPartition(name, partition, offset, metadata=metadata)

    def _settle_failures(self) -> None:
        """A record's report failed for a reason that only dooms the transaction (the target away past the
        transaction timeout, say): abort it and resume from the target's positions, as after a failed commit."""
        why, self._abort_pending = self._abort_pending, None
        if why is not None and not self._stop_reason():
            self._abort(why, always=True)
            self._rewind()

    def _retry_commit(self, exc: KafkaException) -> bool:
        """A commit failed: True to try the same commit again; otherwise the transaction is gone (aborted, or the
        producer fenced and replaced) and every partition is back at its position on the target."""
        err = error_of(exc)
        if err is None:
            raise exc
        if err.retriable() and not err.txn_requires_abort() and not err.fatal() and not self._stop.is_set():
            now = time.monotonic()
            failing_since = self._commit_failing_since = self._commit_failing_since or now
            if now - failing_since < STUCK_COMMIT_S or not self.watch.all_up():
                self._retrying("transaction commit (will retry): %s", err.str())
                self.probes.tick("data path")
                self._stop.wait(0.2)
                return True
            # the target answers others but not this producer (the librdkafka state consumer_guard.py describes)
            log.warning(
                "exactly-once: commits failing for %.0f s while the target answers (%s)", now - failing_since, err.str()
            )
            self._replace_producer()
            return False
        self._commit_failing_since = None
        if err.fatal():
            self._fenced(err)
        else:
            self._abort(err.str(), always=True)
            if not self._stop.is_set():
                self._rewind()
        return False

    def _abort(self, why: str, always: bool = False) -> None:
        """Abort the open transaction (its records never become visible) and open the next one."""
        if not (self._produced_since_commit or self._syncs_in_txn or always):
            return
        log.warning("exactly-once: aborting the open transaction: %s", why)
        deadline = time.monotonic() + 60
        while True:
            try:
                call_bounded(
                    lambda: self.producer.abort_transaction(ABORT_TIMEOUT_S), "abort_transaction", ABORT_TIMEOUT_S
                )
                break
            except CallHung as hung:
                self._producer_hung(hung)
                return
            except KafkaException as exc:
                err = error_of(exc)
                if err is not None and err.fatal():
                    self._fenced(err)
                    return
                if err is not None and err.retriable() and not self._stop.is_set() and time.monotonic() < deadline:
                    self._retrying("exactly-once: aborting (will retry): %s", err.str())
                    self.probes.tick("data path")
                    self._stop.wait(0.5)
                    continue
                # not abortable from this producer: a new one with our transactional id aborts it on the target
                log.warning("exactly-once: the abort failed (%s); replacing the producer", exc)
                self._replace_producer()
                return
        self.transactions_aborted += 1
        self._produced_since_commit = False
        self._syncs_in_txn = False
        self.publisher.transaction_aborted()
        self.producer.begin_transaction()

    def _fenced(self, err: KafkaError) -> None:
        """The producer was fenced (a newer producer with our id, or the target timed our transaction out while we
        were frozen): what it wrote is aborted, and a new producer goes on. Fenced again and again means another
        process runs with our transactional id, and two of them would fence each other for ever: stop then."""
        self._fence_pending = None
        now = time.monotonic()
        self._fences = [t for t in self._fences if now - t < FENCES_WINDOW_S] + [now]
        if len(self._fences) >= FENCES_LIMIT:
            self.transaction_refused = (
                f"fenced {len(self._fences)} times within {FENCES_WINDOW_S / 60:.0f} min on {self.flow.target} "
                f"({err.str()}): another mirror runs with transactional id {self.transactional_id}; give each "
                "process its own mirror.instance_id"
            )
            self._stop.set()
            return
        log.warning(
            "exactly-once: producer fenced (%s); replacing it and resuming from the target's positions", err.str()
        )
        self._replace_producer()

    def _producer_hung(self, hung: CallHung) -> None:
        log.error(
            "exactly-once: the producer's %s did not return within %.0f s (librdkafka is stuck inside it); "
            "replacing the producer: nothing of the open transaction becomes visible, its partitions resume from "
            "the target's positions",
            hung.what,
            hung.waited_s,
        )
        self._replace_producer()

    def _replace_producer(self) -> None:
        """A new producer with the same transactional id (its start aborts whatever the old one left open), and
        every partition back to its position on the target."""
        self._commit_failing_since = None
        self.transactions_aborted += 1
        self._produced_since_commit = False
        self._syncs_in_txn = False
        self.publisher.transaction_aborted()
        self._unassign_all()  # in-flight reports of the old producer update detached states
        old = self.producer
        try:  # no retry of its records may reach the target after the new producer's start (a hanging transaction)
            old.purge(in_queue=True, in_flight=True, blocking=False)
        except Exception as exc:
            log.debug("purging the replaced producer: %s", exc)
        self._fenced_producers.append(old)  # never destroyed: that could wait on its purged records
        self.producer = make_producer(
            self.target_cluster,
            f"mirrorwatch-mirror-{self.flow_name}",
            **self._producer_props(),
        )
        self.publisher.bind(self.producer, self.consumer)
        self._transactions_ready = False
        while not self._stop.is_set():  # a target still settling after an outage: wait for it, never guess
            try:
                self._init_transactions()
                break
            except KafkaException as exc:
                self._retrying("exactly-once: starting transactions again (will retry): %s", exc)
                self.probes.tick("data path")
                self._stop.wait(1.0)
        self._rewind()

    def _stop_reason(self) -> bool:
        return bool(self.failures or self.fatal_error is not None or self.lost)

    def _close_transactions(self) -> None:
        """At shutdown: commit what was written if it can be checked, else abort; leave the positions group."""
        try:
            if not self._transactions_ready:
                pass  # never started (refused at start-up, say): nothing was begun
            elif self._stop_reason():
                self._abort("stopping on a failure")
            elif self.members is not None:
                self._commit_positions()  # the engine's: syncs, then the transaction
                if self._syncs_in_txn:  # the last one's syncs and source commit trail it by one transaction
                    self._commit_positions()
        except Exception as exc:
            log.warning("exactly-once: closing the transaction: %s", exc)
        if self.position_reads is not None:
            self.position_reads.close()
        if self.members is not None:
            try:
                self.members.close()
            except Exception as exc:
                log.debug("closing the positions group's consumer: %s", exc)
