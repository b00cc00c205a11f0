"""Publishing the mirror engine's positions: commits for the mirror group on the source, offset syncs on the
target. Both only ever carry what the acknowledgement rule allows (``PartitionState.commit_position``,
``acked_next``)."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from ..core.access import Denied, error_of, is_denied
from ..core.records import OffsetSync
from .partition_state import PartitionState

log = logging.getLogger("mirrorwatch.mirror")

Key = tuple[str, int]


class PositionPublisher:
    def __init__(
        self,
        partitions: dict[Key, PartitionState],
        syncs_topic: str,
        retrying: Callable[..., None] | None = None,
        group: str = "",
        on_denied: Callable[[Denied], None] | None = None,
    ) -> None:
        self.partitions = partitions  # the engine's own dict: assignments come and go there
        self.syncs_topic = syncs_topic
        self.group = group
        # an ACL missing for a commit or an offset sync: the engine stops with one line (EngineAccess.deny)
        self.on_denied: Callable[[Denied], None] = on_denied or (lambda denied: None)
        # how a failed commit is reported: the engine's lifecycle keeps retries quiet while a cluster is away
        self.retrying: Callable[..., None] = retrying or log.warning
        self.producer: Producer | None = None
        self.deferred: deque[tuple[bytes, bytes]] = deque()  # syncs built inside delivery reports, not sent yet
        self.consumer: Consumer | None = None
        # exactly-once: syncs are held back one transaction (``hold_syncs``, transactions.py says why). ``held``:
        # built while the open transaction runs, they describe its records; ``released``: produced into the open
        # transaction, they describe the records of the one committed before it.
        self.hold_syncs = False
        self.held: list[tuple[bytes, bytes]] = []
        self.released: list[tuple[bytes, bytes]] = []

    def bind(self, producer: Producer, consumer: Consumer) -> None:
        """The engine's clients (the consumer is made with ``committed`` as its commit callback, so after us)."""
        self.producer, self.consumer = producer, consumer

    def commit(
        self, keys: Iterable[Key] | None = None, sync: bool = True, positions: dict[Key, int] | None = None
    ) -> None:
        """Commit what the target acknowledged (``positions``: these instead, for partitions still owned).
        Periodic commits under load are asynchronous (a synchronous round trip on the data path showed up in p99
        latency); idle, revoke and shutdown commits are not."""
        assert self.consumer is not None
        offsets = []
        for key in keys if keys is not None else list(self.partitions if positions is None else positions):
            state = self.partitions.get(key)
            if state is None:
                continue
            target = state.commit_position() if positions is None else positions.get(key)
            if target is None:
                continue
            if state.committed is None or target > state.committed:
                offsets.append(TopicPartition(key[0], key[1], target))
        if not offsets:
            return
        if not sync:
            try:  # the outcome arrives in committed() (served inside consume())
                self.consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as exc:
                self.retrying("commit failed (will retry): %s", exc.args[0].str() if exc.args else exc)
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            error = error_of(exc)
            if error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                self.on_denied(Denied("READ", "group", self.group, "source"))  # a refused topic is named by the fetch
            self.retrying("commit failed (will retry): %s", exc.args[0].str() if exc.args else exc)
            return
        for tp in offsets:
            state = self.partitions.get((tp.topic, tp.partition))
            if state is not None:
                state.committed = tp.offset

    def committed(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The consumer's commit callback: record what the group coordinator confirmed."""
        if err is not None:
            # A commit needs READ on the group and on each topic. A refused topic is not named here: the client
            # marks every partition of the commit refused, so the fetch error (which names the topic) says it.
            if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                self.on_denied(Denied("READ", "group", self.group, "source"))
            self.retrying("commit failed (will retry): %s", err.str())
            return
        for tp in partitions:
            state = self.partitions.get((tp.topic, tp.partition))
            if tp.error is None and state is not None and (state.committed is None or tp.offset > state.committed):
                state.committed = tp.offset

    def emit_syncs(self, keys: Iterable[Key] | None = None, force: bool = False, defer: bool = False) -> None:
        """Publish an offset sync for each partition that moved (all given ones with ``force``). ``defer``: only
        build them now (the pair of offsets as it is now) and send them from ``send_deferred``: a delivery
        report may not call the producer's poll() (a BufferError would), as a nested poll on the same client
        aborts the process in confluent-kafka (CallState assertion)."""
        now = int(time.time() * 1000)
        for key in keys if keys is not None else list(self.partitions):
            state = self.partitions.get(key)
            if state is None or state.acked_next is None:
                continue
            moved = state.acked_next != state.synced_acked or state.read_next != state.synced_read
            if not (moved or force):
                continue
            sync = OffsetSync(
                key[0],
                key[1],
                state.last_upstream,
                state.last_downstream,
                state.acked_next,
                state.read_next if state.read_next is not None else state.acked_next,
                now,
            )
            if defer:
                self.deferred.append((sync.key(), sync.to_value()))
            else:
                self._publish(sync.key(), sync.to_value())
            state.synced_acked, state.synced_read = state.acked_next, state.read_next

    def announce_resumes(self, positions: dict[Key, int]) -> set[Key]:
        """At-least-once, before a new assignment sends anything: per partition, a sync with its resume position
        and no mapping (upstream and downstream -1). Records sent again from there land on the target after the
        newest mapped sync's downstream offset, where the monitor's estimate (``core.lag.target_side_acked_next``)
        would count them as new source records; a sync without a mapping makes it fall back to the positions
        until the first record's sync maps them again. The keys whose sync the target has not acknowledged yet
        (the set shrinks as the reports are served)."""
        assert self.producer is not None
        pending = set(positions)
        now = int(time.time() * 1000)

        def acknowledged(key: Key) -> Callable[[KafkaError | None, Any], None]:
            def report(err: KafkaError | None, msg: Any) -> None:
                if err is None:
                    pending.discard(key)
                else:
                    self._delivered(err, msg)

            return report

        for key, position in positions.items():
            sync = OffsetSync(key[0], key[1], -1, -1, position, position, now)
            try:
                self.producer.produce(
                    self.syncs_topic, key=sync.key(), value=sync.to_value(), on_delivery=acknowledged(key)
                )
            except (KafkaException, BufferError) as exc:  # not sent: the caller waits for it in vain, and says so
                log.debug("resume sync of %s[%d] not sent: %s", key[0], key[1], exc)
        return pending

    def send_deferred(self) -> None:
        """Send the syncs built inside delivery reports (the poll() this may do can add more: sent too)."""
        while self.deferred:
            key, value = self.deferred.popleft()
            self._publish(key, value)

    def _publish(self, key: bytes, value: bytes) -> None:
        if self.hold_syncs:
            self.held.append((key, value))
        else:
            self._produce(self.syncs_topic, key, value)

    def release_held(self) -> bool:
        """Exactly-once, after a commit: the syncs held during the committed transaction go into the one now open.
        True when there were any (the open transaction must then be committed too, even with no records)."""
        self.released, self.held = self.held, []
        for key, value in self.released:
            self._produce(self.syncs_topic, key, value)
        return bool(self.released)

    def transaction_aborted(self) -> None:
        """Exactly-once, after an abort: what was held described aborted records (dropped); what was released
        described committed ones, and is held again for the next transaction."""
        self.held, self.released = self.released, []

    def _produce(self, topic: str, key: bytes, value: bytes) -> None:
        assert self.producer is not None
        while True:
            try:
                self.producer.produce(topic, key=key, value=value, on_delivery=self._delivered)
                return
            except KafkaException as exc:  # refused at once when the client already knows it may not write there
                error = error_of(exc)
                if error is not None and error.code() in (KafkaError._FATAL, KafkaError._STATE):
                    # (_STATE: exactly-once, a transaction that must be aborted first; the sync is built again
                    # after the partitions go back to their positions on the target)
                    # the producer failed fatally on a mirrored record: its delivery report stops the engine and
                    # names the record; an offset sync now would not be written anyway
                    return
                if not is_denied(exc):
                    raise
                self.on_denied(Denied("WRITE", "topic", topic, "target"))
                return
            except BufferError:
                self.producer.poll(0.1)  # reports served here are settled by the caller's round

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None and is_denied(err):
            self.on_denied(Denied("WRITE", "topic", msg.topic(), "target"))
