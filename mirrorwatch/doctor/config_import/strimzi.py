"""``mirrorwatch config from-strimzi``: Strimzi ``KafkaMirrorMaker2`` resources as a mirrorwatch config.

Both API shapes (checked in github.com/strimzi/strimzi-kafka-operator):
- ``kafka.strimzi.io/v1beta2``: ``spec.connectCluster`` names the Connect cluster among ``spec.clusters[]``,
  ``spec.mirrors[].sourceCluster``/``targetCluster`` name aliases there, a mirror may have a
  ``heartbeatConnector`` (api/src/main/java/io/strimzi/api/kafka/model/mirrormaker2/KafkaMirrorMaker2MirrorSpec.java
  at 0.48.0);
- ``kafka.strimzi.io/v1`` (Strimzi 0.49+, the only one from 1.0): ``spec.target`` is the Connect (and target)
  cluster with ``groupId``/``offsetStorageTopic``/..., ``spec.mirrors[].source`` holds the source cluster, and
  there is no heartbeat connector (KafkaMirrorMaker2Spec.java, KafkaMirrorMaker2TargetClusterSpec.java at 1.0.0).

Strimzi 0.49-0.51 turned the old shape into the new one exactly as :func:`_normalise` does
(cluster-operator/src/main/java/io/strimzi/operator/cluster/model/KafkaMirrorMaker2Cluster.java,
``validateAndUpdateToNewAPI`` at 0.49.0), which is where the Connect defaults come from.
"""

from __future__ import annotations

from typing import Any

import yaml

from .common import Imported, ImportProblem, env_name
from .flows import Mm2Flow, add_flow

KIND = "KafkaMirrorMaker2"
API_VERSIONS = ("kafka.strimzi.io/v1beta2", "kafka.strimzi.io/v1")
# the v1beta2 Connect cluster's offsets topic when its config does not set offset.storage.topic:
# KafkaMirrorMaker2Cluster.java validateAndUpdateToNewAPI (0.49.0) and KafkaMirrorMaker2Configuration.java DEFAULTS
# (0.48.0) in strimzi-kafka-operator's cluster-operator/src/main/java/io/strimzi/operator/cluster/model/
DEFAULT_OFFSET_STORAGE_TOPIC = "mirrormaker2-cluster-offsets"
DEFAULT_CONFIG_STORAGE_TOPIC = "mirrormaker2-cluster-configs"  # the same DEFAULTS and validateAndUpdateToNewAPI
# KafkaMirrorMaker2Connectors.java: each connector is "<source alias>-><target alias>" + ".<class simple name>"
CONNECTOR_SUFFIXES = {
    "sourceConnector": ".MirrorSourceConnector",
    "checkpointConnector": ".MirrorCheckpointConnector",
    "heartbeatConnector": ".MirrorHeartbeatConnector",
}
# api/.../mirrormaker2/KafkaMirrorMaker2Resources.java serviceName(); KafkaConnectCluster.java REST_API_PORT
REST_SERVICE, REST_PORT = "{name}-mirrormaker2-api", 8083


