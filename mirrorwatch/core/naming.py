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


def positions_group(mirror_group_name: str) -> str:
    """Exactly-once mode: the mirror's consumer group on the TARGET cluster. Its members share out the flow's
    partitions, and its committed offset on a mirrored target partition is the SOURCE offset to resume from,
    written in the same transaction as the records (docs/exactly-once.md)."""
    return f"{mirror_group_name}.eos"


def transactional_id(mirror_group_name: str, instance: str) -> str:
    """Exactly-once mode: one mirror process's transactional id on the target. All of a flow's ids start with
    ``<mirror group>-`` (one PREFIXED TransactionalId ACL); a restart with the same instance aborts what its
    predecessor left open at once."""
    return f"{mirror_group_name}-{instance}"


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
