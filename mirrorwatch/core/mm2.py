"""Apache MirrorMaker 2's own records and topic names, read (never written) by the monitor, canary and failover check.

MM2 writes its records with Kafka's protocol ``Struct`` schemas (big-endian; STRING = int16 length + UTF-8):

- **OffsetSync** (``mm2-offset-syncs.<target>.internal``, on the source cluster by default): key
  ``{topic: STRING, partition: INT32}``, value ``{upstreamOffset: INT64, offset: INT64}`` with no version header.
  Source offset ``upstreamOffset`` is on the target at ``offset``. Sparse: MM2 writes one when the
  downstream offset moved ``offset.lag.max`` (default 100) past the previous sync's prediction, and on the first
  record of a task.
- **Checkpoint** (``<source>.checkpoints.internal`` on the target): key ``{group: STRING, topic: STRING,
  partition: INT32}``, value ``{version: INT16}`` then ``{upstreamOffset: INT64, offset: INT64, metadata:
  STRING}``. The record timestamp is when it was emitted.
- **Heartbeat** (``heartbeats`` on the target, written by MM2's heartbeat connector; mirrored onward as
  ``<source>.heartbeats``): key ``{sourceClusterAlias: STRING, targetClusterAlias: STRING}``, value
  ``{version: INT16}`` then ``{timestamp: INT64}``.
- **Connect source offsets** of ``MirrorSourceConnector`` (``mm2-offsets.<source>.internal`` on the target in
  dedicated mode): JSON key ``["MirrorSourceConnector", {"cluster": "<source alias>", "partition": N, "topic":
  "<source topic>"}]``, JSON value ``{"offset": N}``, where N is the offset of the last record MM2 mirrored and
  committed (it resumes at N + 1).

Each layout was checked against bytes captured from the real MM2 4.3.1 (``tests/fixtures/mm2_records.json``).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from .config import FlowConfig
from .naming import ReplicationPolicy
from .records import Checkpoint, Heartbeat, RecordFormatError

# ----------------------------------------------------------------------------- topic names (MM2 4.x defaults)


@dataclass(frozen=True)
class Mm2Topics:
    """Where one MM2 flow keeps its records, and on which cluster alias (mirrorwatch's aliases)."""

    offset_syncs: str
    offset_syncs_cluster: str
    checkpoints: str  # on the target
    heartbeats: str  # MM2's own heartbeats, on the target
    mirrored_heartbeats: str  # the source cluster's heartbeats topic as mirrored to the target
    connect_offsets: str  # on the target (dedicated mode: the worker of the source->target herder)
    connect_configs: str  # on the target: connector and task configs (which groups the checkpoint tasks have)


def default_offset_syncs_topic(target_alias: str) -> str:
    return f"mm2-offset-syncs.{target_alias}.internal"


def default_checkpoints_topic(source_alias: str) -> str:
    return f"{source_alias}.checkpoints.internal"


def default_connect_offsets_topic(source_alias: str) -> str:
    return f"mm2-offsets.{source_alias}.internal"


def default_connect_configs_topic(source_alias: str) -> str:
    return f"mm2-configs.{source_alias}.internal"


def is_mm2(flow: FlowConfig) -> bool:
    return flow.mirror is not None and flow.mirror.kind == "mm2"


def aliases(flow: FlowConfig) -> tuple[str, str]:
    """MM2's (source, target) aliases of a flow: they name its topics, and may differ from mirrorwatch's."""
    m = flow.mirror
    if m is None:
        return flow.source, flow.target
    return m.source_alias or flow.source, m.target_alias or flow.target


def flow_policy(flow: FlowConfig) -> ReplicationPolicy:
    """How the flow names source topics on the target, for either engine."""
    if not is_mm2(flow):
        return ReplicationPolicy(flow.policy, flow.source, flow.target, flow.separator)
    assert flow.mirror is not None  # is_mm2
    source, target = aliases(flow)
    kind = "identity" if flow.mirror.policy == "identity" else "prefix"
    return ReplicationPolicy(kind, source, target, flow.mirror.separator)


def mm2_topics(flow: FlowConfig) -> Mm2Topics:
    m = flow.mirror
    assert m is not None, "mm2_topics is for MirrorMaker 2 flows"
    source, target = aliases(flow)
    sep = m.separator
    return Mm2Topics(
        offset_syncs=m.offset_syncs_topic or default_offset_syncs_topic(target),
        offset_syncs_cluster=flow.source if m.offset_syncs_topic_location == "source" else flow.target,
        checkpoints=m.checkpoints_topic or default_checkpoints_topic(source),
        heartbeats=m.heartbeats_topic,
        # heartbeats topics are renamed even under the identity policy (MM2 finds upstreams by their names)
        mirrored_heartbeats=f"{source}{sep}{m.heartbeats_topic}",
        connect_offsets=m.connect_offsets_topic or default_connect_offsets_topic(source),
        connect_configs=m.connect_configs_topic or default_connect_configs_topic(source),
    )


# ----------------------------------------------------------------------------- Struct decoding


class _Reader:
    def __init__(self, data: bytes | None, what: str):
        if data is None:
            raise RecordFormatError(f"{what}: empty record")
        self.data, self.pos, self.what = data, 0, what

    def _take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise RecordFormatError(f"{self.what}: truncated at byte {self.pos}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def int16(self) -> int:
        return int(self._take(">h"))

    def int32(self) -> int:
        return int(self._take(">i"))

    def int64(self) -> int:
        return int(self._take(">q"))

    def string(self) -> str:
        length = self.int16()
        if length < 0 or self.pos + length > len(self.data):
            raise RecordFormatError(f"{self.what}: bad string length {length} at byte {self.pos - 2}")
        text = self.data[self.pos : self.pos + length]
        self.pos += length
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError:
            raise RecordFormatError(f"{self.what}: string is not UTF-8") from None

    def version(self, known: int = 0) -> None:
        v = self.int16()
        if v != known:
            raise RecordFormatError(f"{self.what}: unsupported version {v}")


@dataclass(frozen=True, slots=True)
class Mm2OffsetSync:
    topic: str  # source topic
    partition: int
    upstream_offset: int
    downstream_offset: int


def decode_offset_sync(key: bytes | None, value: bytes | None) -> Mm2OffsetSync:
    k, v = _Reader(key, "MM2 OffsetSync key"), _Reader(value, "MM2 OffsetSync")
    topic, partition = k.string(), k.int32()
    return Mm2OffsetSync(topic, partition, v.int64(), v.int64())


def decode_checkpoint(key: bytes | None, value: bytes | None, ts_ms: int) -> Checkpoint:
    """As mirrorwatch's own :class:`Checkpoint` (``max_duplicates`` unknown: MM2 does not say)."""
    k, v = _Reader(key, "MM2 Checkpoint key"), _Reader(value, "MM2 Checkpoint")
    group, topic, partition = k.string(), k.string(), k.int32()
    v.version()
    upstream, downstream = v.int64(), v.int64()
    v.string()  # metadata: the group's commit metadata, passed through
    return Checkpoint(group, topic, partition, upstream, downstream, ts_ms)


def decode_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat:
    k, v = _Reader(key, "MM2 Heartbeat key"), _Reader(value, "MM2 Heartbeat")
    source, target = k.string(), k.string()
    v.version()
    return Heartbeat(source, target, v.int64())


def any_heartbeat(key: bytes | None, value: bytes | None) -> Heartbeat:
    """A heartbeat in either format: mirrorwatch's JSON or MM2's Struct (a topic may hold both over its life)."""
    if value and value[:1] == b"{":
        return Heartbeat.from_value(value)
    return decode_heartbeat(key, value)


@dataclass(frozen=True, slots=True)
class ConnectSourceOffset:
    connector: str
    cluster: str  # MM2's source alias
    topic: str
    partition: int
    offset: int  # the last record mirrored; MM2 resumes at offset + 1

    @property
    def next_offset(self) -> int:
        return self.offset + 1


def decode_connect_offset(key: bytes | None, value: bytes | None) -> ConnectSourceOffset | None:
    """A MirrorSourceConnector position, whatever the connector is called (``MirrorSourceConnector`` in dedicated
    mode, ``src->dst.MirrorSourceConnector`` under Strimzi, anything in a user's Connect cluster: the caller
    picks its connector by name); None for a tombstone or another kind of connector's record (a heartbeat
    connector's partition has no topic)."""
    try:
        name, partition = json.loads(key or b"")
    except (ValueError, TypeError, UnicodeDecodeError):
        raise RecordFormatError("Connect offset key: not [connector, partition] JSON") from None
    if value is None or not isinstance(partition, dict) or not {"cluster", "topic", "partition"} <= partition.keys():
        return None
    try:
        offset = json.loads(value)["offset"]
        return ConnectSourceOffset(
            name, str(partition["cluster"]), str(partition["topic"]), int(partition["partition"]), int(offset)
        )
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise RecordFormatError("Connect offset: not a MirrorSourceConnector position") from None


# ----------------------------------------------------------------------------- Connect's config topic

_TASK_GROUPS = "task.assigned.groups"  # MirrorCheckpointConnector's task config: the groups that task checkpoints


def decode_connect_config(key: bytes | None, value: bytes | None) -> tuple[tuple[Any, ...], Any] | None:
    """The records of a Connect config topic that say which groups MM2's checkpoint tasks have found.

    ``commit-<connector>`` → ``(("tasks", connector), N)``: the connector's current task count;
    ``task-<connector>-<i>`` → ``(("task", connector, i), frozenset of groups)``. Checked on the real worker:
    ``{"properties": {..., "task.assigned.groups": "g1,g2"}}`` (Connect's internal JSON, no schema). None for any
    other record (connector configs, session keys, target states) and for tombstones. Only the group list is
    kept: a task config also holds the connector's config, secrets included, and none of it is read here.
    """
    if value is None or key is None:
        return None
    try:
        name = key.decode("utf-8")
        body = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        raise RecordFormatError("Connect config record: not JSON") from None
    if not isinstance(body, dict):
        return None
    if name.startswith("commit-") and isinstance(body.get("tasks"), int):
        return ("tasks", name.removeprefix("commit-")), body["tasks"]
    if name.startswith("task-") and isinstance(body.get("properties"), dict):
        connector, _, index = name.removeprefix("task-").rpartition("-")
        if not index.isdigit():
            return None
        groups = body["properties"].get(_TASK_GROUPS)
        found = frozenset(g for g in str(groups).split(",") if g) if groups is not None else frozenset()
        return ("task", connector, int(index)), found
    return None


def assigned_groups(latest: dict[tuple[Any, ...], Any], connector: str) -> set[str] | None:
    """The groups MM2's checkpoint connector ``connector`` currently checkpoints: the union of its current tasks'
    groups (``latest`` holds the newest :func:`decode_connect_config` value per key). None when the topic says
    nothing of that connector (another config topic, or not read yet): then nothing is known."""
    count = latest.get(("tasks", connector))
    if count is None:
        return None
    out: set[str] = set()
    for i in range(count):
        out |= set(latest.get(("task", connector, i), ()))
    return out
