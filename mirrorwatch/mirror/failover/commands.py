"""``mirror failover translate`` and ``mirror failover reset-to-time``: where consumers resume on the target.

translate: a group's source offsets through the offset syncs (live, while the source answers) or, when the
source is gone — the real failover — from the latest checkpoints written to the target.
reset-to-time: the first target offset at or after a time, for every mirrored partition (the seeds'
time-based failover; re-delivers whatever arrived after that time).
Both only show a plan unless ``--apply``; applying refuses while the group is active on the target.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

import click
from confluent_kafka import TopicPartition
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ...core.cli import UserError
from ...core.clients import make_admin, make_consumer
from ...core.config import ClusterConfig, Config, FlowConfig
from ...core.config_loading import load_config
from ...core.naming import offset_syncs_topic
from ...core.records import Checkpoint
from ...core.topic_selection import TopicFilter, policy_of
from ..checkpoints import (
    all_checkpoints,
    apply_offsets,
    committed_offsets,
    read_offset_syncs,
    translate_group,
)
from ..options import config_option, flow_option
from .reach import reachable, require_reachable
from .reads import group_is_active, refusing


def latest_checkpoints(
    cluster: ClusterConfig, source: str, group: str, alias: str
) -> dict[tuple[str, int], Checkpoint]:
    """The newest checkpoint per partition for ``group`` from the checkpoints topic on the target."""
    return all_checkpoints(cluster, source, alias).get(group, {})


def translation_plan(config: Config, flow: FlowConfig, group: str) -> tuple[str, list[dict[str, Any]]]:
    """('live' | 'checkpoints', rows): where ``group`` would resume on the target."""
    target = config.clusters[flow.target]
    require_reachable(target, flow.target)
    policy = policy_of(flow)
    if reachable(config.clusters[flow.source], flow.source):
        store = read_offset_syncs(target, offset_syncs_topic(flow.source), flow.target)
        mirrored = {t for t, _ in store.partitions() if TopicFilter.of(config, flow).matches(t)}
        committed = {
            k: v
            for k, v in committed_offsets(
                make_admin(config.clusters[flow.source], "mirrorwatch-failover"), group
            ).items()
            if k[0] in mirrored
        }
        rows: list[dict[str, Any]] = [
            {
                "topic": t.topic,
                "target_topic": policy.target_topic(t.topic),
                "partition": t.partition,
                "source_offset": t.upstream_committed,
                "target_offset": t.downstream_offset,
                "max_duplicates": t.duplicates,
                "checkpoint_age_s": None,
            }
            for t in translate_group(store, committed)
        ]
        return "live", rows
    now = time.time() * 1000
    rows = [
        {
            "topic": cp.topic,
            "target_topic": policy.target_topic(cp.topic),
            "partition": cp.partition,
            "source_offset": cp.upstream_offset,
            "target_offset": cp.downstream_offset,
            "max_duplicates": cp.max_duplicates,
            "checkpoint_age_s": round((now - cp.ts_ms) / 1000, 1),
        }
        for cp in sorted(
            latest_checkpoints(target, flow.source, group, flow.target).values(), key=lambda c: (c.topic, c.partition)
        )
    ]
    return "checkpoints", rows


def _apply(config: Config, flow: FlowConfig, group: str, rows: list[dict[str, Any]], field: str) -> int:
    admin = make_admin(config.clusters[flow.target], "mirrorwatch-failover")
    with refusing(f"apply offsets for group '{group}'"):
        active = group_is_active(admin, group, flow.target)
    if active:
        raise UserError(
            f"group '{group}' is active on '{flow.target}': stop its consumers there before applying offsets", 2
        )
    return apply_offsets(
        admin, group, {(r["target_topic"], r["partition"]): r[field] for r in rows}, forward_only=False
    )


def _print_rows(title: str, rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> None:
    table = Table(title=title)
    for _, header in columns:
        table.add_column(header, justify="right" if header not in ("topic", "target topic") else "left")
    for row in rows:
        table.add_row(*["-" if row[key] is None else str(row[key]) for key, _ in columns])
    Console().print(table)


@click.group(help="Failover tools: translate group offsets, reset to a time.")
def failover() -> None:
    pass


@failover.command(help="Show (and with --apply, commit on the target) a group's translated offsets.")
@config_option
@flow_option
@click.option("--group", required=True)
@click.option("--apply", "do_apply", is_flag=True, help="commit the translated offsets for the group on the target")
@click.option("--json", "as_json", is_flag=True)
def translate(config_path: str, flow: str | None, group: str, do_apply: bool, as_json: bool) -> None:
    config = load_config(config_path)
    flow_name, flow_cfg = config.flow(flow)
    with refusing(f"translate group '{group}'"):
        mode, rows = translation_plan(config, flow_cfg, group)
    if not rows:
        raise UserError(
            f"no translation for group '{group}' on flow {flow_name}: it has no committed offsets on mirrored "
            f"topics{' (source unreachable and no checkpoints)' if mode == 'checkpoints' else ''}",
            2,
        )
    applied = _apply(config, flow_cfg, group, rows, "target_offset") if do_apply else 0
    if as_json:
        click.echo(
            json.dumps({"flow": flow_name, "group": group, "mode": mode, "applied": applied, "partitions": rows})
        )
        return
    _print_rows(
        f"{group}: {flow_cfg.source} → {flow_cfg.target} ({mode})",
        rows,
        [
            ("topic", "topic"),
            ("partition", "partition"),
            ("source_offset", "source offset"),
            ("target_topic", "target topic"),
            ("target_offset", "target offset"),
            ("max_duplicates", "re-delivered ≤"),
            ("checkpoint_age_s", "checkpoint age s"),
        ],
    )
    click.echo(
        f"applied {applied} offsets on {flow_cfg.target}"
        if do_apply
        else "plan only: add --apply to commit these on the target"
    )


def parse_time(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"--time {text!r} is not an ISO 8601 time (e.g. 2026-11-23T10:15:00Z)", 2) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # documented: a time without an offset is UTC
    return int(moment.timestamp() * 1000)


@failover.command("reset-to-time", help="Plan (and with --apply, commit) the first target offsets at/after a time.")
@config_option
@flow_option
@click.option("--group", required=True)
@click.option("--time", "when", required=True, help="ISO 8601; without an offset it is UTC")
@click.option("--apply", "do_apply", is_flag=True)
@click.option("--force", is_flag=True, help="accept a time in the future (every partition moves to its end)")
@click.option("--json", "as_json", is_flag=True)
def reset_to_time(
    config_path: str, flow: str | None, group: str, when: str, do_apply: bool, force: bool, as_json: bool
) -> None:
    config = load_config(config_path)
    flow_name, flow_cfg = config.flow(flow)
    ts_ms = parse_time(when)
    ahead_s = ts_ms / 1000 - time.time()
    if ahead_s > 0 and not force:
        raise UserError(
            f"--time {when} is {ahead_s:.0f} s in the future: every partition would move to its end, skipping "
            "everything not yet consumed; check the time (no offset means UTC) or add --force",
            2,
        )
    target = config.clusters[flow_cfg.target]
    require_reachable(target, flow_cfg.target)
    policy = policy_of(flow_cfg)
    mine = TopicFilter.of(config, flow_cfg)  # another flow of this pair shares the offset-syncs topic
    with refusing(f"reset group '{group}'"):
        synced = read_offset_syncs(target, offset_syncs_topic(flow_cfg.source), flow_cfg.target).partitions()
    partitions = [(t, p) for t, p in synced if mine.matches(t)]
    if not partitions:
        raise UserError(f"no mirrored partitions known for flow {flow_name} (no offset syncs on {flow_cfg.target})", 2)
    consumer = make_consumer(target, "mirrorwatch-failover")
    rows: list[dict[str, Any]] = []
    try:
        with Progress(disable=as_json or len(partitions) < 50, transient=True) as progress:
            task = progress.add_task("looking up offsets", total=len(partitions))
            for start in range(0, len(partitions), 500):
                chunk = partitions[start : start + 500]
                query = [TopicPartition(policy.target_topic(t), p, ts_ms) for t, p in chunk]
                for (topic, partition), found in zip(chunk, consumer.offsets_for_times(query, timeout=30)):
                    if found.error is not None:  # not "nothing after that time": resuming at the end would skip
                        raise UserError(
                            f"refusing to reset group '{group}': cannot read the offset at {when} of "
                            f"{found.topic}[{partition}] on '{flow_cfg.target}': {found.error.name()}",
                            3,
                        )
                    offset = found.offset
                    if offset < 0:  # nothing at or after that time yet: resume at the end
                        offset = consumer.get_watermark_offsets(TopicPartition(found.topic, partition), timeout=10)[1]
                    rows.append(
                        {"topic": topic, "target_topic": found.topic, "partition": partition, "target_offset": offset}
                    )
                progress.advance(task, len(chunk))
    finally:
        consumer.close()
    applied = _apply(config, flow_cfg, group, rows, "target_offset") if do_apply else 0
    if as_json:
        click.echo(
            json.dumps({"flow": flow_name, "group": group, "time_ms": ts_ms, "applied": applied, "partitions": rows})
        )
        return
    _print_rows(
        f"{group}: first offsets at/after {when} on {flow_cfg.target}",
        rows,
        [("target_topic", "target topic"), ("partition", "partition"), ("target_offset", "target offset")],
    )
    click.echo(
        f"applied {applied} offsets on {flow_cfg.target}"
        if do_apply
        else "plan only: add --apply to commit these on the target"
    )


def _register_check() -> None:
    from .check import check
    from .drill import drill
    from .switchover import switchover

    failover.add_command(check)
    failover.add_command(drill)
    failover.add_command(switchover)


_register_check()
