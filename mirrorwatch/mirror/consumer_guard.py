"""The source consumer's group membership, watched: a consumer that stays outside its group while the source
answers is replaced (a mixin of MirrorEngine, as ``reports.py``).

Why: librdkafka (2.16) forgets a broker that a metadata answer leaves out, and a KRaft broker just fenced by its
controller is left out. When that was every broker the consumer knew (a single-broker cluster thawed after a
freeze, a whole cluster fenced at once), the consumer sat in "no broker available for coordinator query" for
good: no fetch, no commit, no error, while the cluster answered every other client. It was seen in a
whole-suite run (tests/test_outages.py) and reproduced in about one freeze in ten; lowering
``metadata.recovery.rebootstrap.trigger.ms`` did not bring it back within 60 s.

How: the consumer's statistics (every ``STATS_INTERVAL_MS``) carry its group state. While the cluster watch says
the source answers and the state is not ``up`` for ``STUCK_AFTER_S``, the consumer is replaced: its partitions
count as lost (their in-flight records still report, to detached states), a new consumer joins the group and
resumes from the group's commits. What was acknowledged but not committed is read and sent again: duplicates,
never a gap, as after a restart.

A consumer that failed fatally is replaced at once, the same way. With static membership (``mirror.instance_id``)
librdkafka (2.16) can fence its own consumer for good: its group coordinator's broker killed, the session times out
locally, the consumer rejoins with a new member id under the same ``group.instance.id``, and an answer to a request
still carrying the old member id (FENCED_INSTANCE_ID, "Static consumer fenced by other consumer with same
group.instance.id") is fatal to it. The consumer never rejoins, its statistics may keep saying ``up``, and the mirror
stood still with nothing assigned (the exactly-once fault suite: its coordinator SIGKILLed on a three-node target).
A source consumer whose assignment librdkafka stopped serving is replaced too (``assignment_fetch_failed``)."""

from __future__ import annotations

import logging
import re
import time

from confluent_kafka import Consumer, KafkaError

from .engine_state import EngineState
from .rebalances import SET_ASIDE_FLUSH_S

log = logging.getLogger("mirrorwatch.mirror")

STATS_INTERVAL_MS = 5_000
# Longer than any healthy rejoin (a rebalance, a coordinator moving: seconds) and than the cluster watch's own
# view of a thawed cluster settling; short enough that a mirror recovers well inside any alert's window.
STUCK_AFTER_S = 30.0

# the group's part of the statistics JSON: "cgrp": { "state": "up", "stateage": 1234, ... }
_GROUP_STATE = re.compile(r'"cgrp":\s*\{\s*"state":\s*"([^"]*)"')


def group_state(stats_json: str) -> str | None:
    """The consumer group state from librdkafka's statistics JSON (None: no group part). Read with a pattern,
    not a JSON parse: the statistics name every partition, and only this field is wanted."""
    match = _GROUP_STATE.search(stats_json)
    return match.group(1) if match else None


def outside_group_since(previous: float | None, now: float, source_up: bool, state: str | None) -> float | None:
    """Since when the consumer has been outside its group while the source answered (None: it is not).

    An outage of the source does not count (the watch reports it, and nothing could join); the clock starts
    again when the source is back, so a consumer gets ``STUCK_AFTER_S`` of a reachable source to rejoin."""
    if not source_up or state is None or state == "up":
        return None
    return previous if previous is not None else now


def should_replace(since: float | None, now: float, stuck_after_s: float = STUCK_AFTER_S) -> bool:
    return since is not None and now - since >= stuck_after_s


def is_fatal(err: KafkaError) -> bool:
    """A client error after which the consumer cannot go on (librdkafka reports it as ``_FATAL``)."""
    return err.fatal() or err.code() == KafkaError._FATAL


# librdkafka's words when the committed-offset look-up of its own assignment failed ("... offsets for N
# partition(s) in group", "... offset for group G topic T [P]")
_ASSIGNMENT_FETCH_FAILED = "Failed to fetch committed offset"


