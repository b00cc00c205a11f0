"""``mirrorwatch config from-mm2``: an MM2 dedicated-mode ``mm2.properties`` (what ``connect-mirror-maker.sh``
runs) as a mirrorwatch config, one flow per enabled ``source->target`` pair.

MM2's own rules (Kafka: connect/mirror/src/main/java/org/apache/kafka/connect/mirror/MirrorMakerConfig.java):
``a->b.x`` overrides ``x`` for the flow's connectors; a cluster's client settings are the ``a.``-prefixed keys,
with top-level client settings (``security.protocol``, ``sasl.*``, ``ssl.*``) as the fallback; the Connect worker
of the a->b herder runs against b and takes ``b.``-prefixed worker settings (``b.offset.flush.interval.ms``), its
offsets topic defaulting to ``mm2-offsets.a.internal``, mirrorwatch's default too.
"""

from __future__ import annotations

import yaml

from ...core.mm2 import default_connect_configs_topic, default_connect_offsets_topic
from .common import Imported, ImportProblem, java_client_to_librdkafka, split_list
from .flows import Mm2Flow, add_flow
from .properties import PropertiesError, parse_properties

_SHARED_CLIENT_PREFIXES = ("security.", "sasl.", "ssl.")


def _pairs(props: dict[str, str], aliases: list[str], origin: str) -> list[tuple[str, str]]:
    """Every enabled source->target pair, in file order; a pair naming a cluster not in `clusters` is refused."""
    pairs = []
    for key, value in props.items():
        if "->" not in key or not key.endswith(".enabled"):
            continue
        source, rest = key.split("->", 1)
        target = rest[: -len(".enabled")]
        if target not in aliases and "." in target:
            continue  # another flow setting that ends in .enabled (a->b.emit.heartbeats.enabled)
        for alias in (source, target):
            if alias not in aliases:
                raise ImportProblem(
                    f"{origin}: {key} names cluster '{alias}', which 'clusters' does not list ({', '.join(aliases)})"
                )
        if value.strip().lower() == "true" and (source, target) not in pairs:
            pairs.append((source, target))
    return pairs


def _client(props: dict[str, str], alias: str, origin: str) -> dict[str, str]:
    prefix = alias + "."
    client = {key[len(prefix) :]: value for key, value in props.items() if key.startswith(prefix)}
    for key, value in props.items():
        if key.startswith(_SHARED_CLIENT_PREFIXES):
            client.setdefault(key, value)
    if not client.get("bootstrap.servers", "").strip():
        raise ImportProblem(f"{origin}: cluster '{alias}' has no {alias}.bootstrap.servers")
    return client


def _is_yaml(text: str) -> bool:
    """A YAML mapping with nested values ('clusters:' then indented lines) also reads as properties."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(loaded, dict) and any(isinstance(v, dict | list) for v in loaded.values())


def from_mm2_properties(text: str, origin: str) -> Imported:
    try:
        props = parse_properties(text)
    except PropertiesError as exc:
        raise ImportProblem(f"{origin}: not a Java properties file: {exc}") from None
    if "clusters" not in props:
        raise ImportProblem(
            f"{origin}: no 'clusters = ...' line: not an MM2 dedicated-mode mm2.properties "
            "(the file connect-mirror-maker.sh runs)"
        )
    aliases = split_list(props["clusters"])
    if not aliases:
        hint = ": the file is YAML, not an MM2 mm2.properties (Java properties)" if _is_yaml(text) else ""
        raise ImportProblem(f"{origin}: 'clusters' names no cluster{hint}")
    pairs = _pairs(props, aliases, origin)
    if not pairs:
        raise ImportProblem(
            f"{origin}: no enabled flow: no '<source>-><target>.enabled = true' line for the clusters "
            f"{', '.join(aliases)}"
        )
    imported = Imported(origin=f"the MirrorMaker 2 dedicated-mode properties {origin}")
    for alias in dict.fromkeys(a for pair in pairs for a in pair):
        imported.clusters[alias] = java_client_to_librdkafka(alias, _client(props, alias, origin), origin, imported)
    for source, target in pairs:

        def setting(key: str, s: str = source, t: str = target) -> str | None:
            return props.get(f"{s}->{t}.{key}", props.get(key))

        def exclude(key: str, old: str) -> str | None:  # MM2 4.x still reads the deprecated *.blacklist names
            value = setting(key)
            return setting(old) if value is None else value

        offsets = props.get(f"{target}.offset.storage.topic")
        configs = props.get(f"{target}.config.storage.topic")
        where = f"{source}->{target}"
        if str(setting("emit.heartbeats.enabled") or "true").strip().lower() == "false":
            imported.note(f"{where}: emit.heartbeats.enabled = false: MM2 writes no heartbeats for this flow")
        add_flow(
            imported,
            Mm2Flow(
                name=f"{source}-{target}",
                source=source,
                target=target,
                where=where,
                source_setting=setting,
                checkpoint_setting=setting,
                topics=setting("topics"),
                topics_exclude=exclude("topics.exclude", "topics.blacklist"),
                groups=setting("groups"),
                groups_exclude=exclude("groups.exclude", "groups.blacklist"),
                connector="MirrorSourceConnector",  # dedicated mode names each connector by its class
                checkpoint_connector="MirrorCheckpointConnector",
                heartbeat_connector="MirrorHeartbeatConnector",
                connect_offsets_topic=offsets if offsets and offsets != default_connect_offsets_topic(source) else None,
                offsets_comment=f"{target}.offset.storage.topic",
                flush_ms=props.get(f"{target}.offset.flush.interval.ms"),
                flush_from=f"{target}.offset.flush.interval.ms",
                connect_configs_topic=configs if configs and configs != default_connect_configs_topic(source) else None,
                # a worker setting: MirrorMakerConfig.workerConfig takes only the target's prefixed key (a bare
                # one is not passed on to the a->b herder's worker)
                exactly_once=props.get(f"{target}.exactly.once.source.support"),
                exactly_once_from=f"{target}.exactly.once.source.support",
            ),
        )
    return imported
