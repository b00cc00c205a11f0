"""The truth's floor under the monitor's true lag, for the fault suite (issue 34: "the monitor's true lag never below
the truth"). Independent of the monitor: it reads the source's end offsets and the target's last stable offsets on
its own clients (``TruthPoller``), and counts what the target holds from the oracle's own read of it
(``oracle.TargetReader``).

Why it is a floor. The monitor reads the target (its end, or on a transactional target its last stable offset)
before it takes the sample's time ``ts_ms``, and the source's end after (monitor/sampler.py). Its estimate of what
the target holds is never above the distinct source records below the target end it read, so its true lag is never
below ``S(a) − D(b)`` for any source end ``S(a)`` answered at or before ``ts_ms`` and any count ``D(b)`` of the
distinct records below a last stable offset asked for at or after ``ts_ms``. ``D`` comes from the oracle's read of
the whole target topic: a record below the last stable offset is decided, and is readable if it was committed.
The source topics take only the oracle's writer (idempotent, not transactional): their offsets count records."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec


@dataclass(frozen=True)
class Poll:
    at_ms: int  # source ends: when the answer came; last stable offsets: when they were asked for
    offsets: tuple[int, ...]  # per partition


@dataclass(frozen=True)
class Reported:
    ts_ms: int
    partition: int
    true_lag: int


class TargetCopies:
    """One target partition as the oracle read it: how many distinct source records lie below an offset."""

    def __init__(self, offsets: Sequence[int], ids: Sequence[Hashable], read_to: int) -> None:
        self.offsets = list(offsets)
        self.read_to = read_to  # the oracle read everything below this
        seen: set[Hashable] = set()
        self.distinct = [0]  # distinct[i]: distinct records among the first i copies
        for record in ids:
            seen.add(record)
            self.distinct.append(len(seen))

    def distinct_below(self, offset: int) -> int | None:
        """None: the oracle did not read that far, so the count is unknown."""
        if offset > self.read_to:
            return None
        return self.distinct[bisect.bisect_left(self.offsets, offset)]


def bracket(ts_ms: int, sources: Sequence[Poll], stables: Sequence[Poll]) -> tuple[Poll, Poll] | None:
    """The last source poll answered at or before ``ts_ms`` and the first stable poll asked at or after it (both
    lists in time order); None when either is missing."""
    a = bisect.bisect_right([p.at_ms for p in sources], ts_ms) - 1
    b = bisect.bisect_left([p.at_ms for p in stables], ts_ms)
    return None if a < 0 or b >= len(stables) else (sources[a], stables[b])


def floor_at(
    ts_ms: int, partition: int, sources: Sequence[Poll], stables: Sequence[Poll], copies: TargetCopies
) -> int | None:
    """The truth's floor for a sample taken at ``ts_ms`` (None: no poll brackets it, or the oracle did not read far
    enough)."""
    polls = bracket(ts_ms, sources, stables)
    if polls is None:
        return None
    source_end, stable = polls[0].offsets[partition], polls[1].offsets[partition]
    on_target = copies.distinct_below(stable) if stable >= 0 else None
    return None if on_target is None or source_end < 0 else source_end - on_target


def below_the_floor(
    reported: Sequence[Reported], sources: Sequence[Poll], stables: Sequence[Poll], copies: Sequence[TargetCopies]
) -> tuple[int, list[str]]:
    """How many samples had a floor, and each sample whose true lag was below it (with the polls that set it)."""
    checked, below = 0, []
    for r in reported:
        floor = floor_at(r.ts_ms, r.partition, sources, stables, copies[r.partition])
        if floor is None:
            continue
        checked += 1
        if r.true_lag < floor:
            source, stable = bracket(r.ts_ms, sources, stables) or (Poll(0, ()), Poll(0, ()))
            below.append(
                f"[{r.partition}] at {r.ts_ms}: true lag {r.true_lag} < the truth's floor {floor} (source end "
                f"{source.offsets[r.partition]} at {source.at_ms}, target stable {stable.offsets[r.partition]} at "
                f"{stable.at_ms})"
            )
    return checked, below


class TruthPoller(threading.Thread):
    """Every ``every_s``: the source topics' end offsets and the target topics' last stable offsets, each contestant's
    kept apart. A call that fails (a broker away) leaves a gap and renews its client."""

    def __init__(
        self, source_bootstrap: str, target_bootstrap: str, topics: dict[str, tuple[str, str]], partitions: int
    ) -> None:
        super().__init__(daemon=True, name="truth-poller")
        self.bootstrap = {"source": source_bootstrap, "target": target_bootstrap}
        self.topics, self.partitions = topics, partitions  # contestant -> (source topic, target topic)
        self.sources: dict[str, list[Poll]] = {name: [] for name in topics}
        self.stables: dict[str, list[Poll]] = {name: [] for name in topics}
        self.every_s = 0.25
        self._halt = threading.Event()
        self._admins: dict[str, AdminClient] = {}

    def run(self) -> None:
        while not self._halt.wait(self.every_s):
            sources = self._ask("source", IsolationLevel.READ_UNCOMMITTED)
            if sources is not None:
                for name, offsets in sources[1].items():
                    self.sources[name].append(Poll(sources[0], offsets))
            stables = self._ask("target", IsolationLevel.READ_COMMITTED)
            if stables is not None:
                for name, offsets in stables[1].items():
                    self.stables[name].append(Poll(stables[0], offsets))

    def _ask(self, side: str, isolation: IsolationLevel) -> tuple[int, dict[str, tuple[int, ...]]] | None:
        column = 0 if side == "source" else 1
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # confluent-kafka ships it unannotated
        request = {TopicPartition(t[column], p): latest for t in self.topics.values() for p in range(self.partitions)}
        asked_ms = int(time.time() * 1000)
        admin = self._admins.get(side)
        if admin is None:  # not ``get() or ...``: a client with no request queued has length 0, so it is falsy
            admin = self._admins[side] = AdminClient({"bootstrap.servers": self.bootstrap[side], "log_level": 0})
        try:
            # Metadata first: librdkafka 2.16's admin ListOffsets sends the leader epoch it has cached, and after a
            # leader change it retried FENCED_LEADER_EPOCH in a busy loop until the request timed out (a core per
            # client through a rolling restart: this poller was most of the fault suite's CPU). A metadata answer
            # just before refreshes the epochs.
            admin.list_topics(timeout=5)
            futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=5)
            ends = {(tp.topic, tp.partition): future.result(6).offset for tp, future in futures.items()}
        except (KafkaException, TimeoutError):  # an error, or no answer at all while a broker is away
            del self._admins[side]  # a long-lived client can keep stale leaders for minutes after a restart
            return None
        answered_ms = int(time.time() * 1000)
        if min(ends.values()) < 0:  # a partition without a leader answers -1 (no error): no poll this time
            return None
        offsets = {name: tuple(ends[(t[column], p)] for p in range(self.partitions)) for name, t in self.topics.items()}
        return (answered_ms if side == "source" else asked_ms), offsets

    def finish(self) -> None:
        self._halt.set()
        self.join(10)


def longest_stall_s(stables: Sequence[Poll], start_ms: int, end_ms: int) -> float:
    """The longest time any one partition's last stable offset stood still between ``start_ms`` and ``end_ms``
    (a fault and the catch-up after it), in seconds. A stall runs from the last poll that showed the partition's
    offset higher than before (or ``start_ms``) to the next such poll (or ``end_ms``). Polls that failed are
    missing from ``stables``, so a stretch without answers counts as standing still: the page this measures for
    fires on the same silence."""
    before = [p for p in stables if p.at_ms < start_ms]
    during = [p for p in stables if start_ms <= p.at_ms <= end_ms]
    if not during and not before:
        return (end_ms - start_ms) / 1000
    width = len((before or during)[0].offsets)
    longest = 0
    for partition in range(width):
        highest = before[-1].offsets[partition] if before else -1
        since = start_ms
        for poll in during:
            if poll.offsets[partition] > highest:
                highest = poll.offsets[partition]
                longest = max(longest, poll.at_ms - since)
                since = poll.at_ms
        longest = max(longest, end_ms - since)
    return longest / 1000
