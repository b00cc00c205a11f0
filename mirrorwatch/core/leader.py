"""One leader among replicas, elected with Kafka's own group membership (``leader:`` in the config; docs/ha.md).

Every replica of a service (``monitor``, ``canary``) runs an :class:`Election`: a consumer in the group
``mirrorwatch-leader-<service>`` subscribed to the election topic (one partition, compacted, created when missing)
on the chosen cluster. The member the group coordinator gives partition 0 is the leader. The classic group
protocol with the cooperative-sticky assignor: a follower that joins never moves partition 0 off a live leader.

Holding partition 0 is not enough to act on, because a process frozen past the session timeout (SIGSTOP, a long GC
or VM pause) wakes up still believing it holds it; its revoke comes only when its next heartbeat or poll learns it
was expelled. So leadership is a *lease* (:class:`Lease`): the election thread commits an offset for partition 0
every ``session_timeout_s / 6`` and leadership counts for ``session_timeout_s / 2`` after the last commit the
broker accepted, counted from when that commit was *sent*. The coordinator accepts a commit only from a member of
the current generation, and a classic-group commit also renews that member's session; so while our lease holds,
the broker cannot yet have expelled us, and no other member can hold partition 0. A thawed process finds its lease
expired (the monotonic clock ran on while it was frozen) and is a follower until a new commit is accepted, which
never happens once the group has moved on. docs/design.md ("Leader election") has the reasoning.

The election topic also carries the leaders' shared state as keyed records (:meth:`Election.read_records`,
:meth:`Election.write_record`): the monitor keeps there which status it last notified per group, so that a new
leader sends exactly the changes the old one had not.

With ``leader.enabled: false`` (the default) :class:`AlwaysLeader` stands in: always the leader, no shared state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]
from prometheus_client import CollectorRegistry, Gauge

from .clients import make_admin, make_consumer, make_producer
from .config import Config
from .redact import redact_text

log = logging.getLogger("mirrorwatch.leader")

GAUGE = "mirrorwatch_is_leader"
GAUGE_HELP = "1 while this process is the leader (does the singleton work: leader.enabled), else 0"
# a commit refused with these says the group has moved on without us: drop the lease at once
_EXPELLED = {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.FENCED_INSTANCE_ID}
# errors no retry cures: one line saying what to change
_FATAL = {
    KafkaError.INVALID_SESSION_TIMEOUT: "the brokers refuse leader.session_timeout_s={s:g} s: set it within their "
    "group.min.session.timeout.ms and group.max.session.timeout.ms (6 to 1800 s unless changed)",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "not authorized for the election group {group} on cluster '{alias}': "
    "grant Read on that group (docs/ha.md, Permissions)",
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "not authorized for the election topic {topic} on cluster '{alias}': "
    "grant Read, Write and Describe on it (docs/ha.md, Permissions)",
}


def export_leader_gauge(election: Election | AlwaysLeader, registry: CollectorRegistry) -> None:
    """``mirrorwatch_is_leader`` on ``registry``, asked of the election at every scrape (monitor and canary)."""
    Gauge(GAUGE, GAUGE_HELP, registry=registry).set_function(lambda: int(election.is_leader()))


@dataclass
class Lease:
    """Whether this member may act as the leader at a given moment (monotonic seconds). Pure; the election thread
    feeds it, any thread asks :meth:`holds`.

    ``term`` counts the times leadership began (after not holding): work queued under one term is not done under
    another, since a new term starts with a takeover that re-derives it.
    """

    lease_s: float
    owned: bool = False  # partition 0 is in our assignment
    confirmed_at: float | None = None  # when the newest commit the broker accepted was sent
    term: int = 0

    def holds(self, now: float) -> bool:
        return self.owned and self.confirmed_at is not None and now - self.confirmed_at < self.lease_s

    def assigned(self) -> None:
        self.owned = True  # not leader yet: a commit must be accepted first

    def revoked(self) -> None:
        self.owned, self.confirmed_at = False, None

    def confirmed(self, sent_at: float, now: float) -> None:
        """A commit sent at ``sent_at`` was accepted (we learn it at ``now``)."""
        if not self.owned:
            return
        before = self.holds(now)
        self.confirmed_at = max(sent_at, self.confirmed_at if self.confirmed_at is not None else sent_at)
        if not before and self.holds(now):
            self.term += 1

    def refuted(self) -> None:
        """The broker said we are no longer a member of the group's generation."""
        self.confirmed_at = None


