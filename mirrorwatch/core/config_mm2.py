"""The config of a flow mirrored by Apache MirrorMaker 2 (``flows.<name>.mirror``): where MM2 keeps its records,
and the Kafka Connect REST API it may be read from (``flows.<name>.mirror.connect``).

:mod:`.config` imports these models (and they stay importable from there); this module never imports it back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .config_section import Section
from .redact import MASK


class ConnectRestSettings(Section):
    """A Kafka Connect cluster's REST API, read (GET only) for the MM2 connectors' and tasks' states.

    Optional: without it every figure still comes from the topics alone. ``password`` is a secret: give it as
    ``${ENV}``; it is masked in every repr and log like a cluster's ``sasl.password``.
    """

    url: str = Field(description="the Connect REST API's base URL, e.g. http://connect:8083")
    username: str | None = Field(None, description="HTTP basic auth user (Connect's rest.extension basic auth)")
    password: str | None = Field(None, description="HTTP basic auth password; give it as ${ENV}")
    ssl_ca_location: str | None = Field(None, description="CA file for an https URL (default: the system's)")
    timeout_s: float = Field(5.0, gt=0, description="per-request timeout")

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not re.match(r"^https?://[^/\s]+", url):
            raise ValueError(f"expected an http:// or https:// URL, got {url!r}")
        return url.rstrip("/")

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for key, value in super().__repr_args__():
            yield key, (MASK if key == "password" and value is not None else value)


class MirrorMaker2Settings(Section):
    """The flow is mirrored by Apache MirrorMaker 2, not by mirrorwatch's engine: where MM2 keeps its records.

    Every default is what MM2 4.x does when left unconfigured (checked against a real MM2 4.3.1, see
    docs/mirrormaker2.md). Topic names left unset are derived from the MM2 aliases.
    """

    kind: Literal["mm2"] = Field(description="'mm2': Apache MirrorMaker 2 (dedicated mode or a Connect cluster)")
    source_alias: str | None = Field(None, description="MM2's alias of the source cluster; default: the flow's source")
    target_alias: str | None = Field(None, description="MM2's alias of the target cluster; default: the flow's target")
    policy: Literal["default", "identity"] = Field(
        "default",
        description="replication.policy.class: DefaultReplicationPolicy (<source><separator>topic) or "
        "IdentityReplicationPolicy",
    )
    separator: str = Field(".", min_length=1, description="replication.policy.separator")
    offset_syncs_topic: str | None = Field(None, description="default mm2-offset-syncs.<target_alias>.internal")
    offset_syncs_topic_location: Literal["source", "target"] = Field(
        "source", description="offset-syncs.topic.location: the cluster that holds the offset syncs"
    )
    checkpoints_topic: str | None = Field(
        None, description="on the target; default <source_alias>.checkpoints.internal"
    )
    heartbeats_topic: str = Field(
        "heartbeats",
        description="MM2's heartbeats topic name (its heartbeat connector "
        "writes it on the target; the source's, mirrored, is <source_alias>.heartbeats)",
    )
    connector: str = Field("MirrorSourceConnector", description="the source connector's name in the Connect offsets")
    connect_offsets_topic: str | None = Field(
        None,
        description="the source connector's Connect offsets topic, on the target; default (dedicated mode) "
        "mm2-offsets.<source_alias>.internal",
    )
    connect_configs_topic: str | None = Field(
        None,
        description="the Connect cluster's config.storage.topic, on the target (it says which groups MM2's checkpoint "
        "connector has found); default (dedicated mode) mm2-configs.<source_alias>.internal",
    )
    offset_flush_interval_s: float = Field(
        60.0, gt=0, description="offset.flush.interval.ms / 1000: how often MM2 commits its source positions"
    )
    emit_checkpoints_interval_s: float = Field(60.0, gt=0, description="emit.checkpoints.interval.seconds")
    exactly_once: bool = Field(
        False,
        description="MM2 runs with exactly.once.source.support=enabled: its target partitions hold transaction "
        "markers, so the monitor does not read progress off the target's end offsets (docs/monitor.md)",
    )
    refresh_groups_interval_s: float = Field(
        600.0,
        gt=0,
        description="refresh.groups.interval.seconds: how often MM2's checkpoint connector looks for new groups",
    )
    checkpoint_connector: str = Field(
        "MirrorCheckpointConnector",
        description="the checkpoint connector's name (Connect REST state); default from the source connector's "
        "prefix (src->dst.MirrorSourceConnector: src->dst.MirrorCheckpointConnector)",
    )
    heartbeat_connector: str = Field(
        "MirrorHeartbeatConnector",
        description="the heartbeat connector's name (Connect REST state); default from the source connector's "
        "prefix, as the checkpoint connector's",
    )
    connect: ConnectRestSettings | None = Field(
        None, description="the Connect cluster's REST API, for connector and task state (Connect mode only)"
    )

    @model_validator(mode="before")
    @classmethod
    def _sibling_connectors(cls, data: Any) -> Any:
        """A flow that names only its source connector names the other two by its prefix, as MM2 and Strimzi do."""
        if not isinstance(data, dict) or not isinstance(data.get("connector"), str):
            return data
        derived = {
            key: sibling_connector(data["connector"], kind)
            for key, kind in (("checkpoint_connector", "Checkpoint"), ("heartbeat_connector", "Heartbeat"))
            if key not in data
        }
        return {**data, **derived}


SOURCE_CONNECTOR = "MirrorSourceConnector"


def sibling_connector(source_connector: str, kind: str) -> str:
    """The name of MM2's ``Mirror<kind>Connector`` beside a source connector: the same prefix
    (``src->dst.MirrorSourceConnector`` → ``src->dst.MirrorCheckpointConnector``); the bare class name when the
    source connector's name does not end in the class name (nothing to take a prefix from)."""
    prefix = source_connector[: -len(SOURCE_CONNECTOR)] if source_connector.endswith(SOURCE_CONNECTOR) else ""
    return f"{prefix}Mirror{kind}Connector"
