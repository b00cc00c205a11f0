"""The preflight: per flow, what is fine and what is missing, each with the fix. Exit 0 / 1 / 2 (3: bad config)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from ..core.access import principal_of
from ..core.acls import LITERAL, PREFIXED, AclNeed, all_needs
from ..core.config import Config
from ..core.naming import ReplicationPolicy, is_internal
from .probes import MISSING, OK, UNVERIFIED, ClusterProbe

SKEW_WARN_S = 1.0  # beyond this, time lag and canary latency are off by the skew
EXIT_OK, EXIT_WARN, EXIT_MISSING = 0, 1, 2


@dataclass
class Row:
    flow: str
    check: str
    cluster: str
    status: str  # OK, WARN, MISSING, UNVERIFIED
    detail: str = ""
    fix: str = ""


def exit_code(rows: list[Row]) -> int:
    if any(r.status == "MISSING" for r in rows):
        return EXIT_MISSING
    return EXIT_WARN if any(r.status == "WARN" for r in rows) else EXIT_OK


def run_doctor(config: Config, flow_names: list[str]) -> list[Row]:
    rows: list[Row] = []
    probes: dict[str, ClusterProbe] = {}
    connected: dict[str, bool] = {}
    for name in flow_names:
        _, flow = config.flow(name)
        for alias in (flow.source, flow.target):
            if alias not in probes:
                probes[alias] = ClusterProbe(alias, config.clusters[alias], config.canary.connect_timeout_s)
                ok, detail = probes[alias].connect()
                connected[alias] = ok
                props = config.clusters[alias].properties
                rows.append(
                    Row(
                        name,
                        "connect and authenticate",
                        alias,
                        "OK" if ok else "MISSING",
                        f"as {principal_of(props)}: {detail}" if ok else detail,
                        "" if ok else _connect_fix(detail),
                    )
                )
        if connected[flow.source] and connected[flow.target]:
            rows += _acl_rows(config, name, probes)
            rows += _topic_rows(config, name, probes[flow.source], probes[flow.target])
            rows.append(_clock_row(config, name, probes[flow.source], probes[flow.target]))
    return rows


def _connect_fix(detail: str) -> str:
    if detail.startswith("authentication failed"):
        return "set the principal's sasl.username / sasl.password (and sasl.mechanism) for this cluster"
    if detail.startswith("TLS handshake"):
        return "point ssl.ca.location at the CA that signed the broker's certificate"
    return "check bootstrap.servers, the network path and that the cluster runs"


def _acl_rows(config: Config, flow_name: str, probes: dict[str, ClusterProbe]) -> list[Row]:
    _, flow = config.flow(flow_name)
    merged: dict[tuple[str, str, str, str, str], list[AclNeed]] = {}
    for need in all_needs(config, flow_name):
        merged.setdefault((need.role, need.operation, need.resource_type, need.name, need.pattern), []).append(need)
    rows = []
    for (role, *_), needs in merged.items():
        need = needs[0]
        alias = flow.source if role == "source" else flow.target
        probe = probes[alias]
        status, detail = probe.check(need)
        components = ", ".join(sorted({n.component for n in needs}))
        required = any(n.required for n in needs)
        why = "; ".join(dict.fromkeys(n.why for n in needs))
        shown = {OK: "OK", UNVERIFIED: "UNVERIFIED", MISSING: "MISSING" if required else "WARN"}[status]
        fix = _grant(need, probe) if status != OK else ""
        rows.append(
            Row(
                flow_name,
                f"ACL {need.describe()} ({components})",
                alias,
                shown,
                f"{detail + ': ' if detail else ''}{why}",
                fix,
            )
        )
    return rows


def _grant(need: AclNeed, probe: ClusterProbe) -> str:
    resource = {
        "topic": f"--topic '{need.name}'",
        "group": f"--group '{need.name}'",
        "cluster": "--cluster",
        "transactional id": f"--transactional-id '{need.name}'",
    }[need.resource_type]
    if need.pattern == PREFIXED:
        resource += " --resource-pattern-type prefixed"
    elif need.pattern != LITERAL:
        resource = f"--topic <each topic matching {need.name}>"
    return (
        f"kafka-acls.sh --bootstrap-server {probe.cluster.bootstrap_servers} --command-config <admin.properties> "
        f"--add --allow-principal {principal_of(probe.cluster.properties)} "
        f"--operation {need.operation.replace('_', '').title().replace('configs', 'Configs')} {resource}"
    )


def _topic_rows(config: Config, flow_name: str, source: ClusterProbe, target: ClusterProbe) -> list[Row]:
    _, flow = config.flow(flow_name)
    policy = ReplicationPolicy(flow.policy, flow.source, flow.target, flow.separator)
    include = [re.compile(p) for p in flow.topics]
    exclude = [re.compile(p) for p in flow.exclude]
    own = {config.mirror.heartbeats_topic, config.canary.topic}
    matched = sorted(
        t
        for t in source.topics
        if not is_internal(t)
        and not policy.came_from_target(t)
        and not any(p.fullmatch(t) for p in exclude)
        and (t in own or any(p.fullmatch(t) for p in include))
    )
    if not [t for t in matched if t not in own]:
        return [
            Row(
                flow_name,
                "topics",
                flow.source,
                "WARN",
                f"no topic on the source matches {flow.topics}",
                "create the topics, or fix flows." + flow_name + ".topics / exclude",
            )
        ]
    rows = []
    for topic in matched:
        target_topic = policy.target_topic(topic)
        have, want = target.topics.get(target_topic), source.topics[topic]
        if have is None:
            status, detail, fix = "OK", f"{want} partition(s); not on the target yet", "the mirror creates it"
        elif have < want:
            status, detail, fix = (
                "WARN",
                f"{want} partition(s) on the source, {have} on the target",
                "the mirror adds them (needs ALTER)",
            )
        elif have > want:
            status, detail, fix = (
                "WARN",
                f"{want} partition(s) on the source, {have} on the target",
                "records keep their partition number: partitions beyond the source's stay empty",
            )
        else:
            status, detail, fix = "OK", f"{want} partition(s) on both", ""
        rows.append(
            Row(flow_name, f"topic {topic} → {target_topic}", f"{flow.source}→{flow.target}", status, detail, fix)
        )
    return rows


def _clock_row(config: Config, flow_name: str, source: ClusterProbe, target: ClusterProbe) -> Row:
    _, flow = config.flow(flow_name)
    policy = ReplicationPolicy(flow.policy, flow.source, flow.target, flow.separator)
    where = f"{flow.source}↔{flow.target}"
    src = source.clock_offset(config.canary.topic) if config.canary.topic in source.topics else None
    tgt_topic = policy.target_topic(config.canary.topic)
    tgt = target.clock_offset(tgt_topic) if tgt_topic in target.topics else None
    if src is None or tgt is None:
        return Row(
            flow_name,
            "clock skew",
            where,
            "UNVERIFIED",
            f"needs the canary topics ({config.canary.topic}, {tgt_topic}) with LogAppendTime on both clusters",
            "create them with message.timestamp.type=LogAppendTime to measure it",
        )
    skew, error = src[0] - tgt[0], src[1] + tgt[1]
    detail = f"{flow.source} − {flow.target} = {skew * 1000:+.0f} ms (± {error * 1000:.0f} ms)"
    if abs(skew) - error > SKEW_WARN_S:
        return Row(
            flow_name,
            "clock skew",
            where,
            "WARN",
            detail,
            "synchronise the brokers' clocks (NTP): time lag and canary latency are off by the skew",
        )
    return Row(flow_name, "clock skew", where, "OK", detail)


def to_json(rows: list[Row]) -> dict[str, Any]:
    return {
        "status": {0: "OK", 1: "WARNING", 2: "MISSING"}[exit_code(rows)],
        "exit_code": exit_code(rows),
        "checks": [asdict(r) for r in rows],
    }
