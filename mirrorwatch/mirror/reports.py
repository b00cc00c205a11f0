"""The mirror engine's delivery reports: what a report (or a failed one) does to a partition's positions, and
the fatal producer error that stops the engine. Part of :class:`MirrorEngine` (a mixin, as ``lifecycle.py``)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException, Message

from .acknowledgement import RecordFailure
from .engine_state import EngineState

if TYPE_CHECKING:
    from .partition_state import FifoEntry, PartitionState

log = logging.getLogger("mirrorwatch.mirror")


class DeliveryReports(EngineState):
    def _segment_failed(self, state: PartitionState, entry: FifoEntry, err: KafkaError, msg: Message) -> None:
        """A report failed: every record of its segment (those sent since the previous report) may be the one
        refused, so each is named a failure; ``culprit`` picks the record to name, commits stay below the first."""
        if self.exactly_once and self._report_failed(state, err):
            return  # not a record the target refused: an aborted or doomed transaction (transactions.py)
        messages, first, last = entry[3], entry[4], entry[5]
        topic, partition = state.key
        for m in messages[first : last + 1]:
            if m.error() is None and m.topic() == topic and m.partition() == partition:
                size = len(m.value() or b"") + len(m.key() or b"")
                self._failed(state, m.offset(), msg.topic() or "", size, err)  # a report names its topic

    def _failed(self, state: PartitionState, source_offset: int, target_topic: str, size: int, err: KafkaError) -> None:
        """A record the target refused (size -1 = unknown): count it, never commit past it, stop."""
        topic, partition = state.key
        retriable = err.retriable()
        self.produce_errors[(topic, retriable)] = self.produce_errors.get((topic, retriable), 0) + 1
        state.failed(source_offset)
        self.failures.append(
            RecordFailure(topic, partition, source_offset, target_topic, size, err.name(), err.str(), retriable)
        )
        self._stop.set()

    def _sync_due(self, state: PartitionState, entry: FifoEntry, msg: Message) -> None:
        """The report of every N-th record: publish an offset sync for exactly that record."""
        state.next_sync_at = entry[1] + self.settings.offset_sync_every
        if self.partitions.get(state.key) is not state:
            return  # a revoked or lost assignment: its new owner publishes syncs
        state.acknowledged(entry[0], msg.offset())
        self.publisher.emit_syncs([state.key], defer=True)  # inside poll(): sent by _settle, after it

    def _serve(self, timeout: float) -> None:
        """Serve delivery reports, then settle them."""
        try:
            self.producer.poll(timeout)
        except KafkaException as exc:
            self._fatal(exc)
        self._settle()

    def _flush(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        try:
            remaining = self.producer.flush(timeout)
        except KafkaException as exc:
            self._fatal(exc)
            if self.exactly_once:
                # a fenced transactional producer: flushing it again raised a SystemError inside the client; it
                # is replaced and its records done again (transactions.py), nothing here names a record
                return len(self.producer)
            remaining = self.producer.flush(timeout)  # the failed records' reports name the refused record
        except SystemError as exc:
            # confluent-kafka 2.16's flush of a transactional producer the target fenced returned NULL without an
            # exception; it is fenced all the same, and replaced like one (transactions.py)
            if not self.exactly_once:
                raise
            self._fence_pending = self._fence_pending or KafkaError(KafkaError._FENCED, f"flush: {exc}", fatal=True)
            return len(self.producer)
        while self.publisher.deferred or self.touched:  # the reports' offset syncs go out and are flushed too
            self._settle()
            if self.exactly_once and self._fence_pending is not None:
                return len(self.producer)
            remaining = self.producer.flush(max(0.0, deadline - time.monotonic()))
        return remaining

    def _settle(self) -> None:
        """After a poll: send the offset syncs its reports built, settle the partitions they touched."""
        if self.publisher.deferred:
            self.publisher.send_deferred()
        if self.touched:
            self._finish_round()

    def _fatal(self, exc: KafkaException) -> None:
        """The producer failed fatally (``poll()`` raises it once): with ``enable.gapless.guarantee`` a record was
        refused, so every later one fails too. Stop; the failed reports, served from here on, name the record."""
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        if self.exactly_once and error is not None:
            # a transactional producer fails fatally when fenced: replaced between batches (transactions.py)
            self._fence_pending = error
            return
        self.fatal_error = error
        log.debug("producer fatal error: %s", exc)
        self._stop.set()

    def _finish_round(self) -> None:
        """Settle this poll round's reports, once per partition that had any: positions, counters, latency.

        Latency: the round's newest report stands for the round's records (weighted by their count); records of
        one round were acknowledged within milliseconds of each other."""
        now = time.time()
        touched, observe = self.touched, self.latency.observe
        for state in touched:
            msg, entry = state.round_msg, state.round_entry
            assert msg is not None and entry is not None  # a state is touched by setting both (PartitionState)
            source_offset, records, nbytes = entry[0], entry[1], entry[2]
            state.round_msg = state.round_entry = None
            acked_now = records - state.records
            state.records, state.bytes = records, nbytes
            state.acknowledged(source_offset, msg.offset())
            ts_type, ts = msg.timestamp()
            if ts_type:
                observe(max(0.0, now - ts / 1000.0), acked_now)
        touched.clear()