def _documents(text: str, origin: str) -> list[Any]:
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ImportProblem(f"{origin}{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ImportProblem(f"{where}: expected a mapping")
    return value


def _cluster(spec: Any, where: str) -> dict[str, Any]:
    cluster = _mapping(spec, where)
    if not cluster.get("alias") or not cluster.get("bootstrapServers"):
        raise ImportProblem(f"{where}: a cluster needs 'alias' and 'bootstrapServers'")
    return cluster


def _normalise(resource: dict[str, Any], where: str) -> tuple[dict[str, Any], tuple[str, str], list[dict[str, Any]]]:
    """(the target/Connect cluster, its offsets and config topics, the mirrors each with a ``source`` cluster spec)."""
    spec = _mapping(resource.get("spec"), f"{where} spec")
    mirrors = spec.get("mirrors")
    if not isinstance(mirrors, list) or not mirrors:
        raise ImportProblem(f"{where}: spec.mirrors is missing or empty")
    clusters = {c.get("alias"): c for c in spec.get("clusters") or [] if isinstance(c, dict)}
    if spec.get("target") is not None:
        target = _cluster(spec["target"], f"{where} spec.target")
        offsets = target.get("offsetStorageTopic")
        if not offsets:
            raise ImportProblem(f"{where}: spec.target.offsetStorageTopic is missing (Strimzi requires it)")
        configs = target.get("configStorageTopic") or DEFAULT_CONFIG_STORAGE_TOPIC
    elif spec.get("connectCluster") and clusters:
        alias = spec["connectCluster"]
        if alias not in clusters:
            raise ImportProblem(
                f"{where}: spec.connectCluster '{alias}' is not an alias in spec.clusters (defined: "
                f"{', '.join(map(str, clusters))})"
            )
        target = _cluster(clusters[alias], f"{where} spec.clusters[{alias}]")
        worker = _mapping(target.get("config"), where)
        offsets = worker.get("offset.storage.topic") or DEFAULT_OFFSET_STORAGE_TOPIC
        configs = worker.get("config.storage.topic") or DEFAULT_CONFIG_STORAGE_TOPIC
    else:
        raise ImportProblem(f"{where}: needs spec.target (v1) or spec.connectCluster and spec.clusters (v1beta2)")
    defined = ", ".join(map(str, clusters)) or "none"
    out = []
    for i, raw in enumerate(mirrors):
        mirror = dict(_mapping(raw, f"{where} spec.mirrors[{i}]"))
        here = f"{where} spec.mirrors[{i}]"
        if mirror.get("source") is not None:
            mirror["source"] = _cluster(mirror["source"], f"{here}.source")
        elif mirror.get("sourceCluster") is not None:
            if mirror["sourceCluster"] not in clusters:
                raise ImportProblem(
                    f"{here}.sourceCluster: cluster alias '{mirror['sourceCluster']}' is not defined in "
                    f"spec.clusters (defined: {defined})"
                )
            mirror["source"] = _cluster(clusters[mirror["sourceCluster"]], f"{here}.sourceCluster")
        else:
            raise ImportProblem(f"{here}: names no source cluster (source or sourceCluster)")
        named = mirror.get("targetCluster")
        if named is not None and named != target["alias"]:
            other = clusters.get(named)
            if other is None:
                raise ImportProblem(
                    f"{here}.targetCluster: cluster alias '{named}' is not defined in spec.clusters (defined: {defined})"
                )
            if other.get("bootstrapServers") != target["bootstrapServers"]:
                raise ImportProblem(
                    f"{here}.targetCluster '{named}' is not the Connect cluster '{target['alias']}' (Strimzi "
                    "mirrors into the Connect cluster only)"
                )
        mirror["targetAlias"] = named or target["alias"]
        out.append(mirror)
    return target, (str(offsets), str(configs)), out


def _client(imported: Imported, cluster: dict[str, Any], where: str) -> dict[str, str]:
    """A Strimzi cluster spec (bootstrapServers, tls, authentication, config) as librdkafka properties."""
    alias = str(cluster["alias"])
    props = {"bootstrap.servers": str(cluster["bootstrapServers"])}
    tls = cluster.get("tls")
    protocol = "SSL" if tls is not None else "PLAINTEXT"
    certs = _mapping(tls, where).get("trustedCertificates") or []
    if certs:
        names = ", ".join(
            f"Secret {c.get('secretName')} {'key ' + str(c['certificate']) if c.get('certificate') else 'keys ' + str(c.get('pattern'))}"
            for c in certs
            if isinstance(c, dict)
        )
        props["ssl.ca.location"] = imported.env_ref(env_name(alias, "SSL_CA_LOCATION"), f"a PEM file holding {names}")
        imported.note(f"clusters.{alias}: TLS trusts Strimzi-managed certificates ({names}): mount them as a file")
    auth = _mapping(cluster.get("authentication"), where)
    kind = auth.get("type")
    if kind in ("scram-sha-512", "scram-sha-256", "plain"):
        protocol = "SASL_SSL" if tls is not None else "SASL_PLAINTEXT"
        props["sasl.mechanism"] = "PLAIN" if kind == "plain" else str(kind).upper()
        props["sasl.username"] = str(auth.get("username"))
        secret = _mapping(auth.get("passwordSecret"), where)
        props["sasl.password"] = imported.env_ref(
            env_name(alias, "SASL_PASSWORD"), f"Secret {secret.get('secretName')} key {secret.get('password')}"
        )
    elif kind == "tls":
        pair = _mapping(auth.get("certificateAndKey"), where)
        secret_name = pair.get("secretName")
        props["ssl.certificate.location"] = imported.env_ref(
            env_name(alias, "SSL_CERTIFICATE_LOCATION"),
            f"a file holding Secret {secret_name} key {pair.get('certificate')}",
        )
        props["ssl.key.location"] = imported.env_ref(
            env_name(alias, "SSL_KEY_LOCATION"), f"a file holding Secret {secret_name} key {pair.get('key')}"
        )
        imported.note(f"clusters.{alias}: TLS client authentication uses Secret {secret_name}: mount it as files")
    elif kind is not None:
        imported.note(f"clusters.{alias}: authentication type {kind} is not carried over; set it by hand")
    config = _mapping(cluster.get("config"), where)
    algorithm = config.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None:
        props["ssl.endpoint.identification.algorithm"] = str(algorithm).strip() or "none"
    # security.protocol as KafkaMirrorMaker2Connectors.addClusterToMirrorMaker2ConnectorConfig sets it
    return {"bootstrap.servers": props.pop("bootstrap.servers"), "security.protocol": protocol, **props}


def _resource(imported: Imported, resource: dict[str, Any], origin: str) -> None:
    meta = _mapping(resource.get("metadata"), origin)
    name, version = str(meta.get("name") or "unnamed"), str(resource.get("apiVersion"))
    where = f"{KIND} {name}"
    if version not in API_VERSIONS:
        raise ImportProblem(f"{origin}: {where} has apiVersion {version}; supported: {', '.join(API_VERSIONS)}")
    target, (offsets, configs), mirrors = _normalise(resource, where)
    worker = _mapping(target.get("config"), where)
    namespace = meta.get("namespace")
    host = REST_SERVICE.format(name=name) + (f".{namespace}.svc" if namespace else "")
    for i, mirror in enumerate(mirrors):
        source, target_alias = mirror["source"], str(mirror["targetAlias"])
        pair = f"{source['alias']}->{target_alias}"
        here = f"{where} spec.mirrors[{i}] ({pair})"
        if source["alias"] == target_alias:
            raise ImportProblem(f"{here}: the source and target aliases are the same")
        if mirror.get("sourceConnector") is None:
            imported.note(f"{here}: no sourceConnector, so Strimzi creates no MirrorSourceConnector; no flow written")
            continue
        if version.endswith("/v1") and mirror.get("heartbeatConnector") is not None:
            imported.note(f"{here}: heartbeatConnector is not part of the v1 API; Strimzi ignores it")
        connectors = {
            key: (pair + suffix if mirror.get(key) is not None else None) for key, suffix in CONNECTOR_SUFFIXES.items()
        }
        if version.endswith("/v1"):
            connectors["heartbeatConnector"] = None
        for cluster in (source, target):
            alias = str(cluster["alias"])
            if alias not in imported.clusters:
                imported.clusters[alias] = _client(imported, cluster, f"{where} cluster {alias}")
        src = _mapping(_mapping(mirror["sourceConnector"], here).get("config"), here)
        cp = _mapping(_mapping(mirror.get("checkpointConnector"), here).get("config"), here)
        flow = f"{source['alias']}-{target_alias}"
        if flow in imported.flows:
            flow = f"{name}-{flow}"
        add_flow(
            imported,
            Mm2Flow(
                name=flow,
                source=str(source["alias"]),
                target=target_alias,
                where=here,
                source_setting=src.get,
                checkpoint_setting=cp.get,
                topics=_first(mirror, "topicsPattern", src, "topics"),
                topics_exclude=_first(mirror, "topicsExcludePattern", src, "topics.exclude", "topicsBlacklistPattern"),
                groups=_first(mirror, "groupsPattern", cp, "groups"),
                groups_exclude=_first(mirror, "groupsExcludePattern", cp, "groups.exclude", "groupsBlacklistPattern"),
                connector=str(connectors["sourceConnector"]),
                checkpoint_connector=connectors["checkpointConnector"],
                heartbeat_connector=connectors["heartbeatConnector"],
                connect_offsets_topic=offsets,
                offsets_comment="the Connect cluster's offset storage topic",
                connect_configs_topic=configs,
                flush_ms=worker.get("offset.flush.interval.ms"),
                flush_from="the Connect cluster's offset.flush.interval.ms",
                exactly_once=worker.get("exactly.once.source.support"),
                exactly_once_from="the Connect cluster's exactly.once.source.support",
            ),
        )
        imported.trailers[("flows", flow, "mirror")] = [
            "Strimzi's Connect REST API of this resource (connector and task states). Strimzi's NetworkPolicy",
            "admits only the cluster operator and the Connect pods to it: allow the monitor's pod, then uncomment.",
            "connect:",
            f"  url: http://{host}:{REST_PORT}",
        ]


def _first(mirror: dict[str, Any], field: str, config: dict[str, Any], key: str, old: str | None = None) -> str | None:
    """The mirror's pattern field wins over the connector's own config key (KafkaMirrorMaker2Connectors.java);
    the deprecated ``*BlacklistPattern`` is read only when the new field is absent."""
    for value in (mirror.get(field), mirror.get(old) if old else None, config.get(key)):
        if value is not None:
            return str(value)
    return None


def from_strimzi(text: str, origin: str) -> Imported:
    documents = [d for d in _documents(text, origin) if d is not None]
    resources = [d for d in documents if isinstance(d, dict) and d.get("kind") == KIND]
    if not resources:
        kinds = sorted({str(d.get("kind")) for d in documents if isinstance(d, dict) and d.get("kind")})
        found = f"it holds {', '.join(kinds)}" if kinds else "it holds no Kubernetes resource"
        raise ImportProblem(f"{origin}: no {KIND} resource ({found}); give the file that defines the {KIND}")
    names = ", ".join(str(_mapping(r.get("metadata"), origin).get("name")) for r in resources)
    imported = Imported(origin=f"{KIND} {names} in {origin}")
    for resource in resources:
        _resource(imported, resource, origin)
    if not imported.flows:
        raise ImportProblem(f"{origin}: no mirror with a sourceConnector, so there is no flow to watch")
    return imported
