"""The ACLs each component needs, derived from the config: one list that `mirrorwatch doctor` checks, the tests
take apart one entry at a time, and docs/security.md explains.

Every entry is needed by the component as configured (a test removes each in turn and sees the component
stop with a line naming it), except those marked ``required=False``: they serve one feature and their absence
only disables it (config sync onto existing target topics, partition growth, checkpoints of other groups).
With ``mirror.delivery: exactly_once`` the mirror needs three more on the target (``exactly_once_needs``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .config import Config, FlowConfig
from .delivery import transactional_target
from .naming import (
    ReplicationPolicy,
    checkpoints_topic,
    mirror_group,
    offset_syncs_topic,
    positions_group,
    transactional_id,
)

LITERAL, PREFIXED, MATCHING = "literal", "prefixed", "matching"  # MATCHING: a regex; grant what it matches


@dataclass(frozen=True)
class AclNeed:
    component: str  # mirror, canary, monitor
    role: str  # source or target: which cluster of the flow
    operation: str  # Kafka's AclOperation name: READ, WRITE, CREATE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, ALTER
    resource_type: str  # topic, group, cluster, transactional id
    name: str
    pattern: str = LITERAL
    why: str = ""
    required: bool = True

    def describe(self) -> str:
        shown = {LITERAL: self.name, PREFIXED: f"{self.name}* (prefixed)", MATCHING: f"matching {self.name}"}[
            self.pattern
        ]
        return f"{self.operation} {self.resource_type} {shown}"


_REGEX_CHARS = re.compile(r"[.^$*+?{}\[\]\\|()]")


def is_literal(pattern: str) -> bool:
    """A full-match include pattern without regex characters is a topic name (dots make it a regex: a.b)."""
    return not _REGEX_CHARS.search(pattern)


def _source_topics(config: Config, flow: FlowConfig) -> list[tuple[str, str]]:
    """(name or regex, pattern kind) of the source topics a flow mirrors, mirrorwatch's own topics included."""
    out = [(p, LITERAL if is_literal(p) else MATCHING) for p in flow.topics]
    for own in (config.mirror.heartbeats_topic, config.canary.topic):
        if (own, LITERAL) not in out:
            out.append((own, LITERAL))
    return out


def _target_topics(policy: ReplicationPolicy, topics: list[tuple[str, str]]) -> list[tuple[str, str]]:
    if policy.kind == "prefix":
        return [(policy.target_topic(""), PREFIXED)]  # "east." covers every mirrored topic and the checkpoints
    return topics


def mirror_needs(config: Config, flow_name: str | None) -> list[AclNeed]:
    name, flow = config.flow(flow_name)
    policy = ReplicationPolicy(flow.policy, flow.source, flow.target, flow.separator)
    topics = _source_topics(config, flow)
    needs: list[AclNeed] = []
    add = needs.append
    for topic, kind in topics:
        add(AclNeed("mirror", "source", "READ", "topic", topic, kind, "consume the topics it mirrors"))
        add(
            AclNeed(
                "mirror",
                "source",
                "DESCRIBE_CONFIGS",
                "topic",
                topic,
                kind,
                "copy the topic's explicitly set configs when it creates the target topic",
            )
        )
    add(
        AclNeed(
            "mirror",
            "source",
            "READ",
            "group",
            mirror_group(flow.source, flow.target, flow.group, name),
            LITERAL,
            "join its consumer group and commit what the target acknowledged",
        )
    )
    if config.mirror.heartbeats:
        hb = config.mirror.heartbeats_topic
        add(AclNeed("mirror", "source", "CREATE", "topic", hb, LITERAL, "create the heartbeats topic (once)"))
        add(AclNeed("mirror", "source", "WRITE", "topic", hb, LITERAL, "write a heartbeat every interval"))
    for topic, kind in _target_topics(policy, topics):
        add(AclNeed("mirror", "target", "CREATE", "topic", topic, kind, "create the target topics"))
        add(AclNeed("mirror", "target", "WRITE", "topic", topic, kind, "write the mirrored records and checkpoints"))
        add(
            AclNeed(
                "mirror",
                "target",
                "DESCRIBE_CONFIGS",
                "topic",
                topic,
                kind,
                "compare configs when syncing them onto target topics (the heartbeats topic always sets some)",
            )
        )
        add(
            AclNeed(
                "mirror",
                "target",
                "ALTER_CONFIGS",
                "topic",
                topic,
                kind,
                "sync changed source configs onto target topics",
                required=False,
            )
        )
        add(
            AclNeed(
                "mirror",
                "target",
                "ALTER",
                "topic",
                topic,
                kind,
                "add partitions when a source topic grows",
                required=False,
            )
        )
    if policy.kind != "prefix":
        add(
            AclNeed(
                "mirror",
                "target",
                "CREATE",
                "topic",
                checkpoints_topic(flow.source),
                LITERAL,
                "create the checkpoints topic",
            )
        )
        add(AclNeed("mirror", "target", "WRITE", "topic", checkpoints_topic(flow.source), LITERAL, "write checkpoints"))
    syncs = offset_syncs_topic(flow.source)
    add(AclNeed("mirror", "target", "CREATE", "topic", syncs, LITERAL, "create the offset-syncs topic"))
    add(AclNeed("mirror", "target", "WRITE", "topic", syncs, LITERAL, "publish offset syncs (true lag, checkpoints)"))
    add(AclNeed("mirror", "target", "READ", "topic", syncs, LITERAL, "read offset syncs back to translate checkpoints"))
    for pattern in flow.checkpoint_groups:
        add(
            AclNeed(
                "mirror",
                "source",
                "DESCRIBE",
                "group",
                pattern,
                LITERAL if is_literal(pattern) else MATCHING,
                "read the committed offsets of the groups it checkpoints (invisible groups are skipped)",
                required=False,
            )
        )
    return needs + exactly_once_needs(config, flow_name)


