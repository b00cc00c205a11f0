"""Sampling a flow mirrored by Apache MirrorMaker 2 (``flows.X.mirror: {kind: mm2}``).

MM2 has no consumer group on the source and publishes no acknowledged position, so the figures come from its own
records, each kept current by a tracker thread (assign()-only, nothing committed):

- committed lag: MM2's committed source position, from its Connect offsets (``mm2-offsets.<source>.internal``
  on the target; the stored offset is the last record mirrored, so the position is offset + 1);
- true lag and RPO seconds: target end + MM2's newest offset sync through the exact-lag estimator
  (``lag.target_side_acked_next``, with no published acked_next), and the timestamp of the oldest source record
  not yet on the target, measured when the target end was read;
- heartbeat age: the newest heartbeat that crossed the mirror (``<source>.heartbeats`` on the target; written
  on the source by MM2's heartbeat connector of the reverse pair), else MM2's own heartbeat on the target;
- liveness for the evaluator: MM2's own heartbeats (written every second by the heartbeat connector) keep
  arriving. A killed MM2 writes none, its position stops, and the evaluator's STOP rule fires.

Read lag is unknown for MM2 (it publishes no fetch position).
"""

from __future__ import annotations

import time

import numpy as np

from ..core.config import Config, FlowConfig
from ..core.connect_rest import source_mirroring
from ..core.mm2 import (
    aliases,
    any_heartbeat,
    decode_connect_offset,
    decode_offset_sync,
    flow_policy,
    is_mm2,
    mm2_topics,
)
from ..core.status import PartitionStatus
from .evaluator import summarize
from .lag import _lag, records_lost, target_behind, target_side_acked_next
from .syncs import OffsetSyncTracker
from .timelag import arrival_age_bound


def _sync(msg):
    sync = decode_offset_sync(msg.key(), msg.value())
    return (sync.topic, sync.partition), sync


def _connect_offset(connector: str, source_alias: str):
    def decode(msg):
        pos = decode_connect_offset(msg.key(), msg.value())
        if pos is None or pos.connector != connector or pos.cluster != source_alias:
            return None
        return (pos.topic, pos.partition), pos

    return decode


def _heartbeat(msg):
    beat = any_heartbeat(msg.key(), msg.value())
    return (beat.source, beat.target), beat.ts_ms


class Mm2Trackers:
    """The four record streams of one MM2 flow."""

    def __init__(self, config: Config, flow: FlowConfig):
        topics = mm2_topics(flow)
        source_alias, _ = aliases(flow)
        target = config.clusters[flow.target]
        cid = f"mirrorwatch-monitor-mm2-{flow.source}"
        self.syncs = OffsetSyncTracker(config.clusters[topics.offset_syncs_cluster], topics.offset_syncs, cid, _sync)
        self.positions = OffsetSyncTracker(
            target, topics.connect_offsets, cid, _connect_offset(flow.mirror.connector, source_alias)
        )
        self.own_beats = OffsetSyncTracker(target, topics.heartbeats, cid, _heartbeat)
        self.mirrored_beats = OffsetSyncTracker(target, topics.mirrored_heartbeats, cid, _heartbeat)
        self.all = [self.syncs, self.positions, self.own_beats, self.mirrored_beats]

    def start(self) -> None:
        for t in self.all:
            if t._thread is None:
                t.start()

    def close(self) -> None:
        for t in self.all:
            t.close()


def mm2_trackers(config: Config) -> dict[str, Mm2Trackers]:
    return {name: Mm2Trackers(config, flow) for name, flow in config.flows.items() if is_mm2(flow)}


def newest_ms(beats: dict) -> int | None:
    return max(beats.values()) if beats else None


