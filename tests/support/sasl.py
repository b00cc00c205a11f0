"""The SASL_SSL test pair: users, ACL grants (from mirrorwatch.core.acls) and configs for the tools."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mirrorwatch.core.acls import LITERAL, PREFIXED, AclNeed
from mirrorwatch.localkafka import LocalClusters

# distinctive, so that "it appears nowhere" is a meaningful search; only characters the SCRAM format argument takes
MIRROR_PASSWORD = f"mwSecret{uuid.uuid4().hex[:12]}Zq"
ADMIN_PASSWORD = f"mwAdmin{uuid.uuid4().hex[:12]}Zq"
MIRROR_USER = "mirror"

_RESOURCE = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "cluster": ResourceType.BROKER,
    "transactional id": ResourceType.TRANSACTIONAL_ID,
}
_PATTERN = {LITERAL: ResourcePatternType.LITERAL, PREFIXED: ResourcePatternType.PREFIXED}


class SaslPair:
    def __init__(self, base_dir):
        self.clusters = LocalClusters(
            ["east", "west"],
            base_dir,
            security="sasl_ssl",
            users={"admin": ADMIN_PASSWORD, MIRROR_USER: MIRROR_PASSWORD},
        )
        self.east, self.west = self.clusters["east"], self.clusters["west"]

    def start(self) -> None:
        self.clusters.start()

    def stop(self) -> None:
        self.clusters.stop()

    def cluster(self, role: str):
        return self.east if role == "source" else self.west

    def admin(self, role: str) -> AdminClient:
        return AdminClient(self.cluster(role).client_config())

    def config(
        self,
        source_alias: str = "east",
        target_alias: str = "west",
        user: str = MIRROR_USER,
        password: str = MIRROR_PASSWORD,
        **flow,
    ) -> dict:
        """A config dict for source→target on this pair, as ``user``."""
        return {
            "clusters": {
                source_alias: self.east.client_config(user, password),
                target_alias: self.west.client_config(user, password),
            },
            "flows": {f"{source_alias}-{target_alias}": {"source": source_alias, "target": target_alias, **flow}},
        }

    def grant(self, needs: list[AclNeed], principal: str = f"User:{MIRROR_USER}") -> None:
        for role in ("source", "target"):
            unique = {(n.operation, n.resource_type, n.name, n.pattern): n for n in needs if n.role == role}
            bindings = [binding(n, principal) for n in unique.values()]
            if bindings:
                admin = self.admin(role)
                for future in admin.create_acls(bindings).values():
                    future.result(30)
        time.sleep(0.5)  # the authorizer applies new ACLs from the metadata log; give it a moment

    def load_coordinators(self, role: str) -> None:
        """Have the cluster's group and transaction coordinators answer: their internal topics are created on
        first use, and loading them (50 partitions of __transaction_state) outlasted the doctor's 10 s answers
        on a busy machine. Once per session, whichever test asks first."""
        producer = Producer({**self.cluster(role).client_config(), "transactional.id": "mirrorwatch-test-load"})
        producer.init_transactions(120)  # retried inside until the transaction coordinator has loaded
        admin, group, deadline = self.admin(role), "mirrorwatch-test-load", time.monotonic() + 120
        while True:
            try:
                admin.describe_consumer_groups([group])[group].result(30)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def revoke_all(self, principal: str = f"User:{MIRROR_USER}") -> None:
        for role in ("source", "target"):
            f = AclBindingFilter(
                ResourceType.ANY,
                None,
                ResourcePatternType.ANY,
                principal,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
            for future in self.admin(role).delete_acls([f]).values():
                future.result(30)
        time.sleep(0.5)


def binding(need: AclNeed, principal: str) -> AclBinding:
    return AclBinding(
        _RESOURCE[need.resource_type],
        "kafka-cluster" if need.resource_type == "cluster" else need.name,
        _PATTERN[need.pattern],
        principal,
        "*",
        AclOperation[need.operation],
        AclPermissionType.ALLOW,
    )