def exactly_once_needs(config: Config, flow_name: str | None) -> list[AclNeed]:
    """What ``mirror.delivery: exactly_once`` adds, all on the target (mirror/transactions.py). The transactional
    producer needs no IDEMPOTENT_WRITE on the cluster: Kafka's InitProducerId and Produce check only WRITE on the
    transactional id when the request carries one (read in the 4.4 broker's KafkaApis)."""
    if config.mirror.delivery != "exactly_once":
        return []
    name, flow = config.flow(flow_name)
    policy = ReplicationPolicy(flow.policy, flow.source, flow.target, flow.separator)
    group = mirror_group(flow.source, flow.target, flow.group, name)
    needs = [
        AclNeed(
            "mirror",
            "target",
            "WRITE",
            "transactional id",
            transactional_id(group, ""),  # "<group>-": one prefixed ACL covers every process's "<group>-<instance>"
            PREFIXED,
            "open, commit and abort its transactions (its id is <group>-<mirror.instance_id or host name>)",
        ),
        AclNeed(
            "mirror",
            "target",
            "READ",
            "group",
            positions_group(group),
            LITERAL,
            "join the positions group and commit the source positions inside each transaction",
        ),
    ]
    needs += [
        AclNeed(
            "mirror",
            "target",
            "READ",
            "topic",
            topic,
            kind,
            "the positions group subscribes to the target topics and commits its offsets on them",
        )
        for topic, kind in _target_topics(policy, _source_topics(config, flow))
    ]
    return needs


def canary_needs(config: Config, flow_name: str | None) -> list[AclNeed]:
    _, flow = config.flow(flow_name)
    policy = ReplicationPolicy(flow.policy, flow.source, flow.target, flow.separator)
    canary = config.canary.topic
    return [
        AclNeed("canary", "source", "CREATE", "topic", canary, LITERAL, "create the canary topic when it is missing"),
        AclNeed(
            "canary",
            "target",
            "CREATE",
            "topic",
            policy.target_topic(canary),
            LITERAL,
            "create the target canary topic with LogAppendTime before the mirror does",
            required=False,
        ),
        AclNeed("canary", "source", "WRITE", "topic", canary, LITERAL, "write the canary events"),
        AclNeed(
            "canary", "target", "READ", "topic", policy.target_topic(canary), LITERAL, "read the mirrored events back"
        ),
        AclNeed(
            "canary",
            "target",
            "READ",
            "topic",
            policy.target_topic(config.mirror.heartbeats_topic),
            LITERAL,
            "read the mirrored heartbeats (their age)",
        ),
    ]


def monitor_needs(config: Config, flow_name: str | None) -> list[AclNeed]:
    name, flow = config.flow(flow_name)
    policy = ReplicationPolicy(flow.policy, flow.source, flow.target, flow.separator)
    needs = [
        AclNeed("monitor", "source", "READ", "topic", t, k, "end offsets, and record times for the time lag")
        for t, k in _source_topics(config, flow)
    ]
    needs.append(
        AclNeed(
            "monitor",
            "source",
            "DESCRIBE",
            "group",
            mirror_group(flow.source, flow.target, flow.group, name),
            LITERAL,
            "the mirror group's committed offsets (committed lag)",
        )
    )
    needs += [
        AclNeed("monitor", "target", "DESCRIBE", "topic", t, k, "target end offsets")
        for t, k in _target_topics(policy, _source_topics(config, flow))
    ]
    needs.append(
        AclNeed(
            "monitor",
            "target",
            "READ",
            "topic",
            offset_syncs_topic(flow.source),
            LITERAL,
            "read offset syncs (true lag)",
        )
    )
    if policy.kind == "prefix" and not transactional_target(config, flow):
        needs += [
            AclNeed(
                "monitor",
                "target",
                "READ",
                "topic",
                t,
                k,
                "look for a transaction marker at a partition's end (an undeclared transactional target)",
                required=False,
            )
            for t, k in _target_topics(policy, _source_topics(config, flow))
        ]
    return needs


def all_needs(config: Config, flow_name: str | None) -> list[AclNeed]:
    return mirror_needs(config, flow_name) + canary_needs(config, flow_name) + monitor_needs(config, flow_name)
