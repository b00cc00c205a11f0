"""``canary check``: one probe now, with its own run id and its own reader, bounded in time.

Order matters so that no event can be missed: the target end offsets are read *before* anything is produced,
and the reader starts there. The reader has a throw-away group id (confluent-kafka insists on one) but only
ever uses assign() with explicit offsets and never commits, so no consumer group is created on either cluster.
"""

from __future__ import annotations

import functools
import logging
import time

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from ..core.client_set import ClientSet
from ..core.clients import make_consumer, make_producer
from ..core.config import Config
from ..core.records import CANARY_MARKER_HEADER, CanaryEvent, RecordFormatError
from .events import MARKER_VALUE, arrival_of, is_canary, new_run_id, now_ms
from .heartbeats import HeartbeatWatch, lookback_offset
from .report import CheckResult
from .topics import FlowTopics, ProbeUnknown, warm_up
from .tracker import Tracker

log = logging.getLogger("mirrorwatch.canary.check")

DRAIN_S = 1.0  # after every event arrived, read on this long at most to catch a duplicate right behind it
SOURCE_LOOK_S = 2.0  # at most this long to read, on the source, what came after an event that did not arrive
SOURCE_LOOK_RECORDS = 10_000  # and at most this many records per partition


class _Clock:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.marks: dict[str, float] = {}
        self._last = self.start

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.marks[name] = (now - self._last) * 1000.0
        self._last = now


def run_check(config: Config, flow_name: str | None = None, timeout_s: float | None = None) -> CheckResult:
    """Never raises for cluster trouble: that becomes an UNKNOWN result naming the cluster."""
    settings = config.canary
    timeout_s = float(timeout_s if timeout_s is not None else settings.crit_latency_s)
    run_id = new_run_id()
    topics = FlowTopics(config, flow_name, f"mirrorwatch-canary-check-{run_id}")
    result = CheckResult(
        flow=topics.flow_name,
        source=topics.source_alias,
        target=topics.target_alias,
        source_topic=topics.source_topic,
        target_topic=topics.target_topic,
        run_id=run_id,
        timeout_s=timeout_s,
        warn_latency_s=settings.warn_latency_s,
        heartbeat_max_age_s=settings.heartbeat_max_age_s,
        heartbeat_checked=topics.heartbeats_expected,
    )
    clock = _Clock()
    try:
        _probe(config, topics, result, clock, timeout_s)
    except ProbeUnknown as exc:
        result.error = str(exc)
    finally:
        topics.close()  # the reader and the producer are closed by _probe; the admin clients last
    result.timings_ms.update(clock.marks)
    result.timings_ms["total"] = (time.monotonic() - clock.start) * 1000.0
    result.judge()
    return result


