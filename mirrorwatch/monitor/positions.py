"""Where each kind of mirror publishes its positions: one adapter per mirror kind, one lag path for all.

The monitor turns a flow's :class:`MirrorPositions` into every partition and flow figure in one function
(``Sampler._sample_flow``): the target's and the source's end offsets are read after the positions (our engine's
syncs for the estimate once more between the two: :func:`with_newest_syncs`), the same
estimator (``core.lag.target_side_acked_next``) gives ``acked_next``, and lags, records lost, the evaluator, RPO
and the forecast follow. What differs between engines is only what this module's adapters say:

| | our engine (:func:`engine_positions`) | MirrorMaker 2 (``monitor.mm2.mm2_positions``) |
|---|---|---|
| committed | the mirror group's offsets on the source | the source connector's Connect offsets (+1) |
| offset sync | ours: source→target pair, ``acked_next``, read position | MM2's: source→target pair only |
| read position | published (read lag known) | none (read lag unknown) |
| alive | the group has members, or a newer sync arrived | MM2's own heartbeats arrive (and its source connector runs, when the Connect REST API is configured) |
| commit interval | ``mirror.commit_interval_s`` | ``offset_flush_interval_s`` |
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..core.config import FlowConfig
from ..core.connect_rest import ConnectStates
from ..core.records import OffsetSync

if TYPE_CHECKING:  # the sampler imports this module
    from .sampler import Sampler, _GroupState


@dataclass(frozen=True)
class MirrorPositions:
    """What one mirror publishes about a flow's partitions (arrays in the flow's (topic, partition) order, -1 =
    unknown), read before the source's end offsets so that lag is never under-reported."""

    engine: str  # "mirrorwatch" or "mm2"
    group: str  # the mirror's consumer group, or MM2's source connector
    committed: np.ndarray  # the mirror's committed next source offset
    sync_upstream: np.ndarray  # the newest offset sync: source offset u sits on the target at d
    sync_downstream: np.ndarray
    sync_acked_next: np.ndarray  # the acknowledged position the sync publishes (-1: the mirror publishes none)
    sync_read_position: np.ndarray | None  # None: the mirror publishes no read position, so read lag is unknown
    alive: np.ndarray  # evidently running, per partition: an unchanged commit then counts as a repeated one
    commit_interval_s: float  # how often it commits: the STOP rule waits at least that long
    last_sync_upstream: dict[tuple[str, int], int]  # per partition, for translation coverage
    heartbeat_ms: int | None = None  # the newest heartbeat that crossed the mirror (MM2; ours: the canary's)
    connect: ConnectStates | None = None  # MM2 in a Connect cluster with a REST URL: connector and task state


def engine_positions(
    sampler: Sampler, name: str, flow: FlowConfig, group: str, state: _GroupState, keys: list[tuple[str, int]]
) -> MirrorPositions:
    """Our engine: its group's committed offsets and its offset syncs (``monitor.followers``)."""
    members, committed_map = sampler.readers[flow.source].group(group)
    committed_map = committed_map or {}
    tracker = sampler.trackers[(flow.source, flow.target)]
    syncs = tracker.latest()
    n = len(keys)

    column = _sync_columns(syncs, keys)
    sync_ts = column("ts_ms")
    # the engine is alive if the group has members or it published a newer sync for the partition
    alive = np.full(n, bool(members), bool)
    if state.sync_ts is not None:
        alive |= sync_ts > state.sync_ts
    state.sync_ts = sync_ts
    return MirrorPositions(
        engine="mirrorwatch",
        group=group,
        committed=np.fromiter((committed_map.get(k, -1) for k in keys), np.int64, n),
        sync_upstream=column("upstream_offset"),
        sync_downstream=column("downstream_offset"),
        sync_acked_next=column("acked_next"),
        sync_read_position=column("read_position"),
        alive=alive,
        commit_interval_s=sampler.config.mirror.commit_interval_s,
        # the newest sync that maps an offset: a position report after it says nothing of what translates
        last_sync_upstream={k: s.upstream_offset for k, s in tracker.kept().items()},
    )


def _sync_columns(syncs: dict[tuple[str, int], OffsetSync], keys: list[tuple[str, int]]) -> Callable[[str], np.ndarray]:
    rows = [syncs.get(k) for k in keys]
    return lambda attr: np.fromiter((getattr(s, attr) if s else -1 for s in rows), np.int64, len(keys))


def with_newest_syncs(
    pos: MirrorPositions, syncs: dict[tuple[str, int], OffsetSync], keys: list[tuple[str, int]]
) -> MirrorPositions:
    """Our engine: ``pos`` with the offset syncs the monitor holds now, read after the target's end offsets. A
    partition assigned anew gets a sync without a mapping before anything is sent again
    (``mirror.publisher.PositionPublisher.announce_resumes``); a copy sent again on the target therefore means
    that sync was written before the end offset was read, and taking the syncs after that read lets the estimate
    see it rather than count the copy as a new source record. A sync newer than the end offset read maps past
    it, and the estimate then does not extrapolate (``core.lag.target_side_acked_next``)."""
    column = _sync_columns(syncs, keys)
    return replace(
        pos,
        sync_upstream=column("upstream_offset"),
        sync_downstream=column("downstream_offset"),
        sync_acked_next=column("acked_next"),
        sync_read_position=column("read_position"),
    )
