"""Harmless probes of one cluster as the configured principal: can it connect, and may it do what a need says?

Nothing here writes to a topic, joins a group or changes a config: creation, config changes and partition
growth are asked with ``validate_only``. READ and WRITE on a topic and READ on a group are read off the
operations the broker says the caller may perform on the resource (KIP-430: ``describe_topics`` /
``describe_consumer_groups`` with ``include_authorized_operations``), which needs only DESCRIBE, implied by
both. A topic that does not exist yet has no such answer, so READ and WRITE on it stay "unverified" (a prefixed
WRITE is answered on an existing topic the prefix covers); a broker too old to answer (before Kafka 2.3) gets a
fetch from the end of each partition by an assign()-only consumer for READ.

WRITE on a transactional id (exactly-once) has no such answer: no describe call reports the operations on one,
and a principal rarely may list ACLs. It is asked by a transactional producer's ``init_transactions`` with a
probe id under the prefix (never an id a mirror uses: that would fence it). The broker checks WRITE on the id
first; granted, it records the probe id's empty state in ``__transaction_state`` (expired after
``transactional.id.expiration.ms``, 7 days by default); no transaction is begun, nothing reaches a topic.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, TopicCollection, TopicPartition

# confluent_kafka.admin imports these without re-exporting them (no __all__): strict mypy calls them private
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from ..core.access import AccessProblem, error_of, serve_callbacks, wait_for_connection
from ..core.acls import LITERAL, PREFIXED, AclNeed
from ..core.clients import make_admin, make_consumer, make_producer
from ..core.config import ClusterConfig

OK, MISSING, UNVERIFIED = "ok", "missing", "unverified"
PROBE_NAME = "mirrorwatch-doctor-probe"  # a topic name no one uses: probes on prefixes ask for prefix + this
TIMEOUT_S = 10.0
WARM_UP_HEADER = "mw.canary.warmup"  # the canary's warm-up marker: every canary reader skips such a record
DENIED = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
}
# a fresh cluster creates its group coordinator (__consumer_offsets) on first use: ask again shortly
COORDINATOR_NOT_READY = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
}


class ClusterProbe:
    def __init__(self, alias: str, cluster: ClusterConfig, connect_timeout_s: float = 5.0):
        self.alias, self.cluster = alias, cluster
        self.admin = make_admin(cluster, "mirrorwatch-doctor", **{"socket.timeout.ms": 5000})
        self.connect_timeout_s = connect_timeout_s
        self.topics: dict[str, int] = {}
        self._visible: dict[str, bool] = {}
        self._topic_ops: dict[str, set[str] | None] = {}

    def connect(self) -> tuple[bool, str]:
        """(reachable and authenticated, what to say)."""
        try:
            if not wait_for_connection(self.admin, self.cluster.bootstrap_servers, self.alias, self.connect_timeout_s):
                return (
                    False,
                    f"cannot reach cluster '{self.alias}' at {self.cluster.bootstrap_servers} within {self.connect_timeout_s:g} s",
                )
        except AccessProblem as exc:
            return False, str(exc)
        md = self.admin.list_topics(timeout=TIMEOUT_S)
        self.topics = {n: len(t.partitions) for n, t in md.topics.items() if t.error is None}
        return True, f"{len(md.brokers)} broker(s), {len(self.topics)} topic(s) visible"

    # ------------------------------------------------------------------ one need
    def check(self, need: AclNeed) -> tuple[str, str]:
        """(OK / MISSING / UNVERIFIED, detail)."""
        names = self._names(need)
        if not names:
            return UNVERIFIED, f"no existing topic matches {need.name}"
        for name in names:
            status, detail = self._check_one(need, name)
            if status != OK:
                return status, detail
        return OK, ""

    def _names(self, need: AclNeed) -> list[str]:
        if need.pattern == LITERAL:
            return [need.name]
        if need.pattern == PREFIXED:
            # READ and WRITE are answered on an existing topic only (see above)
            if need.resource_type == "topic" and need.operation in ("READ", "WRITE"):
                covered = sorted(t for t in self.topics if t.startswith(need.name))[:1]
                if covered:
                    return covered
            return [need.name + PROBE_NAME]
        pattern = re.compile(need.name)  # MATCHING: probe the existing topics or groups it matches (a few)
        if need.resource_type == "topic":
            return sorted(t for t in self.topics if pattern.fullmatch(t) and not t.startswith("__"))[:10]
        return []

    def _check_one(self, need: AclNeed, name: str) -> tuple[str, str]:
        kind, op = need.resource_type, need.operation
        if kind == "topic":
            if op in ("READ", "DESCRIBE") and not self._describable(name):
                return MISSING, "refused"
            if op in ("READ", "WRITE") and name in self.topics:
                return self._authorized(name, op)
            if op == "READ":
                return UNVERIFIED, f"{name} does not exist yet"
            if op == "DESCRIBE":
                return OK, ""
            if op == "CREATE":
                return self._admin_call(
                    lambda: self.admin.create_topics(
                        [NewTopic(name, 1, -1)], validate_only=True, request_timeout=TIMEOUT_S
                    )[name]
                )
            if op == "DESCRIBE_CONFIGS":
                resource = ConfigResource(ConfigResource.Type.TOPIC, name)
                return self._admin_call(
                    lambda: self.admin.describe_configs([resource], request_timeout=TIMEOUT_S)[resource]
                )
            if op == "ALTER_CONFIGS":
                entry = ConfigEntry("retention.ms", "-1", incremental_operation=AlterConfigOpType.SET)
                resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
                return self._admin_call(
                    lambda: self.admin.incremental_alter_configs(
                        [resource], validate_only=True, request_timeout=TIMEOUT_S
                    )[resource]
                )
            if op == "ALTER":
                count = self.topics.get(name, 1) + 1
                return self._admin_call(
                    lambda: self.admin.create_partitions(
                        [NewPartitions(name, count)], validate_only=True, request_timeout=TIMEOUT_S
                    )[name]
                )
            if op == "WRITE":
                if not self._describable(name):
                    return MISSING, "refused (not even DESCRIBE)"
                return (
                    UNVERIFIED,
                    f"{name} does not exist yet: the broker states what may be done only on a topic that exists",
                )
        if kind == "group":
            return self._group(name, op)
        if kind == "transactional id" and op == "WRITE":
            return self._transactional_id(name)
        return UNVERIFIED, "not probed"

    def _transactional_id(self, name: str) -> tuple[str, str]:
        """WRITE on a transactional id: init_transactions with it (see the module note: only ever a probe id)."""
        producer = make_producer(self.cluster, "mirrorwatch-doctor", **{"transactional.id": name})
        try:
            producer.init_transactions(TIMEOUT_S)
            return OK, ""
        except KafkaException as exc:
            err = error_of(exc)
            if err is not None and err.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                return MISSING, "refused"
            return UNVERIFIED, f"no answer: {exc}"

    def _authorized(self, topic: str, op: str) -> tuple[str, str]:
        """OK or MISSING from the operations the broker says the caller may perform on an existing topic."""
        if topic not in self._topic_ops:
            try:
                future = self.admin.describe_topics(
                    TopicCollection([topic]), include_authorized_operations=True, request_timeout=TIMEOUT_S
                )[topic]
                ops = future.result(TIMEOUT_S + 1).authorized_operations
                self._topic_ops[topic] = None if ops is None else {o.name for o in ops}
            except Exception as exc:
                err = error_of(exc)
                if err is not None and err.code() in DENIED:
                    self._topic_ops[topic] = set()
                else:
                    return self._fetch(topic) if op == "READ" else (UNVERIFIED, f"no answer: {exc}")
        ops = self._topic_ops[topic]
        if ops is None:  # a broker older than KIP-430 (Kafka 2.3) does not say
            return (
                self._fetch(topic) if op == "READ" else (UNVERIFIED, "the broker does not report authorised operations")
            )
        if op in ops or "ALL" in ops:
            return OK, ""
        return MISSING, "refused" + (f" (it may {', '.join(sorted(ops))} {topic})" if ops else "")

    def _group(self, group: str, op: str) -> tuple[str, str]:
        """DESCRIBE from describe_consumer_groups answering at all; READ from the operations it reports."""
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            try:
                description = self.admin.describe_consumer_groups(
                    [group], include_authorized_operations=True, request_timeout=TIMEOUT_S
                )[group].result(TIMEOUT_S + 1)
                break
            except Exception as exc:
                err = error_of(exc)
                if err is not None and err.code() in COORDINATOR_NOT_READY and time.monotonic() < deadline:
                    time.sleep(0.5)
                    continue
                if err is not None and err.code() in DENIED:
                    return MISSING, "refused"
                return UNVERIFIED, f"no answer: {exc}"
        if op == "DESCRIBE":
            return OK, ""
        ops = description.authorized_operations
        if ops is None:
            return UNVERIFIED, "the broker does not report authorised operations"
        names = {o.name for o in ops}
        if op in names or "ALL" in names:
            return OK, ""
        return MISSING, "refused" + (f" (it may {', '.join(sorted(names))} group {group})" if names else "")

    def _describable(self, name: str) -> bool:
        if name in self.topics:
            return True
        if name not in self._visible:
            md = self.admin.list_topics(name, timeout=TIMEOUT_S).topics.get(name)
            self._visible[name] = not (
                md is not None and md.error is not None and md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            )
        return self._visible[name]

    def _admin_call(self, future_of: Callable[[], Future[Any]]) -> tuple[str, str]:
        try:
            future_of().result(TIMEOUT_S + 1)
            return OK, ""
        except Exception as exc:
            err = error_of(exc)
            if err is not None and err.code() in DENIED:
                return MISSING, "refused"
            if err is not None and err.code() in (
                KafkaError.TOPIC_ALREADY_EXISTS,
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError.INVALID_PARTITIONS,
                KafkaError.INVALID_CONFIG,
                KafkaError.POLICY_VIOLATION,
                KafkaError.INVALID_REPLICATION_FACTOR,
            ):
                return OK, ""  # authorised: the broker got as far as judging the request itself
            return UNVERIFIED, f"no answer: {exc}"

    def _fetch(self, topic: str) -> tuple[str, str]:
        consumer = make_consumer(self.cluster, "mirrorwatch-doctor")
        try:
            consumer.assign([TopicPartition(topic, p, -1) for p in range(self.topics[topic])])  # -1: the end
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                msg = consumer.poll(0.3)
                err = msg.error() if msg is not None else None
                if err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    return MISSING, "refused"
            return OK, ""
        finally:
            consumer.close()

    # ------------------------------------------------------------------ clock
    def clock_offset(self, topic: str) -> tuple[float, float] | None:
        """(broker clock − local clock, ± error) in seconds from one warm-up record's LogAppendTime, or None
        when the topic does not stamp append times (or cannot be written)."""
        producer = make_producer(self.cluster, "mirrorwatch-doctor", **{"acks": "all", "linger.ms": 0})
        got: list[tuple[KafkaError | None, Message, float]] = []
        producer.list_topics(topic, timeout=TIMEOUT_S)
        sent = time.time()
        try:
            producer.produce(
                topic,
                value=b"",
                headers=[(WARM_UP_HEADER, b"1")],
                on_delivery=lambda err, msg: got.append((err, msg, time.time())),
            )
        except KafkaException:
            return None
        producer.flush(TIMEOUT_S)
        serve_callbacks(producer)
        if not got or got[0][0] is not None:
            return None
        _, msg, acked = got[0]
        ts_type, ts = msg.timestamp()
        if ts_type != 2:  # TIMESTAMP_LOG_APPEND_TIME
            return None
        midpoint = (sent + acked) / 2
        return ts / 1000.0 - midpoint, (acked - sent) / 2 + 0.001  # the broker stamps in whole ms