def assignment_fetch_failed(err: KafkaError) -> bool:
    """An assignment whose committed offsets librdkafka could not look up. Its partitions are never fetched and the
    look-up is never tried again (librdkafka 2.16, confluentinc/librdkafka#5586: a request-level NOT_COORDINATOR
    from a coordinator still moving leaves them "queried" for good), so the consumer reads nothing more from them.
    The error carries no code of its own: its text is all that tells it from other consume errors."""
    return err.str().startswith(_ASSIGNMENT_FETCH_FAILED)


class ConsumerGuard(EngineState):
    def _init_consumer_guard(self) -> None:
        self.group_state: str | None = None
        self.outside_group_since: float | None = None
        self.consumer_replacements = 0
        self._replaced_consumers: list[Consumer] = []  # kept, never closed: see _replace_consumer
        self.group_failed: KafkaError | None = None  # what the watched consumer cannot go on from, until it is replaced

    def _note_consumer_error(self, err: KafkaError) -> None:
        """An error event read from the watched consumer (the source consumer under at-least-once, the positions
        group's under exactly-once): librdkafka hands a consumer's fatal error out this way, not to ``error_cb``.
        A fatal one has the data path replace that consumer; so has, for the source consumer, an assignment that
        librdkafka stopped serving (``assignment_fetch_failed``)."""
        if is_fatal(err) or (not self.exactly_once and assignment_fetch_failed(err)):
            self.group_failed = self.group_failed or err

    def _on_stats(self, stats_json: str) -> None:
        """librdkafka's statistics callback, served inside the data path's poll()/consume()."""
        self.group_state = group_state(stats_json)
        # exactly-once: the watched group is the positions group, on the target (transactions.py)
        role = "target" if self.exactly_once else "source"
        self.outside_group_since = outside_group_since(
            self.outside_group_since, time.monotonic(), self.watch.up.get(role, True), self.group_state
        )

    def _guard_consumer(self) -> None:
        """From the data path, between reads: replace a consumer that failed fatally or stayed outside its group."""
        failed = self.group_failed
        if failed is not None:
            log.warning(
                "the %s group's consumer failed for good (%s); replacing it (records acknowledged since the last "
                "commit are read and sent again)",
                "positions" if self.exactly_once else "source",
                failed.str(),
            )
            self._replace_consumer()
            return
        since = self.outside_group_since
        if not should_replace(since, time.monotonic()):
            return
        assert since is not None
        log.warning(
            "the source consumer has been outside its group for %.0f s (state %s) while the source answers; "
            "replacing it (records acknowledged since the last commit are read and sent again)",
            time.monotonic() - since,
            self.group_state,
        )
        self._replace_consumer()

    def _replace_consumer(self) -> None:
        self.group_failed = None
        if self.exactly_once:
            self._replace_members()  # transactions.py: its group is the one on the target
        else:
            self._retire(self.consumer)
            self._set_aside(list(self.partitions), flush_s=SET_ASIDE_FLUSH_S)  # lost, as in _on_lost
            self.consumer = self._make_consumer()
            self.publisher.bind(self.producer, self.consumer)
        with self._subscription_lock:  # the new consumer subscribes from the data path (subscription.py)
            if self._pending_subscription is None:
                self._pending_subscription = list(self._subscribed)
            self._subscribed = []
        self.group_state = self.outside_group_since = None
        self.consumer_replacements += 1

    def _retire(self, old: Consumer) -> None:
        """Leave a stuck consumer's group and keep it. Never to join again: if it found a broker later it would take
        partitions nobody reads from it. Not closed: close() runs the rebalance callbacks on the closing thread and
        waits for a coordinator this consumer cannot find. Kept referenced so that no garbage collection closes it
        either."""
        try:
            old.unsubscribe()
        except Exception as exc:
            log.debug("unsubscribing the replaced consumer: %s", exc)
        self._replaced_consumers.append(old)
