"""Topic and group names shared by the mirror, the canary and the monitor (MirrorMaker 2 conventions).

- ``prefix`` policy (default): source topic ``orders`` of cluster ``east`` is ``east.orders`` on the target;
  a topic already prefixed with a known alias came from elsewhere (loop prevention reads that).
- ``identity`` policy: same name on the target; loops are prevented by the provenance header instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

INTERNAL_TOPIC_RE = re.compile(r"(__.*|.*\.internal|.*-internal)")


def offset_syncs_topic(source: str) -> str:
    """Compacted topic on the target cluster holding the mirror's OffsetSync records for ``source``."""
    return f"mw.offset-syncs.{source}.internal"


def checkpoints_topic(source: str) -> str:
    """Compacted topic on the target cluster holding translated group offsets (Checkpoint records)."""
    return f"{source}.checkpoints.internal"


def mirror_group(source: str, target: str, configured: str | None = None, flow: str | None = None) -> str:
    """The mirror engine's consumer group on the source cluster: ``mirrorwatch-<flow>`` unless configured.

    One group per flow, so two flows on one cluster pair never join each other's group. A flow named
    ``<source>-<target>`` (the usual name) keeps the group it had before groups were per flow
    (``mirrorwatch-<source>-<target>``); a flow named otherwise that ran before keeps its old position only
    with ``group: mirrorwatch-<source>-<target>`` set (docs/design.md).
    """
    if configured:
        return configured
    return f"mirrorwatch-{flow}" if flow else f"mirrorwatch-{source}-{target}"


def is_internal(topic: str) -> bool:
    return bool(INTERNAL_TOPIC_RE.fullmatch(topic))


@dataclass(frozen=True)
class ReplicationPolicy:
    kind: str  # "prefix" | "identity"
    source: str
    target: str
    separator: str = "."

    def target_topic(self, topic: str) -> str:
        return f"{self.source}{self.separator}{topic}" if self.kind == "prefix" else topic

    def source_topic(self, target_topic: str) -> str | None:
        """The source topic a target topic was mirrored from, or None if it is not one of ours."""
        if self.kind == "identity":
            return target_topic
        prefix = f"{self.source}{self.separator}"
        return target_topic[len(prefix) :] if target_topic.startswith(prefix) else None

    def came_from_target(self, topic: str) -> bool:
        """A source topic that is itself a mirror of the target cluster's topic (would loop)."""
        return self.kind == "prefix" and topic.startswith(f"{self.target}{self.separator}")
