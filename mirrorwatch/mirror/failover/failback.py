"""``mirror failback tail`` and ``mirror failback plan``: after an unplanned failover, save what the old source
holds that the new primary never received, then go home without throwing it away (docs/dr.md)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from ...core.cli import UserError
from ...core.config_loading import load_config
from ..options import config_option, flow_option
from .reach import require_reachable
from .reads import refusing
from .tail import Sink, Tail, find_tail, read_tail
from .tail_export import FileSink, TopicSink, manifest_path, write_manifest


def _when(ts_ms: int | None) -> str:
    if ts_ms is None:
        return "-"
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _sink(config: Any, tail: Tail, out: Path | None, to_topic: bool) -> Sink | None:
    if out is not None:
        return FileSink(out)
    if to_topic:
        behind = {p.topic for p in tail.partitions if p.start < p.end}
        counts: dict[str, int] = {}
        for p in tail.partitions:  # the quarantine topic gets the source topic's partitions, numbers kept
            if p.topic in behind:
                counts[p.topic] = max(counts.get(p.topic, 0), p.partition + 1)
        return TopicSink(config.clusters[tail.target], tail.target, tail.source, counts)
    return None


def _print_human(report: dict[str, Any]) -> None:
    bound = "exact" if report["exact"] else f"at least {report['records_lower_bound']}, at most {report['records']}"
    click.echo(
        f"tail of flow {report['flow']} ({report['source']} → {report['target']}, {report['engine']}): "
        f"{report['records']} records on {report['source']} that {report['target']} never received ({bound})"
    )
    if report["records"]:
        click.echo(f"  written from {_when(report['first_timestamp'])} to {_when(report['last_timestamp'])}")
    for p in report["partitions"]:
        click.echo(
            f"  {p['topic']}[{p['partition']}]: offsets {p['from_offset']}..{p['to_offset']}, {p['records']} records"
            + (f" (at least {p['records_lower_bound']})" if not report["exact"] else "")
            + f", {_when(p['first_timestamp'])} .. {_when(p['last_timestamp'])}"
            + (
                f"; {p['gone_before_mirrored']} removed by retention before mirrored"
                if p["gone_before_mirrored"]
                else ""
            )
        )
    for g in report["groups_read_into_tail"]:
        click.echo(
            f"  group {g['group']} had processed {g['records']} of them on {report['source']} "
            f"(never seen by {report['target']})"
        )
    saved = report.get("export")
    if saved is None:
        click.echo(
            "not exported: add --out FILE or --to-topic to save them" if report["records"] else "nothing to save"
        )
    else:
        where = saved.get("file") or ", ".join(saved["topics"].values()) + f" on {saved['cluster']}"
        click.echo(f"exported and verified ({report['records']} records): {where}; manifest {saved['manifest']}")


@click.group(help="Failback after an unplanned failover: save the old source's unmirrored tail; plan the way home.")
def failback() -> None:
    pass


@failback.command("tail", help="Find (and with --out or --to-topic, save) the records the target never received.")
@config_option
@flow_option
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="JSON lines file")
@click.option("--to-topic", is_flag=True, help="quarantine topics <source>.<topic>.unmirrored on the target")
@click.option("--manifest", type=click.Path(dir_okay=False, path_type=Path), default=None, help="with --to-topic")
@click.option("--json", "as_json", is_flag=True)
def tail_command(
    config_path: str, flow: str | None, out: Path | None, to_topic: bool, manifest: Path | None, as_json: bool
) -> None:
    if out is not None and to_topic:
        raise UserError("give --out FILE or --to-topic, not both", 2)
    if out is not None and (out.exists() or manifest_path(out).exists()):
        raise UserError(
            f"{out} (or its manifest) already exists: choose another path, an export is never overwritten", 2
        )
    config = load_config(config_path)
    flow_name, f = config.flow(flow)
    require_reachable(config.clusters[f.source], f.source)
    require_reachable(config.clusters[f.target], f.target)
    with refusing(f"report the tail of flow {flow_name}"):
        tail = find_tail(config, flow_name)
    with refusing(f"export the tail of flow {flow_name}"):
        destination = read_tail(config, tail, _sink(config, tail, out, to_topic))
    report = tail.report()
    if destination is not None:
        where = manifest_path(out) if out is not None else manifest or Path(f"tail-{flow_name}.manifest.json")
        destination["manifest"] = str(where.resolve())
        write_manifest(
            where, {**report, "export": destination, "verified": True, "written_ms": int(time.time() * 1000)}
        )
        report["export"] = destination
    click.echo(json.dumps(report)) if as_json else _print_human(report)


def _register_plan() -> None:
    from .failback_plan import plan

    failback.add_command(plan)


_register_plan()
