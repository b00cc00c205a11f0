"""``mirror failover check``: a read-only go/no-go report for failing consumer groups over to the target."""

from __future__ import annotations

import json
import time
import urllib.request

import click
from confluent_kafka import KafkaException, TopicPartition
from rich.console import Console
from rich.table import Table

from ...core.canary_metrics import parse_canary_metrics
from ...core.cli import UserError
from ...core.clients import make_admin, make_consumer
from ...core.config import ConfigError
from ...core.config_loading import load_config
from ...core.delivery import transactional_target
from ...core.lag import mirror_lags, records_lost
from ...core.mm2 import is_mm2
from ...core.naming import mirror_group
from ...core.oneshot import require_clusters, timeout_option, within
from ...core.topic_selection import TopicFilter, policy_of
from ...core.translation import GroupDiscovery, checkpoint_redelivery, translation_coverage
from ..checkpoints import all_checkpoints, committed_offsets, source_groups
from ..mm2_records import read_mm2_state
from ..topology import latest_heartbeats
from .acked import read_positions
from .reach import require_reachable
from .readiness import PartitionFacts, judge_group, overall_exit
from .reads import EXIT_CANNOT_TELL, CannotTell, group_is_active, partitions_of, reason


def source_positions(cluster, alias: str, partitions, acked: dict) -> tuple[dict, dict, dict]:
    """(true_lag per partition, age in seconds of the oldest record not on the target per partition (None: it
    could not be read), records lost per partition: removed from the source — retention, DeleteRecords, a
    recreated topic — before the mirror read them, i.e. source log start − mirror position where the log start
    is past it).

    Only partitions that exist on the source now count: the compacted offset-syncs topic remembers topics
    deleted long ago. A partition the source does not list is asked for by its topic, and left out only when the
    broker says the topic does not exist; a partition whose end offset cannot be read raises CannotTell (fail
    closed: left out, its lag would read as 0).
    """
    consumer = make_consumer(cluster, "mirrorwatch-failover-check")
    true_lag, age, lost = {}, {}, {}
    try:
        existing = {(t, p) for t, md in consumer.list_topics(timeout=10).topics.items() for p in md.partitions}
        for topic in sorted({t for t, p in partitions if (t, p) not in existing}):
            # a topic the principal may not describe is left out of a full listing: ask for it by name
            existing |= {(topic, p) for p in partitions_of(consumer, topic, alias, 10) or []}
        for topic, partition in partitions:
            if (topic, partition) not in existing:
                continue
            start, end = _watermarks(consumer, topic, partition, alias)
            # the monitor's figure (core.lag.mirror_lags): no arithmetic of the check's own
            lags = mirror_lags([end], [-1], [acked[(topic, partition)]], [-1])
            true_lag[(topic, partition)] = int(lags.true_lag[0])
            # the monitor's rule (core.lag.records_lost), from what the target surely has
            gone = int(records_lost([start], [acked[(topic, partition)]])[0])
            if gone > 0:
                lost[(topic, partition)] = gone
        behind = [TopicPartition(t, p, acked[(t, p)]) for (t, p), lag in true_lag.items() if lag > 0]
        for tp in behind:  # exact time lag: read the oldest record the target does not have
            consumer.assign([tp])
            msg = consumer.poll(5)
            ok = msg is not None and not msg.error()
            age[(tp.topic, tp.partition)] = max(0.0, time.time() - msg.timestamp()[1] / 1000) if ok else None
    finally:
        consumer.close()
    return true_lag, age, lost


def _watermarks(consumer, topic: str, partition: int, alias: str) -> tuple[int, int]:
    for attempt in range(5):  # a leader moving or metadata not yet fetched: brief retries
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
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
def check(config_path, flow, groups, as_json, timeout_s):
    try:
        config = load_config(config_path)
        _, f = config.flow(flow)
        require_clusters(
            [(f.source, config.clusters[f.source]), (f.target, config.clusters[f.target])],
            timeout_s,
            {f.source: "source", f.target: "target"},
        )
        return within(timeout_s, lambda: _check(config_path, flow, groups, as_json), "failover check")
    except (UserError, ConfigError):
        raise
    except CannotTell as exc:  # fail closed: no verdict from what could not be read
        raise UserError(f"cannot judge failover readiness: {exc}", EXIT_CANNOT_TELL) from None
    except Exception as exc:  # exit 1 means DEGRADED here: anything unexpected is UNKNOWN (3), in one line
        raise UserError(f"cannot judge failover readiness: {type(exc).__name__}: {exc}", 3) from None


