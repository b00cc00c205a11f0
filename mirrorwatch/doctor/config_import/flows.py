"""One MM2 replication flow (source alias → target alias) as a mirrorwatch flow with its ``mirror: kind: mm2``
block; shared by the Strimzi and the mm2.properties importers, which differ only in where each setting lives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .common import (
    MM2_GROUPS_EXCLUDE_DEFAULT,
    MM2_TOPICS_EXCLUDE_DEFAULT,
    Imported,
    fold_exclude,
    policy_of,
    regex_list,
    seconds,
)

Setting = Callable[[str], Any]  # a connector setting by name, None when unset


@dataclass
class Mm2Flow:
    name: str  # the mirrorwatch flow's name
    source: str  # MM2's aliases, which are also the mirrorwatch cluster names
    target: str
    where: str  # how the input names this flow, for the notes
    source_setting: Setting  # the MirrorSourceConnector's settings
    checkpoint_setting: Setting  # the MirrorCheckpointConnector's settings
    topics: str | None  # MM2's `topics` (None: unset)
    topics_exclude: str | None
    groups: str | None
    groups_exclude: str | None
    connector: str
    checkpoint_connector: str | None  # None: this MM2 runs no checkpoint connector for the flow
    heartbeat_connector: str | None
    connect_offsets_topic: str | None  # None: mirrorwatch's default (dedicated mode's) is right
    offsets_comment: str | None
    flush_ms: Any  # the Connect worker's offset.flush.interval.ms (None: unset)
    flush_from: str  # where it was (or would be) set
    connect_configs_topic: str | None = None  # None: mirrorwatch's default (dedicated mode's) is right
    exactly_once: Any = None  # the Connect worker's exactly.once.source.support (None: unset, MM2's "disabled")
    exactly_once_from: str = "exactly.once.source.support"


def add_flow(imported: Imported, f: Mm2Flow) -> None:
    path = ("flows", f.name)
    topics = regex_list(".*" if f.topics is None else f.topics, f"{f.where} topics", imported)
    excluded = f.topics_exclude is None
    exclude = regex_list(
        MM2_TOPICS_EXCLUDE_DEFAULT if excluded else str(f.topics_exclude), f"{f.where} topics.exclude", imported
    )
    if not topics:
        imported.note(f"{f.where}: no topic regex left, so this flow watches no topic; edit {'.'.join(path)}.topics")
    groups = regex_list(".*" if f.groups is None else f.groups, f"{f.where} groups", imported)
    groups_exclude = regex_list(
        MM2_GROUPS_EXCLUDE_DEFAULT if f.groups_exclude is None else f.groups_exclude,
        f"{f.where} groups.exclude",
        imported,
    )
    flow: dict[str, Any] = {"source": f.source, "target": f.target, "topics": topics, "exclude": exclude}
    flow["checkpoint_groups"] = fold_exclude(groups, groups_exclude)
    imported.comments[(*path, "topics")] = "MM2's topics" + (" (unset: MM2's default)" if f.topics is None else "")
    imported.comments[(*path, "exclude")] = "MM2's topics.exclude" + (" (unset: MM2's default)" if excluded else "")
    if groups_exclude:
        imported.comments[(*path, "checkpoint_groups")] = "MM2's groups, with groups.exclude folded in"
    flow["mirror"] = _mirror(imported, f, path)
    imported.flows[f.name] = flow


def _mirror(imported: Imported, f: Mm2Flow, path: tuple[str, ...]) -> dict[str, Any]:
    src, cp, where = f.source_setting, f.checkpoint_setting, f.where
    policy = policy_of(src("replication.policy.class"), where, imported)
    cp_class = cp("replication.policy.class")
    if f.checkpoint_connector and policy_of(cp_class, where, Imported("")) != policy:
        imported.note(f"{where}: the checkpoint connector's replication.policy.class differs from the source's")
    location = str(src("offset-syncs.topic.location") or "source").strip()
    if location not in ("source", "target"):
        imported.note(f"{where}: offset-syncs.topic.location {location!r} is neither source nor target; left at source")
        location = "source"
    mirror: dict[str, Any] = {
        "kind": "mm2",
        "source_alias": f.source,
        "target_alias": f.target,
        "policy": policy,
        "separator": str(src("replication.policy.separator") or "."),
        "offset_syncs_topic_location": location,
        "connector": f.connector,
    }
    mpath = (*path, "mirror")
    if f.checkpoint_connector:
        mirror["checkpoint_connector"] = f.checkpoint_connector
    else:
        imported.note(
            f"{where}: no checkpoint connector, so MM2 writes no checkpoints: translation coverage and "
            "`mirror failover check` will find none"
        )
    if f.heartbeat_connector:
        mirror["heartbeat_connector"] = f.heartbeat_connector
    else:
        imported.note(
            f"{where}: no heartbeat connector, so MM2 writes no heartbeats: mirrorwatch's heartbeat age and its "
            "liveness rule (STOP when heartbeats stop) have nothing to read"
        )
    if f.connect_offsets_topic:
        mirror["connect_offsets_topic"] = f.connect_offsets_topic
        if f.offsets_comment:
            imported.comments[(*mpath, "connect_offsets_topic")] = f.offsets_comment
    if f.connect_configs_topic:
        mirror["connect_configs_topic"] = f.connect_configs_topic
        imported.comments[(*mpath, "connect_configs_topic")] = (
            "the Connect cluster's config storage topic (which groups MM2 has found)"
        )
    # the defaults: Kafka's WorkerConfig (offset.flush.interval.ms 60000), MirrorCheckpointConfig (60 s, 600 s)
    intervals = (
        ("offset_flush_interval_s", f.flush_ms, 1000, f.flush_from, 60),
        (
            "emit_checkpoints_interval_s",
            cp("emit.checkpoints.interval.seconds"),
            1,
            "emit.checkpoints.interval.seconds",
            60,
        ),
        ("refresh_groups_interval_s", cp("refresh.groups.interval.seconds"), 1, "refresh.groups.interval.seconds", 600),
    )
    for key, value, scale, setting, default in intervals:
        number = None if value is None else seconds(value, scale, f"{where} {setting}", imported)
        mirror[key] = default if number is None else number
        unit = "ms" if scale == 1000 else "s"
        shown = f"{default * scale:g} {unit}"
        imported.comments[(*mpath, key)] = (
            f"{setting} = {value}" if number is not None else f"{setting}: MM2's default, {shown}"
        )
    if str(f.exactly_once or "disabled").strip().lower() == "enabled":
        # every source task of such a worker writes in transactions: markers in the target partitions
        mirror["exactly_once"] = True
        imported.comments[(*mpath, "exactly_once")] = f"{f.exactly_once_from} = {f.exactly_once}"
    _cannot_carry(imported, f)
    return mirror


def _cannot_carry(imported: Imported, f: Mm2Flow) -> None:
    src, cp = f.source_setting, f.checkpoint_setting
    if str(cp("sync.group.offsets.enabled") or "false").strip().lower() == "true":
        imported.note(
            f"{f.where}: sync.group.offsets.enabled = true (MM2 writes translated offsets into the target's "
            "groups): mirrorwatch watches the checkpoints, not those writes"
        )
    if str(cp("emit.checkpoints.enabled") or "true").strip().lower() == "false":
        imported.note(f"{f.where}: emit.checkpoints.enabled = false: MM2 writes no checkpoints for this flow")
    if str(src("emit.offset-syncs.enabled") or "true").strip().lower() == "false":
        imported.note(
            f"{f.where}: emit.offset-syncs.enabled = false: MM2 writes no offset syncs, which mirrorwatch's true lag "
            "and checkpoint checks read"
        )
