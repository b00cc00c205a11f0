"""One-shot reads of a MirrorMaker 2 flow's own records, for ``mirror failover check`` (assign()-only, no group).

Names and formats come from ``core.mm2``; the target-side position estimate is the monitor's (``core.lag``).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..core.clients import make_consumer
from ..core.config import Config, FlowConfig
from ..core.lag import target_side_acked_next
from ..core.mm2 import (
    aliases,
    any_heartbeat,
    assigned_groups,
    decode_checkpoint,
    decode_connect_config,
    decode_connect_offset,
    decode_offset_sync,
    flow_policy,
    mm2_topics,
)
from ..core.reading import end_offsets, read_topic
from ..core.records import Checkpoint, RecordFormatError


@dataclass
class Mm2State:
    syncs: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)  # sorted by upstream
    latest_sync: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)  # MM2's committed next source offset
    checkpoints: dict[str, dict[tuple[str, int], Checkpoint]] = field(default_factory=dict)  # source topic names
    heartbeat_ms: int | None = None  # newest heartbeat that crossed the mirror (else MM2's own)
    assigned_groups: set[str] | None = None  # the groups MM2's checkpoint tasks have found (None: unknown)

    def acked_next(
        self, target_ends: dict[tuple[str, int], int], one_to_one: bool = True, transactional: bool = False
    ) -> dict[tuple[str, int], int]:
        """Target-side estimate of the next source offset not yet on the target (uncapped: the caller has the ends;
        ``transactional``: MM2 with exactly-once support, see ``core.lag.target_side_acked_next``)."""
        out = {}
        for key in set(self.latest_sync) | set(self.positions):
            u, d = self.latest_sync.get(key, (-1, -1))
            value = int(
                target_side_acked_next(
                    [-1],
                    [self.positions.get(key, -1)],
                    [u],
                    [d],
                    [-1],
                    [target_ends.get(key, -1)],
                    one_to_one,
                    transactional,
                )[0]
            )
            if value >= 0:
                out[key] = value
        return out

    def heartbeat_age_s(self) -> float | None:
        return None if self.heartbeat_ms is None else max(0.0, time.time() - self.heartbeat_ms / 1000)


def read_mm2_state(config: Config, flow: FlowConfig) -> Mm2State:
    topics, policy = mm2_topics(flow), flow_policy(flow)
    assert flow.mirror is not None  # mm2_topics: a MirrorMaker 2 flow
    source_alias, target_alias = aliases(flow)
    target = config.clusters[flow.target]
    reads = {
        "syncs": (config.clusters[topics.offset_syncs_cluster], topics.offset_syncs, 20.0),
        "positions": (target, topics.connect_offsets, 20.0),
        "checkpoints": (target, topics.checkpoints, 20.0),
        "heartbeats": (target, topics.heartbeats, 10.0),
        "mirrored_heartbeats": (target, topics.mirrored_heartbeats, 10.0),
        "connect_configs": (target, topics.connect_configs, 10.0),
    }
    # five independent one-shot reads (each a new client: metadata, end offsets, reading to the end), side by side
    # so that the failover check's 15 s budget holds on a busy machine
    with ThreadPoolExecutor(len(reads)) as pool:
        futures = {
            name: pool.submit(read_topic, cluster, topic, "mirrorwatch-mm2-reader", timeout_s)
            for name, (cluster, topic, timeout_s) in reads.items()
        }
        records = {name: future.result() for name, future in futures.items()}
    state = Mm2State()
    for msg in records["syncs"]:
        try:
            s = decode_offset_sync(msg.key(), msg.value())
        except RecordFormatError:
            continue
        state.syncs.setdefault((s.topic, s.partition), []).append((s.upstream_offset, s.downstream_offset))
        state.latest_sync[(s.topic, s.partition)] = (s.upstream_offset, s.downstream_offset)
    for history in state.syncs.values():
        history.sort()
    for msg in records["positions"]:
        try:
            pos = decode_connect_offset(msg.key(), msg.value())
        except RecordFormatError:
            continue
        if pos is not None and pos.connector == flow.mirror.connector and pos.cluster == source_alias:
            state.positions[(pos.topic, pos.partition)] = pos.next_offset
    for msg in records["checkpoints"]:
        try:
            cp = decode_checkpoint(msg.key(), msg.value(), msg.timestamp()[1])
        except RecordFormatError:
            continue
        source_topic = policy.source_topic(cp.topic)  # MM2 names the target topic in its checkpoints
        if source_topic is not None:
            state.checkpoints.setdefault(cp.group, {})[(source_topic, cp.partition)] = Checkpoint(
                cp.group, source_topic, cp.partition, cp.upstream_offset, cp.downstream_offset, cp.ts_ms
            )
    own, crossed = None, None
    for name, mine in (("heartbeats", True), ("mirrored_heartbeats", False)):
        for msg in records[name]:
            try:
                beat = any_heartbeat(msg.key(), msg.value())
            except RecordFormatError:
                continue
            if mine and (beat.source, beat.target) == (source_alias, target_alias):
                own = max(own or 0, beat.ts_ms)
            elif not mine:
                crossed = max(crossed or 0, beat.ts_ms)
    state.heartbeat_ms = crossed if crossed is not None else own
    configs: dict[tuple[object, ...], object] = {}
    for msg in records["connect_configs"]:
        try:
            decoded = decode_connect_config(msg.key(), msg.value())
        except RecordFormatError:
            continue
        if decoded is not None:
            configs[decoded[0]] = decoded[1]  # log order: the later record is the newer
    state.assigned_groups = assigned_groups(configs, flow.mirror.checkpoint_connector)
    return state


def target_end_offsets(
    config: Config, flow: FlowConfig, partitions: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """Target end offsets keyed by *source* (topic, partition)."""
    policy = flow_policy(flow)
    consumer = make_consumer(config.clusters[flow.target], "mirrorwatch-mm2-reader")
    try:
        existing = consumer.list_topics(timeout=10).topics
        wanted = [(t, p) for t, p in partitions if policy.target_topic(t) in existing]
        ends = end_offsets(consumer, [(policy.target_topic(t), p) for t, p in wanted])
        return {(t, p): ends[(policy.target_topic(t), p)] for t, p in wanted}
    finally:
        consumer.close()
