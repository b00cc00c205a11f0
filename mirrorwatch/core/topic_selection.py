"""Which source topics a flow mirrors: the one rule the engine mirrors by and the monitor measures by.

Include regexes (full match), then the default excludes: internal topics and loop-backs (a topic mirrored from
the flow's target would come back to it). mirrorwatch's own topics (heartbeats, canary) are always mirrored,
whatever the include regexes say, unless an exclude regex names them: without them heartbeats and the canary
would report a healthy mirror as dead. Only by the flow that owns the pair's internal topics
(``flows.<n>.internal_topics``, default true): with two flows on one cluster pair exactly one mirrors them, or
every heartbeat and canary event arrives twice; the others leave them out. The monitor measures the mirrored
topics without those two (``measured_topics``): they have their own figures (heartbeat age, the canary).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .config import Config, FlowConfig
from .mm2 import flow_policy, is_mm2
from .naming import ReplicationPolicy, is_internal


def policy_of(flow: FlowConfig) -> ReplicationPolicy:
    # an MM2 flow names its target topics by MM2's own policy and aliases (core.mm2)
    return flow_policy(flow)


def own_topics(config: Config, flow: FlowConfig) -> frozenset[str]:
    """mirrorwatch's own topics on a source cluster that ``flow`` mirrors whatever its include regexes say:
    the heartbeats and canary topics for the flow owning them (``internal_topics``), none for the others."""
    if not flow.internal_topics:
        return frozenset()
    if is_mm2(flow):
        # MirrorMaker 2 mirrors what its own topic filter says (the flow's include regexes repeat it); its internal
        # topics (offset syncs, checkpoints, Connect offsets: ``*.internal``) are left out by is_internal
        return frozenset()
    return frozenset({config.mirror.heartbeats_topic, config.canary.topic})


class TopicFilter:
    """Include/exclude regexes (full match) plus the default excludes: internal topics and loop-backs."""

    def __init__(self, flow: FlowConfig, policy: ReplicationPolicy, always: Iterable[str] = frozenset()):
        self._include = [re.compile(p) for p in flow.topics]
        self._exclude = [re.compile(p) for p in flow.exclude]
        self._policy = policy
        self._always = frozenset(always)

    @classmethod
    def of(cls, config: Config, flow: FlowConfig) -> TopicFilter:
        """The flow's filter with mirrorwatch's own topics in (if it owns them): what the engine mirrors, what the
        monitor measures, and what flow-scoped failover tools see of a shared offset-syncs topic."""
        return cls(flow, policy_of(flow), own_topics(config, flow))

    def matches(self, topic: str) -> bool:
        if is_internal(topic) or self._policy.came_from_target(topic):
            return False
        if any(p.fullmatch(topic) for p in self._exclude):
            return False
        return topic in self._always or any(p.fullmatch(topic) for p in self._include)


def mirrored_topics(config: Config, flow: FlowConfig, source_topics: Iterable[str]) -> list[str]:
    """The flow's mirrored topics among ``source_topics``, sorted (partition layouts stay stable)."""
    topic_filter = TopicFilter.of(config, flow)
    return sorted(t for t in source_topics if topic_filter.matches(t))


def measured_topics(config: Config, flow: FlowConfig, source_topics: Iterable[str]) -> list[str]:
    """What the monitor's lags and RPO cover: the flow's mirrored topics without mirrorwatch's own heartbeats and
    canary topics. Those are watched by heartbeat age and the canary; their steady trickle of records (a heartbeat
    every interval, a probe every second) would keep true lag off zero on an idle, caught-up mirror and put
    records that are not the user's data into the figures people page on."""
    own = own_topics(config, flow)
    return [t for t in mirrored_topics(config, flow, source_topics) if t not in own]
