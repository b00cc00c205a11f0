"""The flow's canary and heartbeat topics on both clusters: reachability, creation, end offsets."""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

# confluent_kafka.admin imports NewTopic and OffsetSpec without re-exporting them (no __all__): strict mypy calls
# them private
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from ..core.access import connection_problem, serve_callbacks
from ..core.client_set import settle
from ..core.clients import list_offsets_fresh, make_admin
from ..core.config import Config
from ..core.mm2 import is_mm2, mm2_topics
from ..core.redact import redact_text
from ..core.topic_selection import policy_of

log = logging.getLogger("mirrorwatch.canary.topics")


class ProbeUnknown(Exception):
    """The probe cannot tell whether the mirror works (a cluster away, a request refused): Nagios UNKNOWN."""


class ClusterUnreachable(ProbeUnknown):
    def __init__(self, role: str, alias: str, bootstrap: str, reason: str):
        # a failed SASL or TLS handshake looks like a timeout to the request: say what it really was
        problem = connection_problem(bootstrap, alias)
        super().__init__(problem or f"cannot reach {role} cluster '{alias}' at {bootstrap}: {redact_text(reason)}")
        self.role, self.alias, self.bootstrap = role, alias, bootstrap


def _reason(exc: Exception) -> str:
    err = exc.args[0] if exc.args else None
    text = err.str() if isinstance(err, KafkaError) else str(exc)
    return text or type(exc).__name__


