"""Listing a flow's source topics (the rule: core.topic_selection) and keeping their target topics in shape.

Target topics get the source's partition count and the source's explicitly-set values of the configs that
change what a topic keeps or accepts. Only explicitly-set (dynamic) source configs are copied, so a target
cluster's own defaults stay in force where the source relies on defaults.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from concurrent.futures import Future
from dataclasses import dataclass

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from ..core.access import Denied, is_denied, raise_if_denied
from ..core.acls import is_literal
from ..core.config import FlowConfig
from ..core.naming import ReplicationPolicy, checkpoints_topic, offset_syncs_topic
from ..core.topic_selection import TopicFilter

log = logging.getLogger("mirrorwatch.mirror.topics")

SYNCED_CONFIGS = (
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "max.message.bytes",
    "compression.type",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
)
ADMIN_TIMEOUT_S = 30


@dataclass
class SourceTopic:
    name: str
    partitions: int


def check_named_topics(admin: AdminClient, flow: FlowConfig, own: AbstractSet[str] = frozenset()) -> None:
    """Include patterns that are plain names must be visible: a topic the principal may not DESCRIBE is left
    out of a listing as if it did not exist, and the mirror would silently skip it. Asked by name, the broker
    says TOPIC_AUTHORIZATION_FAILED instead (whether or not it exists). ``own``: the heartbeats and canary
    topics, always mirrored."""
    names = [p for p in flow.topics if is_literal(p)] + sorted(own)
    if not names:
        return
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    for name in names:
        if name in metadata.topics:
            continue
        found = admin.list_topics(name, timeout=ADMIN_TIMEOUT_S).topics.get(name)
        if found is not None and found.error is not None and is_denied(found.error):
            raise Denied("READ", "topic", name, "source")


def list_matching(admin: AdminClient, topic_filter: TopicFilter) -> list[SourceTopic]:
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    return sorted(
        (
            SourceTopic(name, len(md.partitions))
            for name, md in metadata.topics.items()
            if md.error is None and topic_filter.matches(name)
        ),
        key=lambda t: t.name,
    )


def explicit_configs(admin: AdminClient, topics: list[str], role: str = "source") -> dict[str, dict[str, str]]:
    """The SYNCED_CONFIGS each topic sets explicitly (not inherited from broker defaults)."""
    if not topics:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    out: dict[str, dict[str, str]] = {}
    for resource, future in admin.describe_configs(resources).items():
        try:
            entries = future.result(ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            raise_if_denied(exc, "DESCRIBE_CONFIGS", "topic", resource.name, role)
            raise
        out[resource.name] = {
            k: e.value
            for k, e in entries.items()
            if k in SYNCED_CONFIGS and e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None
        }
    return out


def _result(
    futures: Mapping[str, Future[None]] | Mapping[ConfigResource, Future[None]], what: str, operation: str
) -> None:
    """Wait for a request on the target's topics; ``operation`` is the ACL it needs (named when refused)."""
    for name, future in futures.items():
        try:
            future.result(ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            topic = name.name if isinstance(name, ConfigResource) else name
            raise_if_denied(exc, operation, "topic", topic, "target")
            code = exc.args[0].name() if exc.args else ""
            if code not in ("TOPIC_ALREADY_EXISTS", "INVALID_PARTITIONS"):
                raise
        log.debug("%s %s", what, name)


class TargetTopics:
    """Creates and syncs target topics for one flow."""

    def __init__(self, source_admin: AdminClient, target_admin: AdminClient, policy: ReplicationPolicy):
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.policy = policy

    def ensure_internal(self) -> None:
        compacted = {"cleanup.policy": "compact"}
        wanted = {offset_syncs_topic(self.policy.source): 1, checkpoints_topic(self.policy.source): 1}
        existing = self.target_admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        new = [NewTopic(t, n, -1, config=compacted) for t, n in wanted.items() if t not in existing]
        if new:
            _result(self.target_admin.create_topics(new), "created", "CREATE")

    def sync(self, topics: list[SourceTopic], with_configs: bool) -> list[str]:
        """Create missing target topics, add partitions, and (with_configs) copy configs.

        Returns the source topics whose target is ready to receive records.
        """
        existing = self.target_admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        missing = [t for t in topics if self.policy.target_topic(t.name) not in existing]
        configs = explicit_configs(self.source_admin, [t.name for t in (topics if with_configs else missing)])
        if missing:
            new = [
                NewTopic(self.policy.target_topic(t.name), t.partitions, -1, config=configs.get(t.name, {}))
                for t in missing
            ]
            _result(self.target_admin.create_topics(new), "created", "CREATE")
            for t in missing:
                log.info(
                    "created target topic %s (%d partitions) for %s",
                    self.policy.target_topic(t.name),
                    t.partitions,
                    t.name,
                )
        grow = {}
        for t in topics:
            md = existing.get(self.policy.target_topic(t.name))
            if md is not None and md.error is None and len(md.partitions) < t.partitions:
                grow[self.policy.target_topic(t.name)] = t.partitions
        if grow:
            _result(
                self.target_admin.create_partitions([NewPartitions(n, c) for n, c in grow.items()]), "grew", "ALTER"
            )
            for name, count in grow.items():
                log.info("increased partitions of %s to %d", name, count)
        if with_configs:
            self._sync_configs({t.name: configs.get(t.name, {}) for t in topics if t not in missing})
        return [t.name for t in topics]

    def _sync_configs(self, wanted: dict[str, dict[str, str]]) -> None:
        targets = {self.policy.target_topic(s): c for s, c in wanted.items() if c}
        if not targets:
            return
        current = explicit_configs(self.target_admin, list(targets), "target")
        changes = []
        for name, config in targets.items():
            diff = {k: v for k, v in config.items() if current.get(name, {}).get(k) != v}
            if diff:
                entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in diff.items()]
                changes.append(ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries))
                log.info("syncing config of %s: %s", name, diff)
        if changes:
            _result(self.target_admin.incremental_alter_configs(changes), "altered", "ALTER_CONFIGS")
