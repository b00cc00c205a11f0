"""Which source topics a flow mirrors (the engine's rule, repeated here because monitor may import only core)."""

from __future__ import annotations

import re
from typing import Iterable

from ..core.config import FlowConfig
from ..core.mm2 import flow_policy
from ..core.naming import ReplicationPolicy, is_internal


def policy_of(flow: FlowConfig) -> ReplicationPolicy:
    return flow_policy(flow)


def mirrored_topics(flow: FlowConfig, source_topics: Iterable[str]) -> list[str]:
    """Source topics matching an include regex (full match), no exclude regex, not internal, and not themselves
    mirrored from the flow's target (those would loop). Sorted, so partition layouts are stable."""
    include = [re.compile(p) for p in flow.topics]
    exclude = [re.compile(p) for p in flow.exclude]
    policy = policy_of(flow)
    return sorted(
        t for t in source_topics
        if any(r.fullmatch(t) for r in include) and not any(r.fullmatch(t) for r in exclude)
        and not is_internal(t) and not policy.came_from_target(t)
    )
