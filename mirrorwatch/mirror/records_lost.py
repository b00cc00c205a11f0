"""Records lost before they were mirrored: the source log start passed the engine's position (retention,
DeleteRecords, a recreated topic). Detected where positions move — a fetched record past the expected offset,
an idle flush — and, by ``mirror.on_records_lost``, stopped on (exit code 4, ``engine.RecordsLost``) or
logged at ERROR, counted and skipped.

A mix-in of :class:`~mirrorwatch.mirror.engine.MirrorEngine` (it uses the engine's consumer, settings, stop
event and partition states), kept apart so the data path's module stays about moving records."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException, TopicPartition

from .engine_state import EngineState

if TYPE_CHECKING:
    from .partition_state import PartitionState

log = logging.getLogger("mirrorwatch.mirror")


class RecordsLostDetection(EngineState):
    def _jumped(self, state: PartitionState, expected: int, offset: int) -> bool:
        """The source skipped from ``expected`` to ``offset``. Transaction markers, aborted records and compaction
        do that harmlessly; records lost to the log start (retention, DeleteRecords, a recreated topic: the
        consumer's offset went out of range and auto.offset.reset moved it) do not. The log start the fetch
        responses carry (librdkafka's cached low watermark; no request) tells them apart. Returns True when
        the engine stops (``mirror.on_records_lost: stop``)."""
        topic, partition = state.key
        low = self._log_start(topic, partition, cached=True)
        if low <= expected:
            return False
        return self._records_lost(state, expected, min(low, offset))

    def _log_start(self, topic: str, partition: int, cached: bool) -> int:
        try:
            low, _high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5, cached=cached)
        except KafkaException as exc:
            log.warning("cannot read the log start of %s[%d]: %s", topic, partition, exc)
            return -1
        return low if low is not None else -1

    def _records_lost(self, state: PartitionState, first: int, end: int) -> bool:
        """Source offsets [first, end) were removed before the engine read them."""
        topic, partition = state.key
        count = end - first
        if self.settings.on_records_lost == "stop":
            state.failed(first)  # nothing is committed past the gap: the group still shows where it stopped
            self.lost.append((topic, partition, first, end))
            self._stop.set()
            return True
        self.records_lost[state.key] = self.records_lost.get(state.key, 0) + count
        log.error(
            "records lost before they were mirrored: %s[%d] offsets %d-%d (%d record(s)) were removed from "
            "the source (retention, DeleteRecords or a recreated topic); continuing at %d "
            "(mirror.on_records_lost: continue)",
            topic,
            partition,
            first,
            end - 1,
            count,
            end,
        )
        return False

    def lost_message(self) -> str | None:
        if not self.lost:
            return None
        topic, partition, first, end = self.lost[0]
        more = f" (and {len(self.lost) - 1} more partition(s))" if len(self.lost) > 1 else ""
        return (
            f"records lost before they were mirrored: {topic}[{partition}] offsets {first}-{end - 1} "
            f"({end - first} record(s)) are gone from the source (retention, DeleteRecords or a recreated "
            f"topic){more}; stopped without committing past them. To accept the loss, set "
            f"mirror.on_records_lost: continue (counted in mirrorwatch_mirror_records_lost_total)"
        )

    def _advance_idle(self) -> None:
        """Idle with nothing in flight: move each partition's read and acked positions to the consumer's position.

        After a transaction's commit marker (or aborted records, or a compacted tail) the position is past
        offsets that no consumer ever receives; publishing the last record + 1 would leave true lag ≥ 1 on an
        idle transactional topic forever. A position past the log start's jump is checked like a jump in _send.
        """
        states = [
            st
            for st in self.partitions.values()
            if st.read_next is not None and not st.fifo and not st.unmarked and st.failed_at is None
        ]
        if not states:
            return
        try:
            positions = self.consumer.position([TopicPartition(*st.key) for st in states])
        except KafkaException as exc:
            log.debug("consumer position: %s", exc)
            return
        for st, tp in zip(states, positions):
            read_next = st.read_next
            assert read_next is not None  # the states were picked for having one
            if tp.offset < 0 and tp.error is None:
                # no record fetched since the assignment: a log start past our offset with nothing after it
                # (every record deleted) shows only in the cached low watermark
                low = self._log_start(tp.topic, tp.partition, cached=True)
                if low > read_next and not self._jumped(st, read_next, low):
                    st.read_next = st.acked_next = low
                continue
            if tp.offset > read_next and tp.error is None:
                if self._jumped(st, read_next, tp.offset):
                    continue
                st.read_next = tp.offset
                if st.acked_next is None or st.acked_next < tp.offset:
                    st.acked_next = tp.offset