class AlwaysLeader:
    """``leader.enabled: false``: this process is the only one, so always the leader; nothing is shared."""

    enabled = False
    fatal: str | None = None

    def start(self) -> AlwaysLeader:
        return self

    def stop(self) -> None:
        pass

    def is_leader(self) -> bool:
        return True

    def state(self) -> tuple[bool, int]:
        return True, 1

    def read_records(self, prefix: str, timeout_s: float = 10.0) -> dict[str, bytes]:
        return {}

    def write_record(self, key: str, value: bytes | None, timeout_s: float = 10.0) -> bool:
        return True


class Election:
    enabled = True

    def __init__(self, config: Config, service: str, clock: Callable[[], float] = time.monotonic):
        settings = config.leader
        self.alias, self.cluster = config.leader_cluster()
        self.topic, self.group, self.service = settings.topic, f"mirrorwatch-leader-{service}", service
        self.session_s = settings.session_timeout_s
        self.renew_s = self.session_s / 6
        self.lease = Lease(lease_s=self.session_s / 2)
        self.fatal: str | None = None  # set when the election cannot work at all; the service exits with it
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"leader-{service}", daemon=True)
        self._producer: Producer | None = None
        self._producer_lock = threading.Lock()
        self._last_said: bool | None = None

    # ------------------------------------------------------------------ what other threads ask
    def is_leader(self) -> bool:
        return self.state()[0]

    def state(self) -> tuple[bool, int]:
        """(leader now, term): asked before every piece of singleton work."""
        with self._lock:
            return self.lease.holds(self._clock()), self.lease.term

    # ------------------------------------------------------------------ life
    def start(self) -> Election:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop acting at once, then leave the group, so that the other replica takes over without waiting out
        the session timeout."""
        with self._lock:
            self.lease.revoked()
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.session_s + 5)
        if self._producer is not None:
            self._producer.flush(2)

    def _run(self) -> None:
        while not self._stop.is_set() and not self._ensure_topic():
            self._stop.wait(min(5.0, self.session_s))
        if self._stop.is_set():
            return
        session_ms = int(self.session_s * 1000)
        consumer = make_consumer(
            self.cluster,
            f"mirrorwatch-{self.service}-leader",
            group_id=self.group,
            **{
                "group.protocol": "classic",  # docs/design.md: the consumer protocol's session timeout is the broker's
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": session_ms,
                "heartbeat.interval.ms": max(100, session_ms // 6),
                # a wedged election thread leaves the group after this; librdkafka wants it >= the session timeout
                "max.poll.interval.ms": session_ms,
                "auto.offset.reset": "latest",
            },
        )
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
        last_renew = -1e18
        try:
            while not self._stop.is_set():
                try:
                    msg = consumer.poll(0.2)  # serves the rebalance callbacks; records are read apart (read_records)
                    err = msg.error() if msg is not None else None
                    if err is not None:
                        self._on_error(err)
                except KafkaException as exc:
                    self._on_error(exc.args[0])
                now = self._clock()
                if self.lease.owned and now - last_renew >= self.renew_s:
                    last_renew = now
                    self._renew(consumer)
                self._say()
        finally:
            with self._lock:
                self.lease.revoked()
            self._say()
            try:
                consumer.close()  # leaves the group: the follower is assigned partition 0 at once
            except Exception as exc:  # noqa: BLE001 - shutting down; nothing to do about it
                log.debug("leader: closing the election consumer: %s", exc)

    def _ensure_topic(self) -> bool:
        admin = make_admin(self.cluster, f"mirrorwatch-{self.service}-leader")
        topic = NewTopic(self.topic, 1, config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([topic], request_timeout=10)[self.topic].result(15)
            log.info("leader: created the election topic %s on cluster '%s'", self.topic, self.alias)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                log.warning(
                    "leader: cannot create the election topic %s on cluster '%s' (%s); trying again",
                    self.topic,
                    self.alias,
                    redact_text(err.str()),
                )
                return False
        return True

    # ------------------------------------------------------------------ election thread
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        consumer.pause(partitions)  # nothing to fetch here: the partition is only held
        if any(tp.partition == 0 for tp in partitions):
            with self._lock:
                self.lease.assigned()

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(tp.partition == 0 for tp in partitions):
            with self._lock:
                self.lease.revoked()

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._on_revoke(consumer, partitions)

    def _renew(self, consumer: Consumer) -> None:
        sent = self._clock()
        try:
            result = consumer.commit(offsets=[TopicPartition(self.topic, 0, 0)], asynchronous=False)
            err = next((tp.error for tp in result or [] if tp.error), None)
        except KafkaException as exc:
            err = exc.args[0]
        with self._lock:
            if err is None:
                self.lease.confirmed(sent, self._clock())
            elif err.code() in _EXPELLED:
                self.lease.refuted()
        if err is not None:
            log.debug("leader: lease not renewed: %s", redact_text(str(err)))

    def _on_error(self, err: KafkaError) -> None:
        problem = _FATAL.get(err.code())
        if problem is None:
            log.debug("leader: %s", redact_text(str(err)))
            return
        if self.fatal is None:  # the service stops with this line (exit code 2; the canary's 3)
            self.fatal = problem.format(s=self.session_s, group=self.group, topic=self.topic, alias=self.alias)
            log.debug("leader: %s", self.fatal)

    def _say(self) -> None:
        leading = self.is_leader()
        if leading != self._last_said:
            if leading or self._last_said is not None:
                log.info("leader: this %s is %s", self.service, "the leader now" if leading else "a follower now")
            self._last_said = leading

    # ------------------------------------------------------------------ shared state (keyed records)
    def read_records(self, prefix: str, timeout_s: float = 10.0) -> dict[str, bytes]:
        """The newest value of every key starting with ``prefix`` in the election topic (a tombstone removes a key),
        read to the end as it was when asked. Raises TimeoutError when the topic cannot be read to the end."""
        eof: dict[str, Any] = {"enable.partition.eof": True}
        reader = make_consumer(self.cluster, f"mirrorwatch-{self.service}-leader-state", **eof)
        try:
            tp = TopicPartition(self.topic, 0)
            low, high = reader.get_watermark_offsets(tp, timeout=timeout_s)
            out: dict[str, bytes] = {}
            if high <= low:
                return out
            reader.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            deadline = time.monotonic() + timeout_s
            position = low
            while position < high:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the election topic {self.topic} could not be read within {timeout_s:g} s")
                msg = reader.poll(0.5)
                if msg is None:
                    continue
                err, offset = msg.error(), msg.offset() or 0
                if err is not None:
                    # compaction leaves gaps in the offsets: the end is where the reader's position reaches
                    if err.code() == KafkaError._PARTITION_EOF:
                        position = max(position, offset)
                    continue
                position = offset + 1
                key = (msg.key() or b"").decode("utf-8", "replace")
                if not key.startswith(prefix):
                    continue
                value = msg.value()
                if value is None:
                    out.pop(key, None)
                else:
                    out[key] = value
            return out
        except KafkaException as exc:
            raise TimeoutError(f"the election topic {self.topic} cannot be read: {exc.args[0].str()}") from None
        finally:
            reader.close()

    def write_record(self, key: str, value: bytes | None, timeout_s: float = 10.0) -> bool:
        """Write one keyed record (``None``: a tombstone) and wait for the broker's acknowledgement."""
        with self._producer_lock:
            if self._producer is None:
                self._producer = make_producer(
                    self.cluster, f"mirrorwatch-{self.service}-leader-state", acks="all", **{"linger.ms": 0}
                )
            producer = self._producer
            outcome: list[KafkaError | None] = []
            producer.produce(
                self.topic, value=value, key=key.encode(), partition=0, on_delivery=lambda e, _m: outcome.append(e)
            )
            producer.flush(timeout_s)
        if not outcome or outcome[0] is not None:
            log.warning("leader: cannot record %s in %s: %s", key, self.topic, outcome[0] if outcome else "timed out")
            return False
        return True


def election_for(config: Config, service: str) -> Election | AlwaysLeader:
    """The service's election (``leader.enabled``), or the stand-in that is always the leader."""
    return Election(config, service) if config.leader.enabled else AlwaysLeader()
