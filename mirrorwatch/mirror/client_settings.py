"""The mirror engine's producer and consumer properties: our defaults, then the user's ``mirror.producer`` and
``mirror.consumer`` overrides on top."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.config import MirrorSettings


def producer_properties(settings: MirrorSettings, transactional: dict[str, Any] | None = None) -> dict[str, Any]:
    """``transactional``: exactly-once's transactional.id and timeout (transactions.py). A transaction, not the
    gapless guarantee, then makes a partition's records all-or-nothing, and a record may not wait longer than
    its transaction may stay open (librdkafka refuses message.timeout.ms above transaction.timeout.ms)."""
    props: dict[str, Any] = {
        "acks": "all",
        "enable.idempotence": True,
        # any failure that could leave a gap is fatal and fails every later record: a successful delivery report
        # then vouches for every earlier record of its partition (the engine asks for one per run of records)
        "enable.gapless.guarantee": True,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": max(settings.max_in_flight, 100_000),
        "queue.buffering.max.kbytes": 1_048_576,
        "message.max.bytes": 100_000_000,
        "compression.type": "none",  # the target topic's compression.type applies broker-side
        "message.timeout.ms": 0,  # a target away for minutes is waited out (outage.py), never a lost record
    }
    if transactional:
        del props["enable.gapless.guarantee"]
        props.update(transactional, **{"message.timeout.ms": transactional["transaction.timeout.ms"]})
    props.update(settings.producer)
    return props


def consumer_properties(settings: MirrorSettings, on_commit: Callable[..., None]) -> dict[str, Any]:
    props: dict[str, Any] = {
        "auto.offset.reset": "earliest",
        "enable.auto.offset.store": False,
        "partition.assignment.strategy": "cooperative-sticky",
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760,
        "queued.min.messages": 200_000,
        "topic.metadata.refresh.interval.ms": int(settings.refresh_interval_s * 1000),
        # a crashed worker's partitions move after this long (Kafka's default is 45 s)
        "session.timeout.ms": 10_000,
        "heartbeat.interval.ms": 2_000,
        "on_commit": on_commit,
    }
    if settings.instance_id:
        # static membership: a restarted worker with the same id takes its partitions back at once
        props["group.instance.id"] = settings.instance_id
    props.update(settings.consumer)
    return props


def offset_sync_interval_s(settings: MirrorSettings, policy: str) -> float:
    """Offset syncs of moved partitions at least this often (``mirror.offset_sync_interval_s``; by default
    0.1 s under the identity policy, where the monitor cannot read progress off the shared target topic,
    and the commit interval under prefix, where the target's end offset already tells it)."""
    if settings.offset_sync_interval_s is not None:
        return settings.offset_sync_interval_s
    return 0.1 if policy == "identity" else settings.commit_interval_s
