"""Checkpoint age per group and translation coverage, per flow, for both engines (MirrorMaker 2 and ours).

Of the source groups matching the flow's ``checkpoint_groups`` that committed on mirrored partitions, how many
have a usable checkpoint on the target (``core.translation.translation_coverage``). The checkpoints are kept by a
latest-per-key tracker on the flow's checkpoints topic (ours: JSON Checkpoints in ``<source>.checkpoints.internal``;
MM2: its Struct Checkpoints, which name the target topic). Listing groups and their offsets costs one admin
request per group, so it is refreshed every ``REFRESH_S`` rather than every cycle.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from confluent_kafka import Message

from ..core.config import Config, FlowConfig
from ..core.mm2 import assigned_groups, decode_checkpoint, decode_connect_config, flow_policy, is_mm2, mm2_topics
from ..core.naming import checkpoints_topic, mirror_group
from ..core.records import Checkpoint
from ..core.redact import redact_text
from ..core.translation import GroupDiscovery, translation_coverage
from .followers import Decoder, TopicFollower
from .kafka_io import ClusterReader

CheckpointKey = tuple[str, str, int]  # (group, source topic, partition)

log = logging.getLogger("mirrorwatch.monitor.coverage")
REFRESH_S = 30.0


def _decoder(flow: FlowConfig) -> Decoder[CheckpointKey, Checkpoint]:
    if not is_mm2(flow):

        def ours(msg: Message) -> tuple[CheckpointKey, Checkpoint]:
            cp = Checkpoint.from_value(msg.value())
            return (cp.group, cp.topic, cp.partition), cp

        return ours
    policy = flow_policy(flow)

    def mm2(msg: Message) -> tuple[CheckpointKey, Checkpoint] | None:
        cp = decode_checkpoint(msg.key(), msg.value(), msg.timestamp()[1])
        source_topic = policy.source_topic(cp.topic)  # MM2 names the target topic in its checkpoints
        if source_topic is None:
            return None
        return (cp.group, source_topic, cp.partition), Checkpoint(
            cp.group, source_topic, cp.partition, cp.upstream_offset, cp.downstream_offset, cp.ts_ms
        )

    return mm2


def unknown_coverage(reason: str) -> dict[str, Any]:
    """Coverage that could not be told: no ratio (the exporter leaves the gauge out, as for any unknown value), and
    the reason, which the API and `monitor lag` show."""
    return {"groups": 0, "translated": 0, "ratio": None, "untranslated": [], "approximate": [], "error": reason}


class CoverageWatch:
    def __init__(self, config: Config, name: str, flow: FlowConfig):
        self.name, self.flow = name, flow
        topic = mm2_topics(flow).checkpoints if is_mm2(flow) else checkpoints_topic(flow.source)
        self.tracker = TopicFollower(
            config.clusters[flow.target], topic, f"mirrorwatch-monitor-cps-{flow.source}", _decoder(flow)
        )
        # MM2's Connect config topic says which groups its checkpoint tasks have found (GroupDiscovery)
        self.configs = (
            TopicFollower(
                config.clusters[flow.target],
                mm2_topics(flow).connect_configs,
                f"mirrorwatch-monitor-cps-{flow.source}",
                lambda msg: decode_connect_config(msg.key(), msg.value()),
            )
            if is_mm2(flow)
            else None
        )
        self.first_seen_ms: dict[str, int] = {}  # when each group was first seen with commits on mirrored partitions
        self.patterns = [re.compile(p) for p in flow.checkpoint_groups]
        self.own_group = None if is_mm2(flow) else mirror_group(flow.source, flow.target, flow.group, name)
        self.max_age_s = (
            max(3 * flow.mirror.emit_checkpoints_interval_s, 30.0)
            if flow.mirror is not None  # an MM2 flow (mm2 is the one kind of flows.X.mirror)
            else max(3 * config.mirror.checkpoint_interval_s, 30.0)
        )
        self._next = 0.0
        self.result: dict[str, Any] | None = None

    def refresh(
        self,
        source_reader: ClusterReader,
        mirrored: set[tuple[str, int]],
        last_sync: dict[tuple[str, int], int],
        now_ms: int,
    ) -> dict[str, Any] | None:
        """Recompute at most every REFRESH_S; returns the newest result (None until the first)."""
        if time.monotonic() < self._next:
            return self.result
        self._next = time.monotonic() + REFRESH_S
        try:
            listing = source_reader.admin.list_consumer_groups(request_timeout=source_reader.timeout_s).result(
                source_reader.timeout_s + 1
            )
            if listing.errors:  # a broker that did not answer: its groups are not "none" (the listing says so here)
                raise RuntimeError(str(listing.errors[0]))
            names = sorted(
                g.group_id
                for g in listing.valid
                if g.group_id != self.own_group
                and not g.group_id.startswith("mirrorwatch")
                and any(p.fullmatch(g.group_id) for p in self.patterns)
            )
            commits: dict[str, dict[tuple[str, int], int]] = {}
            for group in names:
                _members, offsets = source_reader.group(group)
                mine = {k: v for k, v in (offsets or {}).items() if k in mirrored}
                if mine:
                    commits[group] = mine
        except Exception as exc:  # fail closed: what could not be read is said, never an earlier answer as now's
            reason = f"cannot read the groups on '{self.flow.source}': {redact_text(str(exc))}"
            log.warning("translation coverage of flow %s: %s", self.name, reason)
            self.result = unknown_coverage(reason)
            return self.result
        checkpoints: dict[str, dict[tuple[str, int], Checkpoint]] = {}
        for (group, topic, partition), cp in self.tracker.latest().items():
            checkpoints.setdefault(group, {})[(topic, partition)] = cp
        for group in commits:
            self.first_seen_ms.setdefault(group, now_ms)
        result = translation_coverage(commits, checkpoints, last_sync, now_ms, self.max_age_s, None, self.discovery())
        result["checkpoint_age_s"] = {
            g: round(max((now_ms - c.ts_ms) / 1000 for c in checkpoints[g].values()), 1)
            for g in commits
            if g in checkpoints
        }
        self.result = result
        return result

    def discovery(self) -> GroupDiscovery | None:
        if self.configs is None or self.flow.mirror is None:
            return None
        found = assigned_groups(self.configs.latest(), self.flow.mirror.checkpoint_connector)
        if found is None:
            return None
        return GroupDiscovery(frozenset(found), self.flow.mirror.refresh_groups_interval_s, dict(self.first_seen_ms))

    @property
    def trackers(self) -> list[TopicFollower[Any, Any]]:
        return [self.tracker] if self.configs is None else [self.tracker, self.configs]
