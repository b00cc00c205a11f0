"""``mirror failover check``: a read-only go/no-go report for failing consumer groups over to the target.

Three parts: :func:`fetch` reads what the clusters say (through one adapter per engine, ``check_engines``),
:func:`judge` turns it into verdicts (``readiness``) and figures (``core.lag``, ``core.rpo``: no arithmetic of
its own), ``check_render`` prints it.
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

import click
import numpy as np
from confluent_kafka import KafkaException, TopicPartition

from ...core.canary_metrics import parse_canary_metrics
from ...core.cli import UserError
from ...core.clients import make_admin, make_consumer
from ...core.config import ClusterConfig, Config, ConfigError, FlowConfig
from ...core.config_loading import load_config
from ...core.lag import mirror_lags, records_lost
from ...core.oneshot import require_clusters, timeout_option, within
from ...core.rpo import rpo_seconds
from ...core.topic_selection import TopicFilter, policy_of
from ...core.translation import translation_coverage
from ..checkpoints import committed_offsets, source_groups
from .acked import MirrorPositions, Partition
from .check_engines import Engine, engine_of
from .check_render import print_human
from .reach import require_reachable
from .readiness import GroupVerdict, PartitionFacts, judge_group, overall_exit
from .reads import EXIT_CANNOT_TELL, CannotTell, group_is_active, partitions_of, reason


@dataclass(frozen=True)
class SourceFigures:
    """Per mirrored source partition: true lag, the RPO seconds (NaN: the oldest missing record's time could not
    be read), and records lost (removed from the source before the mirror read them)."""

    true_lag: dict[Partition, int]
    rpo_s: dict[Partition, float]
    lost: dict[Partition, int]


def source_positions(
    cluster: ClusterConfig, alias: str, partitions: list[Partition], acked: dict[Partition, int]
) -> SourceFigures:
    """The source's figures against ``acked`` (the estimator's acknowledged positions): true lag
    (``core.lag.mirror_lags``), records lost (``core.lag.records_lost``) and RPO seconds (``core.rpo.rpo_seconds``,
    from the oldest record the target does not have, read here).

    Only partitions that exist on the source now count: the compacted offset-syncs topic remembers topics
    deleted long ago. A partition the source does not list is asked for by its topic, and left out only when the
    broker says the topic does not exist; a partition whose end offset cannot be read raises CannotTell (fail
    closed: left out, its lag would read as 0).
    """
    consumer = make_consumer(cluster, "mirrorwatch-failover-check")
    true_lag: dict[Partition, int] = {}
    lost: dict[Partition, int] = {}
    try:
        existing = {(t, p) for t, md in consumer.list_topics(timeout=10).topics.items() for p in md.partitions}
        for topic in sorted({t for t, p in partitions if (t, p) not in existing}):
            # a topic the principal may not describe is left out of a full listing: ask for it by name
            existing |= {(topic, p) for p in partitions_of(consumer, topic, alias, 10) or []}
        for topic, partition in partitions:
            if (topic, partition) not in existing:
                continue
            start, end = _watermarks(consumer, topic, partition, alias)
            lags = mirror_lags([end], [-1], [acked[(topic, partition)]], [-1])
            true_lag[(topic, partition)] = int(lags.true_lag[0])
            gone = int(records_lost([start], [acked[(topic, partition)]])[0])
            if gone > 0:
                lost[(topic, partition)] = gone
        keys = sorted(true_lag)
        oldest = np.full(len(keys), np.nan)
        for i, (t, p) in enumerate(keys):  # the oldest record the target does not have: its timestamp
            if true_lag[(t, p)] > 0:
                consumer.assign([TopicPartition(t, p, acked[(t, p)])])
                msg = consumer.poll(5)
                if msg is not None and not msg.error():
                    oldest[i] = msg.timestamp()[1]
        measured_at = time.time() * 1000
    finally:
        consumer.close()
    rpo = rpo_seconds([true_lag[k] for k in keys], oldest, measured_at)
    return SourceFigures(true_lag, {k: float(r) for k, r in zip(keys, rpo, strict=True)}, lost)


def _watermarks(consumer: Any, topic: str, partition: int, alias: str) -> tuple[int, int]:
    for attempt in range(5):  # a leader moving or metadata not yet fetched: brief retries
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            return int(low), int(high)
        except KafkaException as exc:
            if attempt == 4:
                raise CannotTell(f"the offsets of {topic}[{partition}] on '{alias}'", reason(exc, 10)) from None
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def canary_status(host: str, port: int | None, flow: str) -> str:
    if port is None:
        return "not configured"
    try:
        text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return "not running"
    try:
        reading = parse_canary_metrics(text).get(flow)
    except ValueError:
        return "not Prometheus text"
    return "no data" if reading is None or reading.status is None else reading.status


@click.command("check", help="Read-only go/no-go report for failing consumer groups over to the target.")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@click.option("--flow", default=None)
@click.option("--group", "groups", multiple=True, help="group(s) to judge (default: all matching checkpoint_groups)")
@click.option("--json", "as_json", is_flag=True)
@timeout_option
def check(config_path: str, flow: str | None, groups: tuple[str, ...], as_json: bool, timeout_s: float) -> int:
    try:
        config = load_config(config_path)
        _, f = config.flow(flow)
        require_clusters(
            [(f.source, config.clusters[f.source]), (f.target, config.clusters[f.target])],
            timeout_s,
            {f.source: "source", f.target: "target"},
        )
        code: int = within(timeout_s, lambda: _check(config_path, flow, groups, as_json), "failover check")
        return code
    except (UserError, ConfigError):
        raise
    except CannotTell as exc:  # fail closed: no verdict from what could not be read
        raise UserError(f"cannot judge failover readiness: {exc}", EXIT_CANNOT_TELL) from None
    except Exception as exc:  # exit 1 means DEGRADED here: anything unexpected is UNKNOWN (3), in one line
        raise UserError(f"cannot judge failover readiness: {type(exc).__name__}: {exc}", 3) from None


@dataclass(frozen=True)
class Facts:
    """What the clusters said, read once: the check's judging reads nothing more."""

    flow_name: str
    flow: FlowConfig
    engine: Engine
    positions: MirrorPositions
    acked: dict[Partition, int]  # the estimator's acknowledged position, where it knows one
    figures: SourceFigures
    heartbeat_age_s: float | None
    commits: dict[str, dict[Partition, int]]  # every group's commits on the source, all topics
    active_on_target: dict[str, bool]
    now_ms: float


