"""Which source topics a flow mirrors: the one rule the engine mirrors by and the monitor measures by.

Include regexes (full match), then the default excludes: internal topics and loop-backs (a topic mirrored from
the flow's target would come back to it). mirrorwatch's own topics (heartbeats, canary) are always mirrored,
whatever the include regexes say, unless an exclude regex names them: without them heartbeats and the canary
would report a healthy mirror as dead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .config import Config, FlowConfig
from .naming import ReplicationPolicy, is_internal


def policy_of(flow: FlowConfig) -> ReplicationPolicy:
    return ReplicationPolicy(flow.policy, flow.source, flow.target, flow.separator)


def own_topics(config: Config) -> frozenset[str]:
    """mirrorwatch's own topics on a source cluster, mirrored by every flow."""
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
        """The flow's filter with mirrorwatch's own topics always in: what the engine mirrors."""
        return cls(flow, policy_of(flow), own_topics(config))

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
