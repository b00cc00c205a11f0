"""``mirror failback tail``: the records an unplanned failover left behind on the old source, found and saved.

Per source partition the tail starts at the engine's acknowledged position (``acked.MirrorPositions``: the
monitor's estimator over the newest offset sync, the mirror's commit and the target's end) and runs to the
source's end. For MirrorMaker 2, whose offset syncs are sparse, it is a range: the upper bound starts at what the
syncs and commits alone prove (exported: never too few), the lower bound at the estimate that also counts the
target's records after the newest sync as copies. Our engine's estimate is exact on a plain target (lower ==
upper). Reported: counts, offset ranges, time span, and the consumer groups on the old source that had already
read into the tail (processed there, never seen by the new primary). Exported by ``tail_export``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import Consumer, Message, TopicPartition

from ...core.clients import make_admin, make_consumer
from ...core.config import Config
from ...core.mm2 import is_mm2
from ...core.reading import read_to_end
from ...core.topic_selection import measured_topics
from ..checkpoints import ADMIN_TIMEOUT_S, committed_offsets
from ..mm2_records import read_mm2_state
from .acked import Partition, read_positions
from .reads import CannotTell, partitions_of, reason

READ_TIMEOUT_S = 120.0


class Sink(Protocol):
    def write(self, msg: Message) -> None: ...

    def finish(self) -> dict[str, Any]: ...


@dataclass
class PartitionTail:
    topic: str
    partition: int
    start: int  # first offset of the exported tail (upper bound of the count)
    lower_start: int  # first offset of the lower bound (== start when exact)
    end: int  # the source's end offset: the tail is [start, end)
    gone: int = 0  # records removed from the source (retention) before the mirror had them: on neither cluster
    count: int = 0  # records read in [start, end) (offsets of markers and aborted records hold none)
    lower_count: int = 0  # of them, at or after lower_start
    first_ts: int | None = None
    last_ts: int | None = None

    def row(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "from_offset": self.start,
            "to_offset": self.end - 1,
            "records": self.count,
            "records_lower_bound": self.lower_count,
            "first_timestamp": self.first_ts,
            "last_timestamp": self.last_ts,
            "gone_before_mirrored": self.gone,
        }


@dataclass
class Tail:
    flow: str
    source: str
    target: str
    engine: str
    exact: bool
    partitions: list[PartitionTail]
    groups: dict[str, dict[Partition, int]] = field(default_factory=dict)  # group → partition → committed
    read_into: dict[str, int] = field(default_factory=dict)  # group → tail records it had processed

    @property
    def records(self) -> int:
        return sum(p.count for p in self.partitions)

    def report(self) -> dict[str, Any]:
        spans = [(p.first_ts, p.last_ts) for p in self.partitions if p.first_ts is not None]
        return {
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "engine": self.engine,
            "exact": self.exact,
            "records": self.records,
            "records_lower_bound": sum(p.lower_count for p in self.partitions),
            "first_timestamp": min((s[0] for s in spans), default=None),
            "last_timestamp": max((s[1] or 0 for s in spans), default=None),
            "partitions": [p.row() for p in self.partitions if p.count or p.gone],
            "groups_read_into_tail": [{"group": g, "records": n} for g, n in sorted(self.read_into.items()) if n],
        }


def find_tail(config: Config, flow_name: str) -> Tail:
    """The tail's partitions and bounds, and the source groups' commits (nothing read from the tail yet)."""
    flow = config.flows[flow_name]
    mm2 = read_mm2_state(config, flow) if is_mm2(flow) else None
    positions = read_positions(config, flow_name, flow, mm2)
    # MM2's syncs are sparse and it re-sends after a restart: the export starts where the syncs and commits alone
    # prove the target has everything before; our engine's estimate is its own exact position on a plain target
    upper = positions.acked_next(one_to_one=False) if mm2 is not None else positions.acked_next()
    lower = positions.acked_next(transactional=False)
    tails = _source_partitions(config, flow_name, upper, lower)
    tail = Tail(flow_name, flow.source, flow.target, positions.engine, upper == lower, tails)
    tail.groups = _source_group_commits(config, flow_name, {(p.topic, p.partition) for p in tails})
    return tail


def _source_partitions(
    config: Config, flow_name: str, upper: dict[Partition, int], lower: dict[Partition, int]
) -> list[PartitionTail]:
    flow = config.flows[flow_name]
    consumer = make_consumer(config.clusters[flow.source], "mirrorwatch-failback-tail")
    try:
        try:
            listed = consumer.list_topics(timeout=10).topics
        except Exception as exc:
            raise CannotTell(f"the topics on '{flow.source}'", reason(exc, 10)) from None
        # the application's topics (mirrorwatch's own heartbeats are not part of any tail, nor of a wipe)
        names = measured_topics(config, flow, listed)
        out = []
        for topic in sorted(names):
            for partition in partitions_of(consumer, topic, flow.source, 10) or []:
                out.append(_partition_tail(consumer, flow.source, (topic, partition), upper, lower))
        return out
    finally:
        consumer.close()


def _partition_tail(
    consumer: Consumer, alias: str, key: Partition, upper: dict[Partition, int], lower: dict[Partition, int]
) -> PartitionTail:
    try:
        log_start, end = consumer.get_watermark_offsets(TopicPartition(*key), timeout=10)
    except Exception as exc:
        raise CannotTell(f"the offsets of {key[0]}[{key[1]}] on '{alias}'", reason(exc, 10)) from None
    # nothing proven on the target: the whole partition, from the oldest record the source still has
    start = max(upper.get(key, log_start), log_start)
    lower_start = max(lower.get(key, log_start), start)
    gone = max(0, log_start - upper[key]) if key in upper else 0
    return PartitionTail(key[0], key[1], min(start, end), min(lower_start, end), end, gone)


def _source_group_commits(config: Config, flow_name: str, tail: set[Partition]) -> dict[str, dict[Partition, int]]:
    """Every consumer group's commits on the tail's partitions on the old source (mirrorwatch's own left out)."""
    flow = config.flows[flow_name]
    admin = make_admin(config.clusters[flow.source], "mirrorwatch-failback-tail")
    try:
        listing = admin.list_consumer_groups().result(ADMIN_TIMEOUT_S)
    except Exception as exc:
        raise CannotTell(f"the consumer groups on '{flow.source}'", reason(exc, ADMIN_TIMEOUT_S)) from None
    if listing.errors:
        raise CannotTell(f"the consumer groups on '{flow.source}'", str(listing.errors[0]))
    out = {}
    for group in sorted(g.group_id for g in listing.valid if not g.group_id.startswith("mirrorwatch")):
        try:
            commits = committed_offsets(admin, group)
        except Exception as exc:
            raise CannotTell(f"group '{group}''s commits on '{flow.source}'", reason(exc, ADMIN_TIMEOUT_S)) from None
        mine = {k: v for k, v in commits.items() if k in tail}
        if mine:
            out[group] = mine
    return out


def read_tail(
    config: Config, tail: Tail, sink: Sink | None, progress: Callable[[int], None] = lambda _n: None
) -> dict[str, Any] | None:
    """Read every tail record from the old source into ``sink`` (counting as it goes); the sink's verified
    destination, or None without one. A partition not read to its end raises CannotTell."""
    wanted = {(p.topic, p.partition): p for p in tail.partitions if p.start < p.end}
    consumer = make_consumer(
        config.clusters[tail.source], "mirrorwatch-failback-tail", None, **{"enable.partition.eof": True}
    )
    positions = {k: p.start for k, p in wanted.items()}
    try:
        if positions:
            consumer.assign([TopicPartition(t, n, positions[(t, n)]) for t, n in positions])
            ends = {k: p.end for k, p in wanted.items()}
            for msg in read_to_end(consumer, positions, READ_TIMEOUT_S, ends):
                key = (str(msg.topic()), int(msg.partition() or 0))
                if key not in wanted or int(msg.offset() or 0) >= wanted[key].end:
                    continue  # written after the tail was measured: not part of it
                _count(tail, wanted[key], msg)
                if sink is not None:
                    sink.write(msg)
                progress(1)
        short = sorted(f"{t}[{n}]" for (t, n), p in wanted.items() if positions[(t, n)] < p.end)
        if short:
            raise CannotTell(f"the tail on '{tail.source}'", f"{', '.join(short)} not read to the end")
    finally:
        consumer.close()
    return None if sink is None else sink.finish()


def _count(tail: Tail, part: PartitionTail, msg: Message) -> None:
    offset, ts = int(msg.offset() or 0), msg.timestamp()[1]
    part.count += 1
    part.lower_count += offset >= part.lower_start
    part.first_ts = ts if part.first_ts is None else min(part.first_ts, ts)
    part.last_ts = ts if part.last_ts is None else max(part.last_ts, ts)
    for group, commits in tail.groups.items():
        if offset < commits.get((part.topic, part.partition), -1):
            tail.read_into[group] = tail.read_into.get(group, 0) + 1
