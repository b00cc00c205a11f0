"""Exactly-once: which partitions this mirror owns (the positions group's assignment) and where each starts.

The positions group on the target (``naming.positions_group``) hands the partitions out: its consumer subscribes to
the mirrored target topics and never fetches; the source consumer ``assign``s the matching source partitions once
their positions are known. transactions.py holds the transactions that move those positions.

A new owner must never start a partition from a position that a transaction still open on the target may move
(KIP-447's "stable offsets"). A consumer's ``committed()`` with read_committed waits for such a transaction (up to
its timeout, up to ``transaction.timeout.ms`` of the process that died or froze holding it) and answers for all
partitions or none: called from the data loop, one frozen peer's open transaction would stop every partition of
this mirror, its own open transaction included, which could then outlive its own timeout.

So the positions are asked with the admin client's ``list_consumer_group_offsets(require_stable=True)``: one
request, an answer per partition, UNSTABLE_OFFSET_COMMIT on those a transaction still holds. (That call crashes
confluent-kafka 2.16 when the cluster has no group coordinator at all, before ``__consumer_offsets`` exists; it is
only made once this mirror's positions-group consumer has joined its group, so the coordinator exists.) The data loop polls
the answer (never waits for it); the stable partitions start at once, the others are asked again until their
transaction is committed or aborted. Kafka Streams does the same for its tasks (KIP-572: a task whose committed
offsets are not stable waits, the others run).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_STORED, ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from ..core.clients import make_consumer
from ..core.naming import positions_group
from .consumer_guard import STATS_INTERVAL_MS
from .partition_state import PartitionState

log = logging.getLogger("mirrorwatch.mirror")

Key = tuple[str, int]

ASK_AGAIN_S = 0.5  # a partition a transaction still holds: how soon to ask again
REQUEST_TIMEOUT_S = 10.0  # a target away: fail and ask again with a new client (below)


def sort_answers(
    answers: list[tuple[Key, int, int | None]], wanted: dict[Key, int], asked: dict[Key, int]
) -> tuple[list[tuple[Key, int]], list[Key]]:
    """Which answers to act on (pure). ``answers``: (partition, offset, error code or None) as the target gave
    them; ``wanted``: the partitions still waiting, each with the token of the assignment that wants it; ``asked``:
    the tokens the request was sent for. Returns (partition, offset) to start from, and the partitions a
    transaction still holds. An answer for a partition revoked meanwhile, or revoked and assigned again since the
    request left (a new owner may have moved it in between), is dropped: it is asked again."""
    found, held = [], []
    for key, offset, error in answers:
        if key not in wanted or wanted[key] != asked.get(key):
            continue
        if error is None:
            found.append((key, offset))
        elif error == KafkaError.UNSTABLE_OFFSET_COMMIT:
            held.append(key)
    return found, held


class PositionReads:
    """The partitions waiting for their position on the target, and the one request asking for them."""

    def __init__(self, new_admin: Callable[[], Any], group: str, retrying: Callable[..., None]) -> None:
        self.new_admin = new_admin
        self.admin = new_admin()
        self.group = group
        self.retrying = retrying  # the engine's: a warning, unless the cluster watch already said the target is away
        self.wanted: dict[Key, int] = {}  # partition → token of the assignment that wants it
        self._token = 0
        self._request: Any = None  # the future of the request in flight
        self._asked: dict[Key, int] = {}
        self._next_ask = 0.0
        self._held_said: set[Key] = set()  # held partitions already logged, so a long wait is said once

    def want(self, keys: list[Key]) -> None:
        self._token += 1
        for key in keys:
            self.wanted[key] = self._token
        self._next_ask = 0.0

    def forget(self, keys: list[Key]) -> None:
        for key in keys:
            self.wanted.pop(key, None)
            self._held_said.discard(key)

    def clear(self) -> None:
        self.wanted.clear()
        self._held_said.clear()

    def poll(self) -> list[tuple[Key, int]]:
        """From the data loop, never blocking: the partitions whose position arrived, and where each starts
        (an offset < 0: never committed in the positions group). Sends the next request when one is due."""
        found: list[tuple[Key, int]] = []
        if self._request is not None and self._request.done():
            found = self._answered(self._request)
            self._request = None
        if self._request is None and self.wanted and time.monotonic() >= self._next_ask:
            self._asked = dict(self.wanted)
            request = ConsumerGroupTopicPartitions(self.group, [TopicPartition(t, p) for t, p in self._asked])
            self._request = self.admin.list_consumer_group_offsets(
                [request], require_stable=True, request_timeout=REQUEST_TIMEOUT_S
            )[self.group]
        return found

    def _answered(self, request: Any) -> list[tuple[Key, int]]:
        try:
            result = request.result()
        except Exception as exc:  # a target away, a coordinator loading or moving: ask again, never guess
            self.retrying("exactly-once: reading positions (will retry): %s", exc)
            self._next_ask = time.monotonic() + ASK_AGAIN_S
            # with a new client: after a broker's restart, librdkafka 2.16's admin client kept timing out on
            # group requests for minutes while a new one was answered at once (as monitor/kafka_io.py found)
            self.admin = self.new_admin()
            return []
        answers = [
            ((tp.topic, tp.partition), tp.offset, tp.error.code() if tp.error is not None else None)
            for tp in result.topic_partitions
        ]
        found, held = sort_answers(answers, self.wanted, self._asked)
        for key, _ in found:
            del self.wanted[key]
            self._held_said.discard(key)
        news = [key for key in held if key not in self._held_said]
        if news:
            self._held_said.update(news)
            log.info(
                "exactly-once: waiting for a transaction still open on the target before taking %s "
                "(its positions are not stable yet)",
                ", ".join(f"{t}[{p}]" for t, p in news),
            )
        if self.wanted:
            self._next_ask = time.monotonic() + ASK_AGAIN_S
        return found


class PositionsGroup:
    """A mixin of MirrorEngine (with ExactlyOnce): the positions group's consumer and its rebalance callbacks."""

    # the engine's, set in MirrorEngine.__init__
    consumer: Any
    members: Any
    partitions: dict
    position_reads: PositionReads | None
    settings: Any
    policy: Any
    group: str
    flow_name: str
    target_cluster: Any
    owned: frozenset
    _stop: Any

    def _make_members(self) -> Any:
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
        props["stats_cb"] = self._on_stats  # type: ignore[attr-defined]
        return make_consumer(
            self.target_cluster, f"mirrorwatch-mirror-{self.flow_name}", positions_group(self.group), **props
        )

    def _eos_assign(self, members, partitions) -> None:
        members.incremental_assign(partitions)
        members.pause(partitions)  # it never fetches: its offsets are source positions, not target ones
        self._take(partitions)

    def _take(self, target_partitions) -> None:
        """Start mirroring the source partitions of these target partitions from their positions on the target,
        as each position arrives (``_start_from``, from the data loop): never a guess, never a wait here."""
        assert self.position_reads is not None
        self.position_reads.want([(tp.topic, tp.partition) for tp in target_partitions])

    def _start_from(self, found: list[tuple[Key, int]]) -> None:
        source_tps = []
        for (target_topic, partition), offset in found:
            topic = self.policy.source_topic(target_topic)
            if topic is None:
                continue
            key = (topic, partition)
            state = self.partitions[key] = PartitionState(key, self)  # type: ignore[arg-type]
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

    def _eos_revoke(self, members, partitions) -> None:
        """Hand over cleanly: commit what was written (still under our generation), then let go."""
        try:
            self._commit_transaction()
        except Exception as exc:  # never raise from a rebalance callback: the next owner resumes from the target
            log.warning("handing over revoked partitions: %s", exc)
        self._drop(partitions)
        members.incremental_unassign(partitions)

    def _eos_lost(self, members, partitions) -> None:
        """Another member may own them now: nothing written since the last commit may become visible."""
        log.warning(
            "exactly-once: the positions group's assignment was lost (outside the group past its session: frozen, "
            "or cut off); nothing written since the last commit becomes visible"
        )
        self._abort("the positions group's assignment was lost")
        self._drop(partitions)  # cooperative: the whole assignment is lost at once, nothing is kept to rewind

    def _drop(self, target_partitions) -> None:
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
        self._retire(self.members)  # type: ignore[attr-defined]
        self.members = self._make_members()  # it subscribes as the source consumer would (consumer_guard.py)

    def _serve_members(self) -> None:
        """From the data loop: serve the positions group (its rebalances run their callbacks here) and a fatal
        producer error seen inside a poll (replaced here, between batches, never under _send's feet)."""
        self.members.poll(0)
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
            self._take(list(self.members.assignment()))
