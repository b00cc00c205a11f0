"""Reads that permit an action, failing closed: each one answers completely or raises :class:`CannotTell`.

A safety check (the failover READY verdict, ``--apply``, the checkpoint emitter's group sync, a failback wipe)
that cannot read what it needs must refuse, naming what it could not read. A timeout, an authorization error or
a partial read is never taken for "nothing there". Only a broker's own answer that a thing does not exist (an
unknown topic, a group in state DEAD) reads as absent.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from ...core.access import error_of
from ...core.cli import UserError
from ...core.clients import make_consumer
from ...core.config import ClusterConfig
from ...core.coordinator_calls import CoordinatorCalls
from ...core.reading import end_offsets, read_to_end

EXIT_CANNOT_TELL = 3  # docs/errors.md: a check could not read what it needs, so the action is refused
ADMIN_TIMEOUT_S = 30.0
# the group coordinator loading or moving (a fresh or restarted cluster): the answer comes if asked again
COORDINATOR_MOVING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}


class CannotTell(Exception):
    """``what`` could not be read (``why``): whatever it would have permitted is refused."""

    def __init__(self, what: str, why: str):
        super().__init__(f"cannot read {what}: {why}")
        self.what, self.why = what, why


@contextlib.contextmanager
def refusing(action: str) -> Iterator[None]:
    """Turn a :class:`CannotTell` inside into the command's one line: ``refusing to <action>: cannot read ...``."""
    try:
        yield
    except CannotTell as exc:
        raise UserError(f"refusing to {action}: {exc}", EXIT_CANNOT_TELL) from None


def reason(exc: BaseException, timeout_s: float) -> str:
    """A short reason for a failed request: the broker's error name, or that no answer came in time."""
    err = error_of(exc)
    timed_out = err is not None and err.code() in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT)
    if err is not None and not timed_out:
        return f"{err.name()} ({err.str()})"
    if timed_out or isinstance(exc, concurrent.futures.TimeoutError | TimeoutError):
        return f"no answer within {timeout_s:g} s"
    return f"{type(exc).__name__}: {exc}"


def group_is_active(
    admin: AdminClient,
    group: str,
    alias: str,
    timeout_s: float = ADMIN_TIMEOUT_S,
    calls: CoordinatorCalls | None = None,
) -> bool:
    """Whether ``group`` has members on the cluster ``alias``. An unknown group is described by the broker as
    DEAD with no members (not active). A retriable error (a coordinator loading or moving) is asked again until
    ``timeout_s``; any other failure, or none answered in time, raises :class:`CannotTell`. ``calls``: the
    cluster's coordinator-call helper, for the long-lived checkpointer (core.coordinator_calls)."""
    what = f"whether group '{group}' is active on '{alias}'"
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            # no request_timeout: librdkafka aborted the process when a describe that had timed out on its own
            # deadline was answered by the broker coming back (tests/test_failover_refusals.py, a frozen broker)
            if calls is not None:
                return bool(calls.describe_group(group, left).members)
            description = admin.describe_consumer_groups([group])[group].result(left)
            return bool(description.members)
        except Exception as exc:
            err = error_of(exc)
            if err is not None and err.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return False  # the broker's own answer: no such group, so nobody consumes with it
            again = err is not None and (err.retriable() or err.code() in COORDINATOR_MOVING)
            if not again or time.monotonic() + 0.5 >= deadline:
                raise CannotTell(what, reason(exc, timeout_s)) from None
        time.sleep(0.5)


def partitions_of(consumer: Consumer, topic: str, alias: str, timeout_s: float) -> list[int] | None:
    """The topic's partitions on ``alias``; None when the broker says it does not exist."""
    what = f"the partitions of topic {topic} on '{alias}'"
    try:
        md = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    except Exception as exc:
        raise CannotTell(what, reason(exc, timeout_s)) from None
    if md is None or (md.error is not None and md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        return None
    if md.error is not None:
        raise CannotTell(what, f"{md.error.name()} ({md.error.str()})")
    return sorted(md.partitions)


def read_whole_topic(cluster: ClusterConfig, alias: str, topic: str, client_id: str, timeout_s: float) -> list[Message]:
    """Every record of ``topic`` up to its ends as they are now; [] when the topic does not exist. A partition
    not read to its end within ``timeout_s`` raises :class:`CannotTell` (a partial read is not the topic)."""
    consumer = make_consumer(cluster, client_id, None, **{"enable.partition.eof": True})
    try:
        partitions = partitions_of(consumer, topic, alias, min(timeout_s, 10.0))
        if not partitions:
            return []
        positions = {(topic, p): 0 for p in partitions}
        try:
            ends = end_offsets(consumer, list(positions), timeout_s)
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            records = list(read_to_end(consumer, positions, timeout_s, ends))
        except KafkaException as exc:
            raise CannotTell(f"topic {topic} on '{alias}'", reason(exc, timeout_s)) from None
        short = sorted(f"{t}[{p}]" for (t, p), end in ends.items() if positions[(t, p)] < end)
        if short:
            raise CannotTell(
                f"topic {topic} on '{alias}'", f"{', '.join(short)} not read to the end in {timeout_s:g} s"
            )
        return records
    finally:
        consumer.close()