def fetch(config: Config, flow_name: str, f: FlowConfig, groups: tuple[str, ...]) -> Facts:
    source, target = config.clusters[f.source], config.clusters[f.target]
    require_reachable(source, f.source)
    require_reachable(target, f.target)
    engine = engine_of(config, flow_name, f)
    # the monitor's estimator (core.lag) over what the target proves, for either engine
    positions = engine.positions()
    acked = positions.acked_next()
    figures = source_positions(source, f.source, sorted(acked), acked)
    heartbeat_age = engine.heartbeat_age_s()
    source_admin = make_admin(source, "mirrorwatch-failover-check")
    target_admin = make_admin(target, "mirrorwatch-failover-check")
    names = list(groups) or source_groups(source_admin, f, {engine.own_group} if engine.own_group else set())
    commits = {g: committed_offsets(source_admin, g) for g in names}
    active = {g: group_is_active(target_admin, g, f.target) for g in names}
    now = time.time() * 1000
    return Facts(flow_name, f, engine, positions, acked, figures, heartbeat_age, commits, active, now)


def _topics(config: Config, facts: Facts) -> list[dict[str, Any]]:
    """The per-topic rows: summed true lag and records lost, the largest RPO (None when one is unknown)."""
    policy = policy_of(facts.flow)
    topics: dict[str, dict[str, Any]] = {}
    for (topic, partition), lag in facts.figures.true_lag.items():
        t = topics.setdefault(
            topic,
            {
                "topic": topic,
                "target_topic": policy.target_topic(topic),
                "true_lag": 0,
                "time_lag_s": 0.0,
                "records_lost": 0,
            },
        )
        t["true_lag"] += lag
        t["records_lost"] += facts.figures.lost.get((topic, partition), 0)
        rpo = facts.figures.rpo_s[(topic, partition)]
        # an RPO that could not be read makes the topic's unknown (None), never 0
        known = not np.isnan(rpo) and t["time_lag_s"] is not None
        t["time_lag_s"] = round(max(t["time_lag_s"], rpo), 1) if known else None
    return sorted(topics.values(), key=lambda t: t["topic"])


