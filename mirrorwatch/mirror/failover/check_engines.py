"""What ``mirror failover check`` reads of the mirror, one adapter per engine (our engine, MirrorMaker 2), as the
monitor has: the heartbeat's age, the checkpoints, the estimator's inputs (``acked.read_positions``), and what a
checkpoint costs a group that resumes at it. The check itself has no per-engine branch."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from ...core.config import Config, FlowConfig
from ...core.delivery import transactional_target
from ...core.mm2 import is_mm2
from ...core.naming import mirror_group
from ...core.records import Checkpoint
from ...core.translation import GroupDiscovery, checkpoint_redelivery
from ..checkpoints import all_checkpoints
from ..mm2_records import Mm2State, read_mm2_state
from ..topology import latest_heartbeats
from .acked import MirrorPositions, Partition, read_positions


@dataclass(frozen=True)
class Resumed:
    """A group resuming at one partition's checkpoint: the records it reads again (None: no checkpoint), why the
    translation is only approximate (stated, not judged), and the checkpoint's age (None: none, or current)."""

    duplicates: int | None
    approximate: str | None
    age_s: float | None


class Engine(Protocol):
    name: str  # "mirrorwatch" or "mm2", as the report says
    own_group: str | None  # the mirror's own consumer group on the source (never judged as an application)
    checkpoints: dict[str, dict[Partition, Checkpoint]]
    max_checkpoint_age_s: float
    discovery: GroupDiscovery | None  # which groups MM2 has found (None: every group is looked at)
    redelivery: dict[tuple[str, str, int], int]  # (group, topic, partition) → re-delivered, where computed here

    def heartbeat_age_s(self) -> float | None: ...

    def positions(self) -> MirrorPositions: ...

    def resumed(self, group: str, key: Partition, commit: int, cp: Checkpoint | None, now_ms: float) -> Resumed: ...


@dataclass
class _EngineReads:
    """What both adapters hold: the flow, and the fields of :class:`Engine` each fills in from its own records."""

    config: Config
    flow_name: str
    flow: FlowConfig
    name: str = field(default="", kw_only=True)
    own_group: str | None = field(default=None, kw_only=True)
    checkpoints: dict[str, dict[Partition, Checkpoint]] = field(default_factory=dict, kw_only=True)
    max_checkpoint_age_s: float = field(default=30.0, kw_only=True)
    discovery: GroupDiscovery | None = field(default=None, kw_only=True)
    redelivery: dict[tuple[str, str, int], int] = field(default_factory=dict, kw_only=True)


@dataclass
class OurEngine(_EngineReads):
    name: str = field(default="mirrorwatch", kw_only=True)

    def __post_init__(self) -> None:
        f = self.flow
        self.own_group = mirror_group(f.source, f.target, f.group, self.flow_name)
        self.checkpoints = all_checkpoints(self.config.clusters[f.target], f.source, f.target)
        self.max_checkpoint_age_s = max(3 * self.config.mirror.checkpoint_interval_s, 30.0)

    def heartbeat_age_s(self) -> float | None:
        f = self.flow
        beat = latest_heartbeats(self.config.clusters[f.target], self.config.mirror.heartbeats_topic).get(
            (f.source, f.target)
        )
        return None if beat is None else max(0.0, time.time() - beat[0] / 1000)

    def positions(self) -> MirrorPositions:
        return read_positions(self.config, self.flow_name, self.flow, None)

    def resumed(self, group: str, key: Partition, commit: int, cp: Checkpoint | None, now_ms: float) -> Resumed:
        if cp is None:
            return Resumed(None, None, None)
        return Resumed(cp.max_duplicates, None, (now_ms - cp.ts_ms) / 1000)


@dataclass
class Mm2Engine(_EngineReads):
    state: Mm2State
    name: str = field(default="mm2", kw_only=True)

    def __post_init__(self) -> None:
        settings = self.flow.mirror
        assert settings is not None  # an MM2 flow
        self.checkpoints = self.state.checkpoints
        self.max_checkpoint_age_s = max(3 * settings.emit_checkpoints_interval_s, 30.0)
        if self.state.assigned_groups is not None:
            # MM2 finds new groups only every refresh.groups.interval.seconds: one it has not found yet is said so
            self.discovery = GroupDiscovery(frozenset(self.state.assigned_groups), settings.refresh_groups_interval_s)

    def heartbeat_age_s(self) -> float | None:
        return self.state.heartbeat_age_s()

    def positions(self) -> MirrorPositions:
        return read_positions(self.config, self.flow_name, self.flow, self.state)

    def resumed(self, group: str, key: Partition, commit: int, cp: Checkpoint | None, now_ms: float) -> Resumed:
        if cp is None:
            return Resumed(None, None, None)
        t, p = key
        # MM2 translates to the newest sync it kept (+1): the re-delivery that adds, from the sync history
        duplicates = checkpoint_redelivery(
            self.state.syncs.get(key, []),
            cp.upstream_offset,
            cp.downstream_offset,
            transactional_target(self.config, self.flow),
        )
        if duplicates is not None:
            self.redelivery[(group, t, p)] = duplicates
        last = self.state.latest_sync.get(key)
        approximate = None
        if last is not None and commit > last[0] + 1:
            approximate = (
                f"{t}[{p}]: commit {commit} is beyond MM2's last offset sync ({last[0]}): translated approximately"
            )
        elif duplicates:
            approximate = (
                f"{t}[{p}]: MM2 translated the checkpoint through an older offset sync: "
                f"approximate, {duplicates} records re-delivered"
            )
        # MM2 writes a checkpoint only when the group's offset moves: one at the commit is current
        age = None if cp.upstream_offset == commit else (now_ms - cp.ts_ms) / 1000
        return Resumed(duplicates, approximate, age)


def engine_of(config: Config, flow_name: str, flow: FlowConfig) -> Engine:
    if is_mm2(flow):
        return Mm2Engine(config, flow_name, flow, read_mm2_state(config, flow))
    return OurEngine(config, flow_name, flow)
