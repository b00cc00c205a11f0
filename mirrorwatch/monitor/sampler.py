"""One sampling cycle over every flow and watched group: Kafka reads → lags → evaluator → a Snapshot.

Per flow and mirrored partition, in this order (so the source end is never older than a position and no lag
comes out negative): the mirror group's committed offsets on the source, the newest OffsetSync per partition
(kept current by a tracker thread on the target), the target end offsets, then the source end and log-start
offsets. The target is read *before* the source so that anything produced in between counts as lag: the
monitor may over-report, never under-report (see lag.target_side_acked_next). Plain watched groups get their
committed offsets and the source end and log-start offsets (committed lag only, Burrow-style). A committed
offset below the log start is records lost before the group read them: status LOST (an error).

An unreachable cluster turns every view that needs it into UNKNOWN (partition layout kept from the last good
sample, values unknown); the next cycle tries again, so the monitor recovers on its own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.config import Config
from ..core.lag import mirror_lags, plain_lag, records_lost, target_behind, target_side_acked_next
from ..core.naming import mirror_group, offset_syncs_topic
from ..core.records import OffsetSync
from ..core.redact import redact_text
from ..core.rpo import rpo_seconds
from ..core.status import HANGING_TRANSACTION, GroupStatus, PartitionStatus
from ..core.topic_selection import measured_topics, policy_of
from .connect_state import connect_watches
from .coverage import CoverageWatch
from .estimates import SamplerEstimates
from .evaluator import GroupSummary, WindowSet, summarize
from .followers import TopicFollower, our_sync
from .kafka_io import ClusterReader, ClusterUnreachable
from .markers import TrailingMarkerReader
from .mm2 import mm2_positions, mm2_trackers
from .model import GroupView, Snapshot
from .positions import engine_positions, with_newest_syncs
from .timelag import OffsetTimeTable, RecordTimestampReader, arrival_age_bound
from .transactions import OpenTransactionClock

log = logging.getLogger("mirrorwatch.monitor.sampler")

TP = tuple[str, int]
Topics = dict[str, int]  # {topic: partition count} of one cluster

RATE_SAMPLES = 6  # forecast rates are measured over the last few cycles (≈30 s at the default interval)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class _GroupState:
    """What the monitor remembers about one group between cycles."""

    keys: list[tuple[str, int]] = field(default_factory=list)
    windows: WindowSet | None = None
    # (ts, source_end, acked) of the last cycles: the forecast's rates
    history: deque[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=lambda: deque(maxlen=RATE_SAMPLES))
    sync_ts: np.ndarray | None = None
    last_ok_ms: int | None = None
    # an open transaction was seen on the flow's target (its last stable offset below its end): from then on the
    # target counts as transactional even where the configuration does not say so
    open_transaction_seen: bool = False
    txn_clock: OpenTransactionClock = field(default_factory=OpenTransactionClock)  # since when each LSO stands still
    # target partitions looked at for a trailing transaction marker: (end, cycle) of the last look (monitor/markers.py)
    marker_looks: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)


class Sampler(SamplerEstimates):
    def __init__(self, config: Config, *, timeout_s: float | None = None, start_trackers: bool = True):
        self.config = config
        settings = config.monitor
        self.timeout_s = timeout_s if timeout_s is not None else max(1.0, min(10.0, settings.interval_s))
        self.readers = {alias: ClusterReader(alias, c, self.timeout_s) for alias, c in config.clusters.items()}
        self.trackers: dict[tuple[str, str], TopicFollower[TP, OffsetSync]] = {}
        self.mm2 = mm2_trackers(config)
        self.connect = connect_watches(config)  # Connect REST state, polled on threads of its own
        self.coverage = {name: CoverageWatch(config, name, flow) for name, flow in config.flows.items()}
        for flow in config.flows.values():
            if flow.mirror is not None:
                continue  # MirrorMaker 2 keeps its own records (monitor/mm2.py)
            key = (flow.source, flow.target)
            if key not in self.trackers:
                self.trackers[key] = TopicFollower(
                    config.clusters[flow.target],
                    offset_syncs_topic(flow.source),
                    f"mirrorwatch-monitor-syncs-{flow.source}",
                    our_sync,
                    keep=lambda sync: sync.mapped,
                )
        self.ts_readers: dict[str, RecordTimestampReader] = {}
        self.marker_readers: dict[str, TrailingMarkerReader] = {}
        self.time_tables: dict[str, OffsetTimeTable] = {}
        self.states: dict[tuple[str, str, str], _GroupState] = {}
        self.seq = 0
        self._lock = threading.Lock()  # one cycle at a time
        if start_trackers:
            self.start()

    def followers(self) -> list[TopicFollower[Any, Any]]:
        """Every topic follower of the sampler: offset syncs, MM2's records, checkpoints and Connect configs."""
        out: list[TopicFollower[Any, Any]] = list(self.trackers.values())
        for trackers in self.mm2.values():
            out += trackers.all
        for watch in self.coverage.values():
            out += watch.trackers
        return out

    def wait_caught_up(self, timeout_s: float) -> None:
        """Let the followers read what is already there (one deadline for all), so that a first sample shows neither
        a jump nor a checkpoint or position that exists but was not read yet."""
        deadline = time.monotonic() + timeout_s
        for tracker in self.followers():
            tracker.caught_up.wait(max(0.0, deadline - time.monotonic()))

    def start(self) -> None:
        for tracker in self.followers():
            if tracker._thread is None:
                tracker.start()
        for connect in self.connect.values():
            connect.start()

    def close(self) -> None:
        for tracker in self.followers():
            tracker.close()
        for connect in self.connect.values():
            connect.close()
        for reader in self.ts_readers.values():
            reader.close()
        for marker_reader in self.marker_readers.values():
            marker_reader.close()
        for cluster_reader in self.readers.values():
            cluster_reader.coordinator.close()  # its helper process (core.coordinator_calls)
        # AdminClient has no close(): dropping the references lets librdkafka destroy the handles now
        self.readers.clear()
        self.ts_readers.clear()
        self.marker_readers.clear()

    # ------------------------------------------------------------------ cycle

    def sample(self) -> Snapshot:
        with self._lock:
            ts = now_ms()
            topics: dict[str, dict[str, int] | ClusterUnreachable] = {}
            for alias, reader in self.readers.items():
                try:
                    topics[alias] = reader.topics()
                except ClusterUnreachable as exc:
                    log.warning("%s", exc)
                    topics[alias] = exc
            views = []
            for name, flow in self.config.flows.items():
                group = (
                    flow.mirror.connector if flow.mirror else mirror_group(flow.source, flow.target, flow.group, name)
                )
                views.append(
                    self._guarded(("mirror", name, flow.source), flow.source, flow.target, group, name, topics, ts)
                )
            for watched in self.config.monitor.groups:
                if any(v.cluster == watched.cluster and v.group == watched.group for v in views):
                    continue  # already watched as a flow's mirror group
                views.append(
                    self._guarded(
                        ("group", watched.cluster, watched.group), watched.cluster, "", watched.group, "", topics, ts
                    )
                )
            self.seq += 1
            up = {alias: self.readers[alias].reachable for alias in topics}
            return Snapshot(ts, views, up, self.seq)

    def _guarded(
        self,
        key: tuple[str, str, str],
        cluster: str,
        target: str,
        group: str,
        flow_name: str,
        topics: dict[str, Topics | ClusterUnreachable],
        ts: int,
    ) -> GroupView:
        state = self.states.setdefault(key, _GroupState())
        try:
            readable: dict[str, Topics] = {}
            for alias in filter(None, (cluster, target)):
                listed = topics[alias]
                if isinstance(listed, ClusterUnreachable):
                    raise listed
                readable[alias] = listed
            if flow_name:
                view = self._sample_flow(flow_name, group, state, readable, ts)
            else:
                view = self._sample_group(cluster, group, state, readable[cluster], ts)
            if view.group_status != GroupStatus.NOTFOUND:
                state.last_ok_ms = ts
            return view
        except ClusterUnreachable as exc:
            return self._unknown(flow_name, cluster, target, group, state, ts, str(exc))
        except Exception as exc:  # a surprise in one flow must not cost the others their sample
            log.exception("sampling %s on '%s' failed", group, cluster)
            return self._unknown(
                flow_name,
                cluster,
                target,
                group,
                state,
                ts,
                f"sampling failed: {type(exc).__name__}: {redact_text(str(exc))}",
            )

    def _unknown(
        self, flow: str, cluster: str, target: str, group: str, state: _GroupState, ts: int, error: str
    ) -> GroupView:
        n = len(state.keys)
        mm2 = bool(flow) and self.config.flows[flow].mirror is not None
        return GroupView(
            kind="mirror" if flow else "group",
            flow=flow,
            cluster=cluster,
            target=target,
            group=group,
            ts_ms=ts,
            group_status=GroupStatus.UNKNOWN,
            engine="mm2" if mm2 else "mirrorwatch",
            error=error,
            last_ok_ms=state.last_ok_ms,
            topics=[k[0] for k in state.keys],
            partitions=[k[1] for k in state.keys],
            status=np.full(n, PartitionStatus.UNKNOWN, np.int8),
            connect=self.connect[flow].latest(ts) if flow in self.connect else None,
        )

    def _windows_for(self, state: _GroupState, keys: list[tuple[str, int]]) -> WindowSet:
        s = self.config.monitor
        if state.windows is None or keys != state.keys:
            if state.windows is None:
                state.windows = WindowSet(
                    len(keys), s.window, int(s.min_distance_s * 1000), s.allowed_lag, int(s.stop_grace_s * 1000)
                )
            else:
                state.windows = state.windows.remapped(state.keys, keys)
            state.keys = list(keys)
            state.history.clear()
            state.sync_ts = None
        return state.windows

    # ------------------------------------------------------------------ flows

    def _sample_flow(
        self, name: str, group: str, state: _GroupState, topics: dict[str, Topics], ts_cycle: int
    ) -> GroupView:
        """Every figure of a mirror flow, for either engine: the flow's adapter (``monitor.positions``) says where
        the mirror's positions are; everything after that is the same for all."""
        flow = self.config.flows[name]
        src, dst = self.readers[flow.source], self.readers[flow.target]
        source_topics = topics[flow.source]
        keys = [(t, p) for t in measured_topics(self.config, flow, source_topics) for p in range(source_topics[t])]
        windows = self._windows_for(state, keys)  # first: new keys reset what the adapter compares liveness with
        adapter = mm2_positions if name in self.mm2 else engine_positions
        pos = adapter(self, name, flow, group, state, keys)
        policy = policy_of(flow)
        ts_target = now_ms()  # what was on the target at this moment is what time lag / RPO is measured at
        target_keys = [(policy.target_topic(t), p) for t, p in keys]
        target_ends = dst.end_offsets(target_keys)
        transactional, stable = self._transactional(name, state, dst, target_keys, target_ends)
        txns = (
            self._open_transactions(name, state, dst, target_keys, target_ends, stable, ts_target)
            if (transactional and stable is not None)
            else None
        )
        # the estimate's syncs are taken after the target's end (with_newest_syncs says why); target_behind keeps
        # the ones read before it, or a sync written since would look like a target that lost what it mapped
        latest = (
            pos
            if adapter is not engine_positions
            else with_newest_syncs(pos, self.trackers[(flow.source, flow.target)].latest(), keys)
        )
        ts = now_ms()
        ends = src.end_offsets(keys)  # after the target's: the estimate describes an earlier moment, never too low
        starts = src.start_offsets(keys)

        n = len(keys)
        source_end = np.fromiter((ends.get(k, -1) for k in keys), np.int64, n)
        target_end = np.fromiter((target_ends.get((policy.target_topic(t), p), -1) for t, p in keys), np.int64, n)
        log_start = np.fromiter((starts.get(k, -1) for k in keys), np.int64, n)
        # under prefix the target partition holds only this mirror's copies: its end offset is fresh evidence; on a
        # transactional target a copy is there for readers only below the last stable offset
        readable_end = target_end
        if transactional and stable is not None:
            readable_end = np.fromiter((stable.get((policy.target_topic(t), p), -1) for t, p in keys), np.int64, n)
        acked_est = target_side_acked_next(
            source_end,
            pos.committed,
            latest.sync_upstream,
            latest.sync_downstream,
            latest.sync_acked_next,
            readable_end,
            one_to_one=policy.kind == "prefix",
            transactional=transactional,
        )
        unknown = np.full(n, -1, np.int64)
        read = latest.sync_read_position if latest.sync_read_position is not None else unknown
        lags = mirror_lags(source_end, pos.committed, acked_est, read)
        read_position, read_lag = (
            (lags.read_position, lags.read_lag) if pos.sync_read_position is not None else (unknown, unknown)
        )
        lost = records_lost(log_start, lags.acked_next)
        commit_ms = int(pos.commit_interval_s * 1000)
        windows.stop_grace_ms = max(commit_ms, int(self.config.monitor.stop_grace_s * 1000))
        windows.observe(ts, pos.committed, source_end, pos.alive, repeat_after_ms=commit_ms)
        statuses = windows.evaluate(ts).copy()
        statuses[lost > 0] = PartitionStatus.LOST
        if txns is not None:  # readers cannot see past a hanging transaction: at least WARN, with the reason
            statuses[txns.hanging & (statuses == PartitionStatus.OK)] = HANGING_TRANSACTION
        summary = summarize(windows, statuses)

        oldest, measured_at = self._oldest_missing(
            flow.source, keys, lags.acked_next, lags.true_lag, source_end, ts, ts_target
        )
        # not older than the time since an earlier sample found the record not yet on the source
        bound = arrival_age_bound([(h[0], h[1]) for h in state.history], lags.acked_next, ts_target)
        time_lag = rpo_seconds(lags.true_lag, oldest, measured_at, bound)
        coverage = self.coverage[name].refresh(src, set(keys), pos.last_sync_upstream, ts)
        catch_up, topic_catch_up = self._forecast(state, keys, ts, source_end, lags.acked_next, lags.true_lag)
        return self._view(
            "mirror",
            name,
            flow.source,
            flow.target,
            pos.group,
            ts,
            summary,
            windows,
            keys,
            statuses,
            source_end=source_end,
            committed=pos.committed,
            read_position=read_position,
            acked_next=lags.acked_next,
            target_end=target_end,
            committed_lag=lags.committed_lag,
            read_lag=read_lag,
            true_lag=lags.true_lag,
            time_lag_s=time_lag,
            target_behind=target_behind(target_end, pos.sync_downstream),
            catch_up_s=catch_up,
            topic_catch_up_s=topic_catch_up,
            last_ok_ms=ts,
            log_start=log_start,
            records_lost=lost,
            coverage=coverage,
            engine=pos.engine,
            heartbeat_age_s=None if pos.heartbeat_ms is None else max(0.0, (ts - pos.heartbeat_ms) / 1000.0),
            connect=pos.connect,
            transactions=txns,
        )

    # ------------------------------------------------------------------ plain groups

    def _sample_group(
        self, cluster: str, group: str, state: _GroupState, cluster_topics: Topics, ts_cycle: int
    ) -> GroupView:
        reader = self.readers[cluster]
        members, committed_map = reader.group(group)
        if not committed_map:
            return GroupView(
                kind="group",
                flow="",
                cluster=cluster,
                target="",
                group=group,
                ts_ms=ts_cycle,
                group_status=GroupStatus.NOTFOUND,
                error=f"group '{group}' has no committed offsets on '{cluster}'",
                last_ok_ms=state.last_ok_ms,
            )
        keys = sorted(k for k in committed_map if k[0] in cluster_topics)
        ts = now_ms()
        ends = reader.end_offsets(keys)
        starts = reader.start_offsets(keys)
        n = len(keys)
        committed = np.fromiter((committed_map[k] for k in keys), np.int64, n)
        source_end = np.fromiter((ends.get(k, -1) for k in keys), np.int64, n)
        lost = records_lost(np.fromiter((starts.get(k, -1) for k in keys), np.int64, n), committed)
        windows = self._windows_for(state, keys)
        commit_ms = int(self.config.monitor.group_commit_interval_s * 1000)
        windows.stop_grace_ms = max(commit_ms, int(self.config.monitor.stop_grace_s * 1000))
        windows.observe(ts, committed, source_end, bool(members), repeat_after_ms=commit_ms)
        statuses = windows.evaluate(ts).copy()
        statuses[lost > 0] = PartitionStatus.LOST
        summary = summarize(windows, statuses)
        return self._view(
            "group",
            "",
            cluster,
            "",
            group,
            ts,
            summary,
            windows,
            keys,
            statuses,
            source_end=source_end,
            committed=committed,
            committed_lag=plain_lag(source_end, committed),
            last_ok_ms=ts,
            records_lost=lost,
        )

    def _view(
        self,
        kind: str,
        flow: str,
        cluster: str,
        target: str,
        group: str,
        ts: int,
        summary: GroupSummary,
        windows: WindowSet,
        keys: list[TP],
        statuses: np.ndarray,
        **values: Any,  # the figures this kind of view has: GroupView's fields, checked by its constructor
    ) -> GroupView:
        w = windows.window
        first = np.minimum(w - windows.count, w - 1)
        cols = np.arange(len(keys))
        return GroupView(
            kind=kind,
            flow=flow,
            cluster=cluster,
            target=target,
            group=group,
            ts_ms=ts,
            group_status=summary.status,
            topics=[k[0] for k in keys],
            partitions=[k[1] for k in keys],
            status=statuses,
            complete=summary.complete,
            totallag=summary.totallag,
            maxlag_row=summary.maxlag_row,
            window_start=(windows.offsets[first, cols].copy(), windows.times[first, cols].copy()),
            window_end=(windows.offsets[-1].copy(), windows.times[-1].copy()),
            window_count=windows.count.copy(),
            window_size=w,
            **values,
        )
