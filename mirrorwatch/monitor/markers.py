"""Whether a target partition ends on a transaction marker: how the monitor finds a transactional target that the
configuration does not declare even when no transaction is open at the moment it looks.

Why: every transaction ends with a marker (commit or abort) at the offset after its last record, so a partition
written only in transactions has, at any moment, either an open transaction (its last stable offset below its end
offset, :meth:`~.estimates.SamplerEstimates._transactional`) or a marker at ``end − 1``. The first alone catches a
transaction only while it stays open across two ListOffsets requests; a writer that sends each batch and commits
at once (MirrorMaker 2's one transaction per poll, the tests' transactional harness) keeps one open for a few ms of
each cycle, so most samples find none open. A plain producer never writes a marker, and the
newest record of a partition is in its active segment, which compaction never touches: ``end − 1`` is a record.

How it is told: a consumer assigned at ``end − 1`` gets that record, or, when it is a marker (which no client
delivers), the next record or the partition's end first (``core.reading.read_at_offsets``, which the mirror's
read-back of its claims shares). Pure choice of partitions here (table-tested); the read is
:class:`TrailingMarkerReader`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import closing

from confluent_kafka import Consumer, KafkaError

from ..core.reading import read_at_offsets

TP = tuple[str, int]

LOOKS_PER_CYCLE = 8  # partitions read per flow and cycle: one written partition that ends on a marker suffices


def marker_candidates(
    keys: list[TP], ends: dict[TP, int], stable: dict[TP, int], looked: dict[TP, tuple[int, int]], cycle: int
) -> list[TP]:
    """The target partitions worth a look this cycle, at most :data:`LOOKS_PER_CYCLE`: written (end > 0), nothing
    open (last stable offset at the end: the LSO check found nothing there) and an end that moved since the last
    look (the offset looked at holds what it held: a second look tells nothing new). Those looked at longest ago
    come first. ``looked``: partition → (end, cycle) of its last look."""
    fresh = [
        k
        for k in keys
        if ends.get(k, -1) > 0 and stable.get(k, -1) >= ends.get(k, -1) and looked.get(k, (-1, -1))[0] != ends[k]
    ]
    fresh.sort(key=lambda k: looked.get(k, (-1, -1))[1])
    chosen = fresh[:LOOKS_PER_CYCLE]
    for k in chosen:
        looked[k] = (ends[k], cycle)
    return chosen


class TrailingMarkerReader:
    """Reads offset ``end − 1`` of target partitions (assign-only, nothing committed) and says which are markers."""

    def __init__(self, consumer_factory: Callable[[], Consumer], timeout_s: float):
        self._factory = consumer_factory
        self._consumer: Consumer | None = None
        self._timeout_s = timeout_s
        # the broker's refusal to let this principal read the target topics (READ is optional for the monitor,
        # docs/security.md): set, the caller stops looking rather than wait out the timeout every cycle
        self.refused = ""

    def ends_on_a_marker(self, ends: dict[TP, int]) -> dict[TP, bool]:
        """Per partition (end > 0): True when offset ``end − 1`` is a marker, False when it is a record; left out
        when neither was told within the timeout (an offset no longer there, a slow broker)."""
        todo = {k: end - 1 for k, end in ends.items() if end > 0}
        out: dict[TP, bool] = {}
        if not todo:
            return out
        if self._consumer is None:
            self._consumer = self._factory()
        with closing(read_at_offsets(self._consumer, todo, self._timeout_s)) as told:
            for key, stands in told:
                if isinstance(stands, KafkaError):
                    if stands.code() in _REFUSED:
                        self.refused = stands.str()
                        return out
                    continue  # that offset cannot be read now (no longer there, say): left out
                if key is not None:
                    out[key] = not stands  # nothing readable at end - 1: a marker
        return out

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


_REFUSED = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}
