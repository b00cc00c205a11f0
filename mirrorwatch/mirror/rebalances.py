"""At-least-once: the mirror group on the source shares out the partitions, and these are its rebalance callbacks
(a mixin of MirrorEngine). Under exactly-once a group on the target does that instead (transactions.py)."""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from ..core.access import error_of
from .engine_state import EngineState, Key
from .partition_state import PartitionState
from .resume import READ_TIMEOUT_S, newest_syncs, resume_position, target_ends

log = logging.getLogger("mirrorwatch.mirror")

# the group's commits are asked for up to this long in all, in tries of COMMITTED_TRY_S (see _committed)
COMMITTED_TIMEOUT_S = 30.0
COMMITTED_TRY_S = 1.0


class SourceGroupRebalances(EngineState):
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # A rebalance callback must never raise: the exception would surface from consume() and end the engine.
        self.rebalances += 1
        if not partitions:
            return
        for tp in partitions:
            key = (tp.topic, tp.partition)
            # read_next and acked_next are learned below, or from the first fetched record
            self.partitions[key] = PartitionState(key, self)
        try:
            committed = self._committed(consumer, partitions)
            later = self._resume_from_syncs(consumer, committed)
            for tp in committed:
                state = self.partitions[(tp.topic, tp.partition)]
                if tp.offset >= 0:
                    state.committed = state.read_next = state.acked_next = tp.offset
                else:
                    low, _ = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)
                    state.read_next = state.acked_next = low
                if (tp.topic, tp.partition) in later:
                    state.read_next = state.acked_next = later[(tp.topic, tp.partition)]
            # Every start position is given: left to librdkafka, it would look the commits up again, and a failed
            # look-up leaves partitions it never fetches (consumer_guard.assignment_fetch_failed).
            starts = [self._start_at(tp.topic, tp.partition) for tp in committed]
            consumer.incremental_assign(starts)
        except Exception as exc:  # a cluster restarting: the first fetched record tells where we start
            log.warning("could not look up start positions (%s); taking them from the first records", exc)
            starts = partitions
        self.owned = frozenset(self.partitions)
        # where each starts: what a replay after a rebalance is read from
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}" for tp in starts))

    def _start_at(self, topic: str, partition: int) -> TopicPartition:
        state = self.partitions[(topic, partition)]
        return TopicPartition(topic, partition, state.read_next if state.read_next is not None else OFFSET_BEGINNING)

    def _committed(self, consumer: Consumer, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The group's commits for these partitions. A rebalance callback runs inside the data loop's poll(), so a
        coordinator still loading (a source broker just restarted) would hold the loop, and a stop with it, for the
        whole wait: asked in short tries instead, given up at once when the engine is stopping."""
        deadline = time.monotonic() + COMMITTED_TIMEOUT_S
        while True:
            try:
                return consumer.committed(partitions, timeout=COMMITTED_TRY_S)
            except KafkaException as exc:
                err = error_of(exc)
                timed_out = err is not None and err.code() == KafkaError._TIMED_OUT
                if not timed_out or self._stop.is_set() or time.monotonic() >= deadline:
                    raise

    def _resume_from_syncs(self, consumer: Consumer, committed: list[TopicPartition]) -> dict[Key, int]:
        """The partitions whose newest offset sync on the target is later than their commit, and where each then
        resumes (resume.py says why). Anything unread leaves a partition at its commit: more sent again, never less."""
        try:
            syncs = newest_syncs(self.target_cluster, self.syncs_topic, [(tp.topic, tp.partition) for tp in committed])
            ahead = {
                (tp.topic, tp.partition): tp.offset
                for tp in committed
                if (tp.topic, tp.partition) in syncs and syncs[(tp.topic, tp.partition)].acked_next > tp.offset
            }
            target_of = {
                key: (self.target_names.get(key[0]) or self.policy.target_topic(key[0]), key[1]) for key in ahead
            }
            ends = target_ends(self.target_admin, list(target_of.values()))
            later: dict[Key, int] = {}
            for key, commit in ahead.items():
                _, source_end = consumer.get_watermark_offsets(TopicPartition(*key), timeout=READ_TIMEOUT_S)
                sync = syncs[key]
                resume = resume_position(
                    commit, sync.acked_next, sync.downstream_offset, source_end, ends[target_of[key]]
                )
                if resume.from_sync:
                    later[key] = resume.position
                    log.info(
                        "resuming %s[%d] at %d, from the target's offset sync (the group's commit, %d, is behind: "
                        "%d records not sent again)",
                        key[0],
                        key[1],
                        resume.position,
                        commit,
                        resume.position - max(commit, 0),
                    )
            return later
        except Exception as exc:
            log.warning("could not read the offset syncs back (%s); resuming from the group's commits", exc)
            return {}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances += 1
        log.info("revoked %s: handing them over", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions))
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

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances += 1
        log.warning(
            "lost %s (the group moved on without us: nothing committed for them; %d records in flight)",
            ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions),
            len(self.producer),
        )
        for tp in partitions:  # another worker owns them now: committing would be wrong
            self.partitions.pop((tp.topic, tp.partition), None)
        self.owned = frozenset(self.partitions)
        # their in-flight records still get reports; those update the detached states (see the module note)