def _probe(config: Config, topics: FlowTopics, result: CheckResult, clock: _Clock, timeout_s: float) -> None:
    connect_s = min(config.canary.connect_timeout_s, timeout_s)
    source_partitions = topics.ensure_source(connect_s)
    target_partitions, created = topics.ensure_target(source_partitions, connect_s)
    if topics.created:
        # a running mirror finds a new topic only at its next refresh: what this check would measure now is
        # that discovery, not replication (a mirror that starts after this creates and subscribes at once)
        raise ProbeUnknown(
            f"the canary topic is new (this check created {' and '.join(topics.created)}); a running "
            f"mirror picks it up within mirror.refresh_interval_s ({topics.refresh_interval_s:g} s): "
            "check again after that"
        )
    heartbeat_partitions = (
        (topics.partitions("target", topics.heartbeat_topic, connect_s) or []) if topics.heartbeats_expected else []
    )
    clock.mark("connect")
    starts = (
        {p: 0 for p in target_partitions}
        if created
        else topics.end_offsets("target", topics.target_topic, target_partitions, connect_s)
    )
    heartbeat_ends = topics.end_offsets("target", topics.heartbeat_topic, heartbeat_partitions, connect_s)
    clock.mark("offsets")

    reader = make_consumer(
        topics.target_cluster,
        f"mirrorwatch-canary-check-{result.run_id}",
        group_id=f"mirrorwatch-canary-check-{result.run_id}-never-committed",
        **{
            "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
        },
    )
    producer = make_producer(
        topics.source_cluster,
        f"mirrorwatch-canary-check-{result.run_id}",
        **{
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": max(1000, int(timeout_s * 1000)),
        },
    )
    clients = ClientSet(flush_s=0)  # flush_s=0: undelivered events are purged, never sent after we stopped looking
    clients.consumer(reader)
    clients.producer(producer)
    try:
        assignment = [TopicPartition(topics.target_topic, p, o) for p, o in starts.items()]
        assignment += [TopicPartition(topics.heartbeat_topic, p, lookback_offset(e)) for p, e in heartbeat_ends.items()]
        reader.assign(assignment)
        warm_up(producer, topics, source_partitions[0], connect_s)
        tracker = Tracker(result.run_id, topics.source_alias, config.canary.warn_latency_s, timeout_s, own_only=False)
        heartbeat = HeartbeatWatch(topics.source_alias, topics.target_alias, topics.mm2)
        source_offsets: dict[int, int] = {}
        _produce(producer, topics, result, tracker, source_partitions, source_offsets)
        clock.mark("produce")
        _read(reader, producer, topics, tracker, heartbeat, starts, heartbeat_ends, timeout_s)
        clock.mark("wait")
        probe = next(p for p in tracker.take_resolved() if p.seq == 0)
        result.overdue_for_s = (now_ms() - probe.produced_at_ms) / 1000.0 if probe.overdue else None
    finally:
        clients.close()
    if probe.overdue:
        # only where some canary event of the partition did arrive: nothing arrived (a stopped mirror), no look
        looks = {p: source_offsets[p] for p in probe.overdue if p in source_offsets and tracker.saw_partition(p)}
        lost = _skipped(topics, tracker, looks)
        clock.mark("source")
        result.lost_partitions = [p for p in probe.overdue if p in lost]
    result.partitions = list(source_partitions)
    result.latencies_ms = dict(sorted(probe.latencies_ms.items()))
    result.missing = list(probe.missing)
    result.unsent = dict(probe.unsent)
    result.lost, result.duplicates, result.reordered = tracker.lost, tracker.duplicates, tracker.reordered
    result.latency_basis = tracker.basis
    result.heartbeat_age_s = heartbeat.age_s(now_ms())
    if probe.unsent and not probe.latencies_ms and not probe.missing:
        alias, where = topics.source_alias, topics.source_cluster.bootstrap_servers
        raise ProbeUnknown(
            f"cannot write canary events to source cluster '{alias}' at {where}: {next(iter(probe.unsent.values()))}"
        )


def _produce(
    producer: Producer,
    topics: FlowTopics,
    result: CheckResult,
    tracker: Tracker,
    partitions: list[int],
    offsets: dict[int, int],
) -> None:
    """Write one event per partition; ``offsets`` gets each one's source offset as the source acknowledges it."""
    produced_at = now_ms()
    tracker.sent(0, partitions, produced_at)

    def delivered(partition: int, err: KafkaError | None, msg: Message) -> None:
        offset = msg.offset()
        if err is not None:
            tracker.unsent(0, partition, err.str())
        elif offset is not None:
            offsets[partition] = offset

    for partition in partitions:
        event = CanaryEvent(result.run_id, 0, int(produced_at), topics.source_alias, partition)
        producer.produce(
            topics.source_topic,
            key=result.run_id.encode(),
            value=event.to_value(),
            partition=partition,
            timestamp=int(produced_at),
            headers=[(CANARY_MARKER_HEADER, MARKER_VALUE)],
            on_delivery=functools.partial(delivered, partition),
        )
    producer.poll(0)