class FlowTopics:
    """Names and admin access for one flow: ``mw.canary`` on the source, ``east.mw.canary`` on the target."""

    def __init__(self, config: Config, flow_name: str | None, client_id: str):
        self.flow_name, self.flow = config.flow(flow_name)
        self.settings = config.canary
        self.source_alias, self.target_alias = self.flow.source, self.flow.target
        self.source_cluster = config.clusters[self.flow.source]
        self.target_cluster = config.clusters[self.flow.target]
        policy = policy_of(self.flow)  # MirrorMaker 2 flows: renamed by MM2's policy and aliases
        self.mm2 = is_mm2(self.flow)
        self.source_topic = self.settings.topic
        self.target_topic = policy.target_topic(self.settings.topic)
        if self.mm2:  # the source's heartbeats as MM2 mirrors them (written there by MM2's heartbeat connector)
            self.heartbeat_topic, self.heartbeats_expected = mm2_topics(self.flow).mirrored_heartbeats, True
        else:
            self.heartbeat_topic = policy.target_topic(config.mirror.heartbeats_topic)
            self.heartbeats_expected = config.mirror.heartbeats
        self.refresh_interval_s = config.mirror.refresh_interval_s
        self.created: list[str] = []  # "role topic" of the canary topics this instance created
        self._client_id = client_id
        self._admins = {"source": self._new_admin("source"), "target": self._new_admin("target")}
        self._stale: set[str] = set()
        self.on_answer: Callable[[str, str, bool], None] = lambda role, alias, answered: None  # service_probes.py

    def _new_admin(self, role: str) -> AdminClient:
        return make_admin(self.source_cluster if role == "source" else self.target_cluster, self._client_id)

    def _admin(self, role: str) -> AdminClient:
        """The role's admin client; a new one after a failed request. A long-lived librdkafka client can stay
        unable to reach a cluster that answers a new one at once (after a broker restart: confluentinc/
        librdkafka#5301, and group and offset requests that time out for good), and the canary is a service that
        must see the cluster come back; the monitor's reader does the same."""
        if role in self._stale:
            self._stale.discard(role)
            self._admins[role] = self._new_admin(role)
        return self._admins[role]

    def close(self) -> None:
        """Wait out the admin clients' outstanding requests (bounded), then let them go (core.client_set)."""
        settle(self._admins.values())
        self._admins.clear()

    def _where(self, role: str) -> tuple[str, str]:
        cluster = self.source_cluster if role == "source" else self.target_cluster
        return (self.source_alias if role == "source" else self.target_alias), cluster.bootstrap_servers

    def partitions(self, role: str, topic: str, timeout_s: float) -> list[int] | None:
        """The topic's partitions (None if it does not exist); ClusterUnreachable when metadata fails.

        One topic per request, so a cluster with many topics answers as fast as a small one.
        """
        admin = self._admin(role)
        try:
            md = admin.list_topics(topic, timeout=timeout_s)
        except KafkaException as exc:
            serve_callbacks(admin)
            self._stale.add(role)
            self.on_answer(role, self._where(role)[0], False)
            raise ClusterUnreachable(role, *self._where(role), _reason(exc)) from None
        self.on_answer(role, self._where(role)[0], bool(md.brokers))
        if not md.brokers:
            self._stale.add(role)
            raise ClusterUnreachable(role, *self._where(role), "no brokers in the metadata answer")
        found = md.topics.get(topic)
        if found is None or found.error is not None or not found.partitions:
            return None
        return sorted(found.partitions)

    def _create(self, role: str, topic: str, partitions: int, config: dict[str, str], timeout_s: float) -> None:
        new = NewTopic(topic, partitions, self.settings.replication_factor, config=config)
        try:
            self._admin(role).create_topics([new], request_timeout=timeout_s)[topic].result(timeout_s)
            log.info("created %s canary topic %s (%d partitions)", role, topic, partitions)
            self.created.append(f"{topic} on {role} cluster '{self._where(role)[0]}'")
        except (KafkaException, TimeoutError) as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                alias, _ = self._where(role)
                raise ProbeUnknown(
                    f"cannot create canary topic {topic} on {role} cluster '{alias}': {_reason(exc)}"
                ) from None

    def ensure_source(self, timeout_s: float) -> list[int]:
        found = self.partitions("source", self.source_topic, timeout_s)
        if found is None:
            self._create("source", self.source_topic, self.settings.partitions, {}, timeout_s)
            found = list(range(self.settings.partitions))
        return found

    def ensure_target(self, source_partitions: list[int], timeout_s: float) -> tuple[list[int], bool]:
        """The target canary topic's partitions, and whether the canary just created it.

        Created here (if the mirror has not yet) so that it can use LogAppendTime: then every reader sees the
        target broker's append time as the arrival time. The mirror keeps an existing topic as it is.
        """
        found = self.partitions("target", self.target_topic, timeout_s)
        if found is not None:
            return found, False
        config: dict[str, str] = {"message.timestamp.type": "LogAppendTime"} if self.settings.log_append_time else {}
        try:
            self._create("target", self.target_topic, len(source_partitions), config, timeout_s)
        except ProbeUnknown as exc:  # no create rights on the target: the mirror will create it; read when it does
            log.warning("%s", exc)
            return [], False
        return list(source_partitions), True

    def end_offsets(self, role: str, topic: str, partitions: list[int], timeout_s: float) -> dict[int, int]:
        if not partitions:
            return {}
        # OffsetSpec.latest is unannotated upstream
        request = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}  # type: ignore[no-untyped-call]
        try:
            futures = list_offsets_fresh(self._admin(role), request, timeout_s)
            return {tp.partition: f.result(timeout_s).offset for tp, f in futures.items()}
        except (KafkaException, TimeoutError) as exc:
            self._stale.add(role)
            alias, bootstrap = self._where(role)
            raise ProbeUnknown(
                f"cannot read end offsets of {topic} on {role} cluster '{alias}' at {bootstrap}: {_reason(exc)}"
            ) from None


WARM_UP_HEADER = "mw.canary.warmup"  # not the canary marker: every reader skips this record


def warm_up(producer: Producer, topics: FlowTopics, partition: int, timeout_s: float) -> None:
    """Get the producer connected and its idempotent producer id before the first produced_at is taken.

    Otherwise the first event waits for the producer id — measured at 0.5 s one time in three on the local
    clusters — and that wait would be reported as mirror latency. Connecting alone is not enough, so one empty
    record without the canary marker is written and acknowledged first (readers ignore it).
    """
    try:
        producer.list_topics(topics.source_topic, timeout=timeout_s)
    except KafkaException as exc:
        serve_callbacks(producer)
        raise ClusterUnreachable(
            "source", topics.source_alias, topics.source_cluster.bootstrap_servers, _reason(exc)
        ) from None
    failed: list[KafkaError] = []
    producer.produce(
        topics.source_topic,
        value=b"",
        partition=partition,
        headers=[(WARM_UP_HEADER, b"1")],
        on_delivery=lambda err, _msg: failed.append(err) if err is not None else None,
    )
    if producer.flush(timeout_s) > 0 or failed:
        reason = failed[0].str() if failed else f"no acknowledgement within {timeout_s:g} s"
        raise ProbeUnknown(
            f"source cluster '{topics.source_alias}' at {topics.source_cluster.bootstrap_servers} "
            f"did not take a record: {reason}"
        )