def _verdict(config: Config, facts: Facts, group: str) -> GroupVerdict:
    engine, true_lag = facts.engine, facts.figures.true_lag
    mine = TopicFilter.of(config, facts.flow)  # another flow of this pair shares the offset-syncs topic
    all_commits = facts.commits[group]
    acked = facts.acked
    # consumed on a mirrored topic of which the target has no offset sync: nothing to translate to (a commit at 0
    # consumed nothing, e.g. an empty partition)
    unsynced = tuple(
        (t, p, c) for (t, p), c in sorted(all_commits.items()) if c > 0 and (t, p) not in acked and mine.matches(t)
    )
    cps = engine.checkpoints.get(group, {})
    facts_of_partitions = []
    for key, commit in sorted((k, c) for k, c in all_commits.items() if k in true_lag):
        cp = cps.get(key)
        resumed = engine.resumed(group, key, commit, cp, facts.now_ms)
        facts_of_partitions.append(
            PartitionFacts(
                key[0],
                key[1],
                commit,
                cp.upstream_offset if cp else None,
                cp.downstream_offset if cp else None,
                resumed.duplicates,
                resumed.age_s,
                true_lag[key],
                resumed.approximate,
            )
        )
    discovery = engine.discovery
    return judge_group(
        group,
        facts_of_partitions,
        facts.active_on_target[group],
        engine.max_checkpoint_age_s,
        facts.heartbeat_age_s,
        config.canary.heartbeat_max_age_s,
        unsynced,
        commits_elsewhere=bool(all_commits),
        undiscovered=(
            discovery.reason(group, int(facts.now_ms))
            if discovery is not None and group not in discovery.found and not cps
            else None
        ),
    )


def judge(config: Config, facts: Facts) -> tuple[dict[str, Any], int]:
    """The report (the JSON answer) and the exit code, from the facts alone."""
    f, engine = facts.flow, facts.engine
    verdicts = [_verdict(config, facts, g) for g in facts.commits]
    last_sync = {k: sync[0] for k, sync in facts.positions.sync.items()}
    # of the groups with commits on mirrored partitions, as the monitor counts them: a group that committed
    # nothing there has nothing to translate (it counted as translated here: "2/2" for two groups without commits)
    committed_groups = {
        g: {k: c for k, c in commits.items() if k in facts.figures.true_lag} for g, commits in facts.commits.items()
    }
    coverage = translation_coverage(
        {g: c for g, c in committed_groups.items() if c},
        dict(engine.checkpoints),
        last_sync,
        int(facts.now_ms),
        engine.max_checkpoint_age_s,
        engine.redelivery,
        engine.discovery,
    )
    topics = _topics(config, facts)
    lost = sum(t["records_lost"] for t in topics)
    report = {
        "flow": facts.flow_name,
        "source": f.source,
        "target": f.target,
        "mirror": engine.name,
        "coverage": coverage,
        "heartbeat_age_s": None if facts.heartbeat_age_s is None else round(facts.heartbeat_age_s, 1),
        "canary": canary_status(config.canary.metrics_host, config.canary.metrics_port, facts.flow_name),
        "topics": topics,
        "groups": [
            {
                "group": v.group,
                "verdict": v.verdict,
                "reasons": v.reasons,
                "true_lag": v.lost,
                "lost": v.lost,  # the old name of true_lag, kept as a documented alias (docs/dr.md)
                "duplicates": v.duplicates,
                "partitions": v.partitions,
                "missing_checkpoints": v.missing_checkpoints,
                "oldest_checkpoint_s": None if v.oldest_checkpoint_s is None else round(v.oldest_checkpoint_s, 1),
            }
            for v in verdicts
        ],
        "records_lost": lost,
    }
    # records that never reached the target and are gone from the source: a failover cannot get them back, and
    # neither can waiting — at best DEGRADED
    code = max(overall_exit(verdicts), 1) if lost else overall_exit(verdicts)
    return report, code


def _check(config_path: str, flow: str | None, groups: tuple[str, ...], as_json: bool) -> int:
    config = load_config(config_path)
    flow_name, f = config.flow(flow)
    report, code = judge(config, fetch(config, flow_name, f, groups))
    if as_json:
        click.echo(json.dumps(report))
    else:
        print_human(report)
    return code