def sample_mm2_flow(sampler, name: str, state, topics, keys: list[tuple[str, int]]):
    """One cycle for an MM2 flow; ``sampler`` is the monitor's Sampler (readers, windows, time lag, forecast)."""
    flow = sampler.config.flows[name]
    trackers: Mm2Trackers = sampler.mm2[name]
    src, dst = sampler.readers[flow.source], sampler.readers[flow.target]
    policy = flow_policy(flow)
    source_alias, target_alias = aliases(flow)
    positions = trackers.positions.latest()
    syncs = trackers.syncs.latest()
    own = trackers.own_beats.latest().get((source_alias, target_alias))
    mirrored = newest_ms(trackers.mirrored_beats.latest())
    # target ends before source ends: the estimate then describes an earlier moment, so lag is never under-reported
    ts_target = int(time.time() * 1000)
    target_ends = dst.end_offsets([(policy.target_topic(t), p) for t, p in keys])
    ts = int(time.time() * 1000)
    ends = src.end_offsets(keys)
    starts = src.start_offsets(keys)

    n = len(keys)
    committed = np.fromiter((positions[k].next_offset if k in positions else -1 for k in keys), np.int64, n)
    source_end = np.fromiter((ends.get(k, -1) for k in keys), np.int64, n)
    target_end = np.fromiter((target_ends.get((policy.target_topic(t), p), -1) for t, p in keys), np.int64, n)
    sync_up = np.fromiter((syncs[k].upstream_offset if k in syncs else -1 for k in keys), np.int64, n)
    sync_down = np.fromiter((syncs[k].downstream_offset if k in syncs else -1 for k in keys), np.int64, n)
    unknown = np.full(n, -1, np.int64)
    # the exact-lag estimator (monitor/lag.py) with no published acked_next: MM2 has none. Under MM2's identity
    # policy the target end proves nothing (other writers), so only MM2's committed position counts there.
    acked = target_side_acked_next(
        source_end, committed, sync_up, sync_down, unknown, target_end, one_to_one=policy.kind == "prefix"
    )
    committed_lag, true_lag = _lag(source_end, committed), _lag(source_end, acked)
    log_start = np.fromiter((starts.get(k, -1) for k in keys), np.int64, n)
    lost = records_lost(log_start, committed)

    windows = sampler._windows_for(state, keys)
    # MM2 is alive while its own heartbeats keep coming (one a second by default) — unless the Connect REST API
    # says the source connector is paused, failed or stopped: the heartbeat connector then still beats for a
    # worker that mirrors nothing, and only "not alive" lets the STOP rule say so (monitor/connect_state.py)
    alive = own is not None and state.sync_ts is not None and own > int(state.sync_ts[0]) if n else False
    connect = sampler.connect[name].latest(ts) if name in sampler.connect else None
    if connect is not None and source_mirroring(connect.connectors) is False:
        alive = False
    state.sync_ts = np.full(max(n, 1), own if own is not None else -1, np.int64)
    commit_ms = int(flow.mirror.offset_flush_interval_s * 1000)
    windows.stop_grace_ms = max(commit_ms, int(sampler.config.monitor.stop_grace_s * 1000))
    windows.observe(ts, committed, source_end, np.full(n, bool(alive), bool), repeat_after_ms=commit_ms)
    statuses = windows.evaluate(ts).copy()
    statuses[lost > 0] = PartitionStatus.LOST
    summary = summarize(windows, statuses)
    time_lag = sampler._time_lag(flow.source, keys, acked, true_lag, source_end, ts, ts_target)
    bound = arrival_age_bound([(h[0], h[1]) for h in state.history], acked, ts_target)
    time_lag = np.where(np.isnan(time_lag), time_lag, np.minimum(time_lag, bound))
    catch_up, topic_catch_up = sampler._forecast(state, keys, ts, source_end, acked, true_lag)
    beat = mirrored if mirrored is not None else own
    view = sampler._view(
        "mirror",
        name,
        flow.source,
        flow.target,
        flow.mirror.connector,
        ts,
        summary,
        windows,
        keys,
        statuses,
        source_end=source_end,
        committed=committed,
        read_position=unknown,
        acked_next=acked,
        target_end=target_end,
        committed_lag=committed_lag,
        read_lag=unknown,
        true_lag=true_lag,
        time_lag_s=time_lag,
        target_behind=target_behind(target_end, sync_down),
        catch_up_s=catch_up,
        topic_catch_up_s=topic_catch_up,
        last_ok_ms=ts,
        engine="mm2",
        log_start=log_start,
        records_lost=lost,
        heartbeat_age_s=None if beat is None else max(0.0, (ts - beat) / 1000.0),
        connect=connect,
    )
    return view