def _read(
    reader: Consumer,
    producer: Producer,
    topics: FlowTopics,
    tracker: Tracker,
    heartbeat: HeartbeatWatch,
    starts: dict[int, int],
    heartbeat_ends: dict[int, int],
    timeout_s: float,
) -> None:
    """Read until our events are all in and heartbeats caught up, or the timeout.

    Once every event is in, read on to the target's end offsets of that moment (at most DRAIN_S): a
    duplicate written right behind an event is then counted, not missed by a hair.
    """
    deadline = time.monotonic() + timeout_s
    positions = dict(starts)  # next offset per target canary partition
    heartbeat_pending = {p for p, end in heartbeat_ends.items() if end > 0}
    drain_ends: dict[int, int] | None = None
    drain_deadline = deadline
    while time.monotonic() < deadline:
        if drain_ends is not None:
            # the consumer's position passes a trailing commit marker (a transactional target), which the last
            # record's offset + 1 stops short of: without it the drain would always wait its full DRAIN_S there
            for tp in reader.position([TopicPartition(topics.target_topic, p) for p in drain_ends]):
                if tp.offset >= 0:
                    positions[tp.partition] = max(positions.get(tp.partition, 0), tp.offset)
        if (
            drain_ends is not None
            and not heartbeat_pending
            and (time.monotonic() >= drain_deadline or all(positions.get(p, 0) >= e for p, e in drain_ends.items()))
        ):
            break
        messages = reader.consume(500, 0.1)
        received = now_ms()
        producer.poll(0)  # delivery reports: an event the source refused is not waited for
        for msg in messages:
            partition, offset = msg.partition(), msg.offset()
            if msg.error() or partition is None or offset is None:
                continue  # transient (e.g. a leader moving): librdkafka retries by itself
            if msg.topic() == topics.target_topic:
                positions[partition] = offset + 1
                arrival = arrival_of(msg, received)
                if arrival is not None:
                    tracker.arrived(arrival)
            else:
                heartbeat.offer(msg.value(), msg.key())
                if offset + 1 >= heartbeat_ends.get(partition, 0):
                    heartbeat_pending.discard(partition)
        tracker.expire(now_ms())
        if drain_ends is None and 0 not in tracker.probes:
            drain_deadline = min(deadline, time.monotonic() + DRAIN_S)
            ends = _target_ends(reader, topics.target_topic, list(positions))
            drain_ends = ends if ends is not None else {p: 2**62 for p in positions}  # unknown: drain the full time
    tracker.finish()


def _target_ends(reader: Consumer, topic: str, partitions: list[int]) -> dict[int, int] | None:
    try:
        return {
            p: reader.get_watermark_offsets(TopicPartition(topic, p), timeout=0.5, cached=False)[1] for p in partitions
        }
    except Exception:  # could not ask: drain for the full DRAIN_S instead
        return None


def _skipped(topics: FlowTopics, tracker: Tracker, offsets: dict[int, int]) -> set[int]:
    """Partitions whose event did not arrive although a canary event written after it on the source did.

    The check writes one event per partition, so "a later event of its own run" never exists here; the later
    events are other canary runs' (the service's, every interval). Which of them came later is the source log's
    order: read the source partition after our event's offset and look for one the target reader saw. The reader
    started at the target's end before our event was written, so it saw everything mirrored after it. Bounded by
    SOURCE_LOOK_S and SOURCE_LOOK_RECORDS; any trouble answers "not known lost" (the event stays overdue).
    """
    if not offsets:
        return set()
    consumer = make_consumer(
        topics.source_cluster,
        f"mirrorwatch-canary-check-{tracker.run_id}-source",
        group_id=f"mirrorwatch-canary-check-{tracker.run_id}-never-committed",
        # earliest: when retention took more than our event, the log start is still after it
        **{"auto.offset.reset": "earliest", "enable.auto.offset.store": False, "enable.partition.eof": True},
    )
    lost: set[int] = set()
    read = dict.fromkeys(offsets, 0)
    deadline = time.monotonic() + SOURCE_LOOK_S
    try:
        consumer.assign([TopicPartition(topics.source_topic, p, o + 1) for p, o in offsets.items()])
        pending = set(offsets)
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.1):
                partition = msg.partition()
                if partition not in pending:
                    continue
                if msg.error():
                    pending.discard(partition)  # the end of the partition (or an error): nothing more to learn
                    continue
                read[partition] += 1
                event = _event_of(msg)
                if event is not None and event.partition == partition and tracker.has_arrived(event):
                    if tracker.mark_lost(0, partition):
                        lost.add(partition)
                    pending.discard(partition)
                elif read[partition] >= SOURCE_LOOK_RECORDS:
                    pending.discard(partition)
    except Exception as exc:  # the verdict stays "overdue": never worse than not knowing
        log.info("could not read the source after the missing events: %s: %s", type(exc).__name__, exc)
    finally:
        consumer.close()
    return lost


def _event_of(msg: Message) -> CanaryEvent | None:
    if not is_canary(msg):
        return None
    try:
        return CanaryEvent.from_value(msg.value())
    except RecordFormatError:
        return None
