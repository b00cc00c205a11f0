"""Where MirrorMaker 2 keeps its positions (``flows.X.mirror: {kind: mm2}``): the MM2 adapter of the one lag path
(``monitor.positions``), and the followers of MM2's records it reads.

MM2 has no consumer group on the source and publishes no acknowledged position, so the figures come from its own
records, each kept current by a follower thread (assign()-only, nothing committed):

- committed lag: MM2's committed source position, from its Connect offsets (``mm2-offsets.<source>.internal``
  on the target; the stored offset is the last record mirrored, so the position is offset + 1);
- true lag and RPO seconds: target end + MM2's newest offset sync through the exact-lag estimator
  (``core.lag.target_side_acked_next``, with no published acked_next), and the timestamp of the oldest source record
  not yet on the target, measured when the target end was read;
- heartbeat age: the newest heartbeat that crossed the mirror (``<source>.heartbeats`` on the target; written
  on the source by MM2's heartbeat connector of the reverse pair), else MM2's own heartbeat on the target;
- liveness for the evaluator: MM2's own heartbeats (written every second by the heartbeat connector) keep
  arriving. A killed MM2 writes none, its position stops, and the evaluator's STOP rule fires.

Read lag is unknown for MM2 (it publishes no fetch position).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
from confluent_kafka import Message

from ..core.config import Config, FlowConfig
from ..core.connect_rest import source_mirroring
from ..core.mm2 import (
    ConnectSourceOffset,
    Mm2OffsetSync,
    aliases,
    any_heartbeat,
    decode_connect_offset,
    decode_offset_sync,
    is_mm2,
    mm2_topics,
)
from .followers import Decoder, TopicFollower
from .positions import MirrorPositions

if TYPE_CHECKING:
    from .sampler import Sampler, _GroupState

TP = tuple[str, int]


def _sync(msg: Message) -> tuple[TP, Mm2OffsetSync]:
    sync = decode_offset_sync(msg.key(), msg.value())
    return (sync.topic, sync.partition), sync


def _connect_offset(connector: str, source_alias: str) -> Decoder[TP, ConnectSourceOffset]:
    def decode(msg: Message) -> tuple[TP, ConnectSourceOffset] | None:
        pos = decode_connect_offset(msg.key(), msg.value())
        if pos is None or pos.connector != connector or pos.cluster != source_alias:
            return None
        return (pos.topic, pos.partition), pos

    return decode


def _heartbeat(msg: Message) -> tuple[tuple[str, str], int]:
    beat = any_heartbeat(msg.key(), msg.value())
    return (beat.source, beat.target), beat.ts_ms


class Mm2Trackers:
    """The four record streams of one MM2 flow."""

    def __init__(self, config: Config, flow: FlowConfig):
        assert flow.mirror is not None  # an MM2 flow (mm2_trackers makes these for MM2 flows only)
        topics = mm2_topics(flow)
        source_alias, _ = aliases(flow)
        target = config.clusters[flow.target]
        cid = f"mirrorwatch-monitor-mm2-{flow.source}"
        self.syncs = TopicFollower(config.clusters[topics.offset_syncs_cluster], topics.offset_syncs, cid, _sync)
        self.positions = TopicFollower(
            target, topics.connect_offsets, cid, _connect_offset(flow.mirror.connector, source_alias)
        )
        self.own_beats = TopicFollower(target, topics.heartbeats, cid, _heartbeat)
        self.mirrored_beats = TopicFollower(target, topics.mirrored_heartbeats, cid, _heartbeat)
        self.all: list[TopicFollower[Any, Any]] = [self.syncs, self.positions, self.own_beats, self.mirrored_beats]


def mm2_trackers(config: Config) -> dict[str, Mm2Trackers]:
    return {name: Mm2Trackers(config, flow) for name, flow in config.flows.items() if is_mm2(flow)}


def newest_ms(beats: dict[tuple[str, str], int]) -> int | None:
    return max(beats.values()) if beats else None


def mm2_positions(
    sampler: Sampler, name: str, flow: FlowConfig, group: str, state: _GroupState, keys: list[TP]
) -> MirrorPositions:
    """MirrorMaker 2: its Connect offsets, its offset syncs and its heartbeats, each kept current by a tracker."""
    trackers: Mm2Trackers = sampler.mm2[name]
    source_alias, target_alias = aliases(flow)
    positions = trackers.positions.latest()
    syncs = trackers.syncs.latest()
    own = trackers.own_beats.latest().get((source_alias, target_alias))
    mirrored = newest_ms(trackers.mirrored_beats.latest())
    n = len(keys)
    # MM2 is alive while its own heartbeats keep coming (one a second by default) — unless the Connect REST API
    # says the source connector is paused, failed or stopped: the heartbeat connector then still beats for a
    # worker that mirrors nothing, and only "not alive" lets the STOP rule say so (monitor/connect_state.py)
    alive = own is not None and state.sync_ts is not None and own > int(state.sync_ts[0]) if n else False
    connect = sampler.connect[name].latest(int(time.time() * 1000)) if name in sampler.connect else None
    if connect is not None and source_mirroring(connect.connectors) is False:
        alive = False
    state.sync_ts = np.full(max(n, 1), own if own is not None else -1, np.int64)
    assert flow.mirror is not None  # an MM2 flow
    return MirrorPositions(
        engine="mm2",
        group=group,
        committed=np.fromiter((positions[k].next_offset if k in positions else -1 for k in keys), np.int64, n),
        sync_upstream=np.fromiter((syncs[k].upstream_offset if k in syncs else -1 for k in keys), np.int64, n),
        sync_downstream=np.fromiter((syncs[k].downstream_offset if k in syncs else -1 for k in keys), np.int64, n),
        sync_acked_next=np.full(n, -1, np.int64),  # MM2 publishes no acknowledged position
        sync_read_position=None,  # nor a fetch position
        alive=np.full(n, bool(alive), bool),
        commit_interval_s=flow.mirror.offset_flush_interval_s,
        last_sync_upstream={k: s.upstream_offset for k, s in syncs.items()},
        heartbeat_ms=mirrored if mirrored is not None else own,
        connect=connect,
    )