def _check(config_path, flow, groups, as_json):
    config = load_config(config_path)
    flow_name, f = config.flow(flow)
    source, target = config.clusters[f.source], config.clusters[f.target]
    require_reachable(source, f.source)
    require_reachable(target, f.target)
    policy = policy_of(f)
    source_admin, target_admin = (
        make_admin(source, "mirrorwatch-failover-check"),
        make_admin(target, "mirrorwatch-failover-check"),
    )
    mm2 = read_mm2_state(config, f) if is_mm2(f) else None
    mine = TopicFilter.of(config, f)  # another flow of this pair shares the offset-syncs topic
    # the monitor's estimator (core.lag) over what the target proves, for either engine
    positions = read_positions(config, flow_name, f, mm2)
    acked = positions.acked_next()
    own_group = None if mm2 is not None else mirror_group(f.source, f.target, f.group, flow_name)
    true_lag, age, lost = source_positions(source, f.source, sorted(acked), acked)
    topics = {}
    for (topic, partition), lag in true_lag.items():
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
        t["records_lost"] += lost.get((topic, partition), 0)
        seen = age.get((topic, partition), 0.0)
        # an age that could not be read makes the topic's RPO unknown (None), never 0
        t["time_lag_s"] = None if seen is None or t["time_lag_s"] is None else round(max(t["time_lag_s"], seen), 1)
    if mm2 is not None:
        heartbeat_age = mm2.heartbeat_age_s()
        checkpoints = mm2.checkpoints
        max_age = max(3 * f.mirror.emit_checkpoints_interval_s, 30.0)
    else:
        beats = latest_heartbeats(target, config.mirror.heartbeats_topic)
        beat = beats.get((f.source, f.target))
        heartbeat_age = None if beat is None else max(0.0, time.time() - beat[0] / 1000)
        checkpoints = all_checkpoints(target, f.source, f.target)
        max_age = max(3 * config.mirror.checkpoint_interval_s, 30.0)
    names = list(groups) or source_groups(source_admin, f, {own_group} if own_group else set())
    verdicts, now = [], time.time() * 1000
    # MM2 finds new groups only every refresh.groups.interval.seconds: a group it has not found yet is said so
    discovery = (
        GroupDiscovery(frozenset(mm2.assigned_groups), f.mirror.refresh_groups_interval_s)
        if mm2 is not None and mm2.assigned_groups is not None
        else None
    )
    commits_by_group, redelivery = {}, {}
    for group in names:
        all_commits = committed_offsets(source_admin, group)
        committed = {k: v for k, v in all_commits.items() if k in true_lag}
        commits_by_group[group] = committed
        # consumed on a mirrored topic of which the target has no offset sync: nothing to translate to (a commit
        # at 0 consumed nothing, e.g. an empty partition)
        unsynced = tuple(
            (t, p, c) for (t, p), c in sorted(all_commits.items()) if c > 0 and (t, p) not in acked and mine.matches(t)
        )
        cps = checkpoints.get(group, {})
        facts = []
        for (t, p), c in sorted(committed.items()):
            cp = cps.get((t, p))
            duplicates = cp.max_duplicates if cp is not None else None
            approximate = None
            if cp is not None and mm2 is not None:
                # MM2 translates to the newest sync it kept (+1): the re-delivery that adds, from the sync history
                duplicates = checkpoint_redelivery(
                    mm2.syncs.get((t, p), []), cp.upstream_offset, cp.downstream_offset, transactional_target(config, f)
                )
                redelivery[(group, t, p)] = duplicates
                last = mm2.latest_sync.get((t, p))
                if last is not None and c > last[0] + 1:
                    approximate = (
                        f"{t}[{p}]: commit {c} is beyond MM2's last offset sync ({last[0]}): translated approximately"
                    )
                elif duplicates:
                    approximate = (
                        f"{t}[{p}]: MM2 translated the checkpoint through an older offset sync: "
                        f"approximate, {duplicates} records re-delivered"
                    )
            cp_age = (now - cp.ts_ms) / 1000 if cp else None
            if mm2 is not None and cp is not None and cp.upstream_offset == c:
                cp_age = (
                    None  # MM2 writes a checkpoint only when the group's offset moves: one at the commit is current
                )
            facts.append(
                PartitionFacts(
                    t,
                    p,
                    c,
                    cp.upstream_offset if cp else None,
                    cp.downstream_offset if cp else None,
                    duplicates,
                    cp_age,
                    true_lag[(t, p)],
                    approximate,
                )
            )
        verdicts.append(
            judge_group(
                group,
                facts,
                group_is_active(target_admin, group, f.target),
                max_age,
                heartbeat_age,
                config.canary.heartbeat_max_age_s,
                unsynced,
                commits_elsewhere=bool(all_commits),
                undiscovered=(
                    discovery.reason(group, int(now))
                    if discovery is not None and group not in discovery.found and not cps
                    else None
                ),
            )
        )
    last_sync = {k: sync[0] for k, sync in positions.sync.items()}
    # of the groups with commits on mirrored partitions, as the monitor counts them: a group that committed
    # nothing there has nothing to translate (it counted as translated here: "2/2" for two groups without commits)
    committed_groups = {g: c for g, c in commits_by_group.items() if c}
    coverage = translation_coverage(committed_groups, checkpoints, last_sync, int(now), max_age, redelivery, discovery)
    report = {
        "flow": flow_name,
        "source": f.source,
        "target": f.target,
        "mirror": "mm2" if mm2 is not None else "mirrorwatch",
        "coverage": coverage,
        "heartbeat_age_s": None if heartbeat_age is None else round(heartbeat_age, 1),
        "canary": canary_status(config.canary.metrics_host, config.canary.metrics_port, flow_name),
        "topics": sorted(topics.values(), key=lambda t: t["topic"]),
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
    }
    code = overall_exit(verdicts)
    records_lost = sum(t["records_lost"] for t in report["topics"])
    report["records_lost"] = records_lost
    if records_lost:
        # records that never reached the target and are gone from the source: a failover cannot get them
        # back, and neither can waiting — at best DEGRADED
        code = max(code, 1)
    if as_json:
        click.echo(json.dumps(report))
        return code
    console = Console()
    console.print(
        f"failover {f.source} → {f.target} (flow {flow_name}): heartbeat "
        f"{'none' if heartbeat_age is None else f'{heartbeat_age:.1f} s ago'}, canary {report['canary']}"
    )
    topic_table = Table(title="if the source vanished now")
    # one name per figure, as in the JSON: true lag (what a failover now would leave behind), RPO seconds, and
    # records lost (removed from the source before they were mirrored: gone whatever anyone does)
    for h in ("topic", "target topic", "true lag", "RPO s", "records lost"):
        topic_table.add_column(h)
    for t in report["topics"]:
        topic_table.add_row(
            t["topic"],
            t["target_topic"],
            str(t["true_lag"]),
            "?" if t["time_lag_s"] is None else f"{t['time_lag_s']:.1f}",
            str(t["records_lost"]),
        )
    console.print(topic_table)
    if records_lost:
        console.print(
            f"{records_lost} record(s) were removed from the source before they were mirrored "
            "(retention, DeleteRecords or a recreated topic): they are on neither cluster"
        )
    group_table = Table(title="consumer groups")
    for h in ("group", "verdict", "true lag", "re-delivered", "checkpoints", "why"):
        group_table.add_column(h)
    for g in report["groups"]:
        group_table.add_row(
            g["group"],
            g["verdict"],
            str(g["true_lag"]),
            str(g["duplicates"]),
            f"{g['partitions'] - g['missing_checkpoints']}/{g['partitions']}",
            "; ".join(g["reasons"]) or "-",
        )
    console.print(group_table)
    if not report["groups"]:
        console.print("no consumer groups to judge (none given, none match checkpoint_groups)")
    else:
        console.print(
            f"translation coverage: {coverage['translated']}/{coverage['groups']} groups have a usable checkpoint"
            + "".join(f"\n  {u['group']}: {u['reason']}" for u in coverage["untranslated"])
            + "".join(f"\n  {u['group']} (approximate): {u['reason']}" for u in coverage["approximate"])
        )
    return code
