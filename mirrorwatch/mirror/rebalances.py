"""At-least-once: the mirror group on the source shares out the partitions, and these are its rebalance callbacks
(a mixin of MirrorEngine). Under exactly-once a group on the target does that instead (transactions.py)."""

from __future__ import annotations

import logging
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from ..core.access import error_of
from .engine_state import EngineState, Key
from .partition_state import PartitionState
from .resume import end_offsets, known_progress, newest_syncs, resume_position

log = logging.getLogger("mirrorwatch.mirror")

# the group's commits are asked for up to this long in all, in tries of COMMITTED_TRY_S (see _committed)
COMMITTED_TIMEOUT_S = 30.0
COMMITTED_TRY_S = 1.0
SET_ASIDE_FLUSH_S = 10.0  # how long records in flight are waited for when partitions leave without a hand-over
ANNOUNCE_TIMEOUT_S = 10.0  # how long a new assignment waits for the target to take its resume positions


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
            later = self._resume_from_syncs(committed)
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
            self._announce_resumes({(tp.topic, tp.partition): tp.offset for tp in starts if tp.offset >= 0})
            consumer.incremental_assign(starts)
        except Exception as exc:  # a cluster restarting: the first fetched record tells where we start
            log.warning("could not look up start positions (%s); taking them from the first records", exc)
            starts = partitions
        self.owned = frozenset(self.partitions)
        # where each starts: what a replay after a rebalance is read from
        log.info("assigned %s", ", ".join(f"{tp.topic}[{tp.partition}]@{tp.offset}" for tp in starts))

    def _announce_resumes(self, positions: dict[Key, int]) -> None:
        """Say on the target where each partition resumes before sending any of it, and wait (up to
        ANNOUNCE_TIMEOUT_S) until the target has it (``PositionPublisher.announce_resumes`` says why)."""
        pending = self.publisher.announce_resumes(positions)
        deadline = time.monotonic() + ANNOUNCE_TIMEOUT_S
        while pending and time.monotonic() < deadline and not self._stop.is_set():
            self._serve(0.05)  # data reports served here are settled with them
        if pending:
            log.warning(
                "the target has not acknowledged where %s resume; sending them anyway (until their first records' "
                "offset syncs, the monitor's true lag may count records sent again as new)",
                ", ".join(f"{t}[{p}]" for t, p in sorted(pending)),
            )

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

    def _resume_from_syncs(self, committed: list[TopicPartition]) -> dict[Key, int]:
        """The partitions whose target-side progress is later than their commit, and where each then resumes
        (resume.py says why). The progress is the newer of the partition's newest offset sync and what this process
        itself saw acknowledged before the partition last left it (``set_aside``). Each partition is decided on its
        own: anything unread leaves that one at its commit (more sent again, never less)."""
        keys = [(tp.topic, tp.partition) for tp in committed]
        try:
            syncs = newest_syncs(self.target_cluster, self.syncs_topic, keys)
        except Exception as exc:
            log.warning("could not read the offset syncs back (%s); resuming from the group's commits", exc)
            syncs = {}
        progress = {key: known_progress(syncs.get(key), self.set_aside.pop(key, None)) for key in keys}
        ahead = {
            (tp.topic, tp.partition): tp.offset
            for tp in committed
            if (seen := progress[(tp.topic, tp.partition)]) is not None and seen[0] > tp.offset
        }
        target_of = {key: (self.target_names.get(key[0]) or self.policy.target_topic(key[0]), key[1]) for key in ahead}
        try:
            ends = end_offsets(self.target_admin, list(target_of.values()))
        except Exception as exc:
            log.warning("could not read the target's end offsets (%s); resuming from the group's commits", exc)
            return {}
        later: dict[Key, int] = {}
        source_ends = self._source_ends(list(ahead))
        for key, commit in ahead.items():
            acked_next, downstream = progress[key] or (-1, -1)
            resume = resume_position(commit, acked_next, downstream, source_ends[key], ends[target_of[key]])
            if resume.from_sync:
                later[key] = resume.position
                log.info(
                    "resuming %s[%d] at %d, from the target's acknowledgements (the group's commit, %d, is behind: "
                    "%d records not sent again)",
                    key[0],
                    key[1],
                    resume.position,
                    commit,
                    resume.position - max(commit, 0),
                )
        return later

    def _source_ends(self, keys: list[Key]) -> dict[Key, int]:
        """The source partitions' end offsets, in one request, asked once more for any left unread (a leader that
        just moved answers NOT_LEADER_OR_FOLLOWER for a moment); -1 where still unread: that partition resumes
        from its commit."""
        ends = end_offsets(self.source_admin, keys)
        unread = [key for key, end in ends.items() if end < 0]
        if unread and not self._stop.is_set():
            time.sleep(0.5)
            ends.update(end_offsets(self.source_admin, unread))
        for key in (key for key, end in ends.items() if end < 0):
            log.warning("%s[%d]: source end offset unread; it resumes from its commit", *key)
        return ends

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances += 1
        keys = [(tp.topic, tp.partition) for tp in partitions]
        log.info("revoked %s: handing them over", ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions))
        # Hand the partitions over cleanly: everything sent acknowledged, then the offset syncs (on the target,
        # which a source coordinator away does not hold up), then the commit. Each step on its own: never raise
        # from a rebalance callback; the next owner resumes from the newer of the commit and the syncs.
        try:
            self._flush(30)
        except Exception as exc:
            log.warning("handing over revoked partitions: flushing: %s", exc)
        try:
            self.publisher.emit_syncs(keys, force=True)
        except Exception as exc:
            log.warning("handing over revoked partitions: offset syncs: %s", exc)
        try:
            self.publisher.commit(keys)
        except Exception as exc:
            log.warning("handing over revoked partitions: commit: %s", exc)
        self._set_aside(keys)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.rebalances += 1
        log.warning(
            "lost %s (the group moved on without us: nothing committed for them; %d records in flight)",
            ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions),
            len(self.producer),
        )
        # another worker owns them now: committing or syncing them would be wrong (a late sync could land after
        # the new owner's and describe a target it has written to since)
        self._set_aside([(tp.topic, tp.partition) for tp in partitions], flush_s=SET_ASIDE_FLUSH_S)

    def _set_aside(self, keys: list[Key], flush_s: float = 0.0) -> None:
        """Partitions leaving this process. They are detached first (their records' reports then update only the
        detached states, and publish no sync), their records in flight waited for up to ``flush_s``, and how far the
        target acknowledged each is kept in ``set_aside``: a fact whoever owns the partition next, so when it is
        assigned here again (often: the coordinator came back) it resumes after them instead of sending them again
        (``_resume_from_syncs``)."""
        states = [state for key in keys if (state := self.partitions.pop(key, None)) is not None]
        self.owned = frozenset(self.partitions)
        if flush_s > 0 and states:
            started = time.monotonic()
            try:
                left = self._flush(flush_s)
            except Exception as exc:  # never raise from a rebalance callback: the resume then sends more again
                log.warning("waiting for the records in flight of partitions set aside: %s", exc)
            else:
                log.info("waited %.1f s for the records in flight (%d left)", time.monotonic() - started, left)
        for state in states:
            if state.acked_next is not None and state.last_downstream >= 0:
                self.set_aside[state.key] = (state.acked_next, state.last_downstream)
