"""At-least-once: the mirror group on the source shares out the partitions, and these are its rebalance callbacks
(a mixin of MirrorEngine). Under exactly-once a group on the target does that instead (transactions.py)."""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import TopicPartition

from .partition_state import PartitionState

log = logging.getLogger("mirrorwatch.mirror")


class SourceGroupRebalances:
    # the engine's, set in MirrorEngine.__init__
    partitions: dict
    publisher: Any
    owned: frozenset
    rebalances: int
    _flush: Any

    def _on_assign(self, consumer, partitions) -> None:
        # A rebalance callback must never raise: the exception would surface from consume() and end the engine.
        self.rebalances += 1
        if not partitions:
            return
        for tp in partitions:
            key = (tp.topic, tp.partition)
            # read_next and acked_next are learned below, or from the first fetched record
            self.partitions[key] = PartitionState(key, self)
        try:
            for tp in consumer.committed(partitions, timeout=30):
                state = self.partitions[(tp.topic, tp.partition)]
                if tp.offset >= 0:
                    state.committed = state.read_next = state.acked_next = tp.offset
                else:
                    low, _ = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
                    state.read_next = state.acked_next = low
        except Exception as exc:  # a cluster restarting: the first fetched record tells where we start
            log.warning("could not look up start positions (%s); taking them from the first records", exc)
        self.owned = frozenset(self.partitions)
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions))

    def _on_revoke(self, consumer, partitions) -> None:
        self.rebalances += 1
        try:
            # hand the partitions over cleanly: everything sent must be acknowledged and committed first
            self._flush(30)
            self.publisher.commit([(tp.topic, tp.partition) for tp in partitions])
            self.publisher.emit_syncs([(tp.topic, tp.partition) for tp in partitions], force=True)
        except Exception as exc:  # never raise from a rebalance callback; the next owner resumes from the commit
            log.warning("handing over revoked partitions: %s", exc)
        for tp in partitions:
            self.partitions.pop((tp.topic, tp.partition), None)
        self.owned = frozenset(self.partitions)

    def _on_lost(self, consumer, partitions) -> None:
        self.rebalances += 1
        for tp in partitions:  # another worker owns them now: committing would be wrong
            self.partitions.pop((tp.topic, tp.partition), None)
        self.owned = frozenset(self.partitions)
        # their in-flight records still get reports; those update the detached states (see the module note)
