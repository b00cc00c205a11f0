"""``mirror failback plan``: the ordered way home after an unplanned failover, and the files it needs.

Refused (exit 1) until the tail is saved: the plan needs the manifest ``mirror failback tail`` wrote, verified,
for this flow, and the old source must still end where that manifest says (a record written there since would
be wiped unsaved). It wipes nothing itself: it writes the ``kafka-delete-records.sh`` offsets file for the old
source's topics, and the reverse flow's config, and says the order to use them in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import yaml

from ...core.cli import UserError
from ...core.config import Config
from ...core.config_loading import load_config
from ..options import config_option, flow_option
from .reach import require_reachable
from .reads import refusing
from .switchover import reverse_config
from .tail import find_tail
from .tail_export import read_manifest

EXIT_REFUSED = 1  # the tail is not saved (or not all of it): nothing may be wiped yet


def _read_saved(flow_name: str, manifest_file: Path | None) -> dict[str, Any]:
    """The export's manifest, verified and of this flow (read before any cluster is asked)."""
    if manifest_file is None or not manifest_file.exists():
        raise UserError(
            f"refusing to plan a wipe of flow {flow_name}'s old source: the tail is not exported "
            "(run `mirror failback tail --out FILE` or `--to-topic`, then give its manifest with --tail-manifest)",
            EXIT_REFUSED,
        )
    try:
        manifest = read_manifest(manifest_file)
    except (ValueError, OSError) as exc:
        raise UserError(f"refusing to plan a wipe: {manifest_file}: {exc}", EXIT_REFUSED) from None
    if manifest.get("flow") != flow_name:
        raise UserError(f"refusing to plan a wipe: {manifest_file} is the tail of flow {manifest.get('flow')}", 1)
    return manifest


def _still_saved(config: Config, flow_name: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest, with the old source's ends now, if the export still covers every record there."""
    with refusing(f"plan a wipe of flow {flow_name}'s old source"):
        now = find_tail(config, flow_name)
    saved = {(p["topic"], p["partition"]): p["to_offset"] + 1 for p in manifest["partitions"]}
    grown = [
        f"{p.topic}[{p.partition}] ends at {p.end}, the export at {saved.get((p.topic, p.partition), p.start)}"
        for p in now.partitions
        if p.end > saved.get((p.topic, p.partition), p.start)
    ]
    if grown:
        raise UserError(
            f"refusing to plan a wipe: the old source holds records the export does not ({'; '.join(grown[:3])}): "
            "export the tail again",
            EXIT_REFUSED,
        )
    manifest["ends"] = {f"{p.topic}:{p.partition}": p.end for p in now.partitions}
    return manifest


def plan_steps(config_path: str, flow_name: str, source: str, target: str, files: dict[str, str]) -> list[str]:
    home = f"{target}-{source}"
    return [
        f"keep every client off '{source}' (its data is stale; the tail is saved: {files['tail']})",
        f"wipe the flow's records on '{source}': kafka-delete-records.sh --bootstrap-server <{source}> "
        f"--offset-json-file {files['wipe']}",
        f"start the reverse flow {home}: mirror run --config {files['reverse']} --flow {home}",
        f"wait for true lag 0: monitor lag --config {files['reverse']} --flow {home}",
        f"switch back in a quiet window: mirror failover switchover --config {files['reverse']} --flow {home} "
        "--group G ... (the groups to bring home)",
        f"decide with the application owners what to replay from the saved tail ({files['tail']}): those records "
        f"were never on '{target}'",
    ]


@click.command("plan", help="The ordered steps and configs to return home; refuses until the tail is exported.")
@config_option
@flow_option
@click.option("--tail-manifest", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."), show_default=True)
@click.option("--json", "as_json", is_flag=True)
def plan(config_path: str, flow: str | None, tail_manifest: Path | None, out_dir: Path, as_json: bool) -> None:
    config = load_config(config_path)
    flow_name, f = config.flow(flow)
    saved = _read_saved(flow_name, tail_manifest)
    require_reachable(config.clusters[f.source], f.source)
    manifest = _still_saved(config, flow_name, saved)
    out_dir.mkdir(parents=True, exist_ok=True)
    reverse, wipe = out_dir / f"reverse-{flow_name}.yaml", out_dir / f"wipe-{f.source}-{flow_name}.json"
    reverse.write_text(yaml.safe_dump(reverse_config(config_path, flow_name), sort_keys=False))
    offsets = [
        {"topic": k.rsplit(":", 1)[0], "partition": int(k.rsplit(":", 1)[1]), "offset": end}
        for k, end in sorted(manifest["ends"].items())
        if end > 0
    ]
    wipe.write_text(json.dumps({"partitions": offsets, "version": 1}, indent=2) + "\n")
    export = manifest["export"]
    tail = export.get("file") or ", ".join(export.get("topics", {}).values())
    files = {"tail": tail, "wipe": str(wipe.resolve()), "reverse": str(reverse.resolve())}
    steps = plan_steps(config_path, flow_name, f.source, f.target, files)
    if as_json:
        click.echo(json.dumps({"flow": flow_name, "tail_records": manifest["records"], "files": files, "steps": steps}))
        return
    click.echo(f"failback of flow {flow_name} ({manifest['records']} tail records saved):")
    for number, step in enumerate(steps, 1):
        click.echo(f"{number}. {step}")
