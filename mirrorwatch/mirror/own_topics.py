"""mirrorwatch's own topics (the canary topic, beside the heartbeats topic) made sure of when the mirror starts.

Why: a canary topic that appears later is only found at the mirror's next topic refresh (30 s by default), and
the first `canary check` on a fresh deployment then measured that discovery time as replication latency. So
the mirror creates the source canary topic if it is missing (the canary's partition count and replication
factor), and its target copy with LogAppendTime like the canary would, and subscribes to both at once.

Only the flow that owns the pair's internal topics (``flows.<name>.internal_topics``, default true) does this
and mirrors them: with two flows on one cluster pair, exactly one of them must, or every heartbeat and canary
event arrives twice (``shared_internal_topics`` finds another group that already mirrors them).
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from ..core.config import Config, FlowConfig
from ..core.coordinator_calls import CoordinatorCalls
from ..core.naming import ReplicationPolicy
from ..core.topic_selection import own_topics

log = logging.getLogger("mirrorwatch.mirror")
ADMIN_TIMEOUT_S = 30


def _create(admin: AdminClient, topic: NewTopic) -> bool:
    try:
        admin.create_topics([topic])[topic.topic].result(ADMIN_TIMEOUT_S)
        return True
    except KafkaException as exc:
        if exc.args and exc.args[0].name() == "TOPIC_ALREADY_EXISTS":  # another worker or the canary was first
            return False
        if exc.args and exc.args[0].name() in ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"):
            # a least-privilege mirror need not create the canary topics: the canary creates them on its first
            # probe (and says so); the mirror subscribes at its next topic refresh
            log.warning(
                "not authorised to CREATE topic %s (%s): the canary will create it; see docs/security.md",
                topic.topic,
                exc.args[0].str(),
            )
            return False
        raise


def await_visible(admin: AdminClient, topics: list[str], timeout_s: float = 10.0) -> None:
    """Wait (bounded) until just-created topics show in metadata with partitions: a listing right after a create
    can miss them, and the mirror would then subscribe to them only at its next refresh (30 s by default)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        listed = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        if all(t in listed and listed[t].error is None and listed[t].partitions for t in topics):
            return
        time.sleep(0.2)


def ensure_own_topics(
    config: Config, flow: FlowConfig, policy: ReplicationPolicy, source_admin: AdminClient, target_admin: AdminClient
) -> None:
    """Create the canary topic on the source and its mirror on the target when missing (owner flow only)."""
    if not flow.internal_topics:
        return
    canary = config.canary
    source_topics = source_admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
    found = source_topics.get(canary.topic)
    partitions = (
        len(found.partitions) if found is not None and found.error is None and found.partitions else canary.partitions
    )
    if found is None and _create(source_admin, NewTopic(canary.topic, canary.partitions, canary.replication_factor)):
        log.info("created canary topic %s on %s (%d partitions)", canary.topic, flow.source, canary.partitions)
    wanted = [canary.topic] if canary.topic in source_admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics else []
    await_visible(source_admin, wanted + [config.mirror.heartbeats_topic] if config.mirror.heartbeats else wanted)
    target_name = policy.target_topic(canary.topic)
    if target_name in target_admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics:
        return
    topic_config = {"message.timestamp.type": "LogAppendTime"} if canary.log_append_time else {}
    if _create(target_admin, NewTopic(target_name, partitions, canary.replication_factor, config=topic_config)):
        log.info("created target canary topic %s on %s (%d partitions)", target_name, flow.target, partitions)


def matched_topics(flow_name: str, flow: FlowConfig, ready: list[str], internal: set[str], warn: bool) -> int:
    """How many of the flow's own (not internal) topics exist on the source; a warning when none (at start)."""
    count = sum(1 for t in ready if t not in internal)
    if warn and count == 0:
        excluded = f", exclude {flow.exclude}" if flow.exclude else ""
        log.warning(
            "flow %s: no topic on source cluster '%s' matches topics %s%s; nothing but mirrorwatch's own "
            "topics is mirrored until one appears (mirrorwatch_mirror_matched_topics = 0)",
            flow_name,
            flow.source,
            flow.topics,
            excluded,
        )
    return count


def other_consumers(admin: AdminClient, calls: CoordinatorCalls, own_group: str, topics: set[str]) -> list[str]:
    """Consumer groups other than ours with a member assigned one of ``topics`` (another flow mirroring them).
    The describe goes through the source's coordinator-call helper (core.coordinator_calls): librdkafka 2.16
    aborted the mirror here during a rolling restart."""
    if not topics:
        return []
    groups = [
        g.group_id
        for g in admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S).result(ADMIN_TIMEOUT_S).valid
        if g.group_id != own_group
    ]
    found = []
    for group, described in calls.describe_groups(groups, ADMIN_TIMEOUT_S).items():
        if isinstance(described, KafkaException):  # gone meanwhile, or not a consumer group: not a second mirror
            continue
        if isinstance(described, Exception):  # no answer: not "nobody else"
            raise described
        if any(t in topics for m in described.members for t, _ in m.assignment):
            found.append(group)
    return sorted(found)


def report_shared(flow_name: str, flow: FlowConfig, others: list[str], before: list[str] | None) -> list[str]:
    """A warning when another group (newly) mirrors this flow's internal topics too; returns ``others``."""
    if others and others != before:
        log.warning(
            "flow %s: group(s) %s on '%s' also consume the heartbeats/canary topics this flow mirrors: every "
            "heartbeat and canary event would arrive twice on '%s'; set internal_topics: false on all flows of "
            "this cluster pair but one (mirrorwatch_mirror_internal_topics_shared = %d)",
            flow_name,
            ", ".join(others),
            flow.source,
            flow.target,
            len(others),
        )
    return others


def warn_if_legacy_group(admin: AdminClient, flow_name: str, flow: FlowConfig, group: str) -> None:
    """Default groups became per flow (``mirrorwatch-<flow>``); a flow not named ``<source>-<target>`` that ran
    before used ``mirrorwatch-<source>-<target>``. If our group is new and that one exists, say how to keep it."""
    legacy = f"mirrorwatch-{flow.source}-{flow.target}"
    if flow.group or group == legacy:
        return
    listed = {
        g.group_id for g in admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S).result(ADMIN_TIMEOUT_S).valid
    }
    if legacy in listed and group not in listed:
        log.warning(
            "flow %s: its default group is now %s (one per flow); the group %s, the default before, exists on "
            "'%s': if this flow used it, stop the mirror and set flows.%s.group: %s, or the flow's topics are "
            "mirrored again from the start",
            flow_name,
            group,
            legacy,
            flow.source,
            flow_name,
            legacy,
        )


def internal_topic_names(config: Config, flow: FlowConfig) -> set[str]:
    """The source topics the flow mirrors whatever its include regexes say (none unless it owns them)."""
    return set(own_topics(config, flow))
