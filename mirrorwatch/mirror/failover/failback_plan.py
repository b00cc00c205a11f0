"""``mirror failback plan``: the ordered way home after an unplanned failover, and the files it needs.

Refused (exit 1) until the tail is saved: the plan needs the manifest ``mirror failback tail`` wrote, verified,
for this flow, and the old source must still end where that manifest says (a record written there since would
be wiped unsaved). It writes the ``kafka-delete-records.sh`` offsets file for the old source's topics, and the
reverse flow's config, and says the order to use them in. With ``--wipe`` it also deletes those records itself,
after the same guard, to the ends the guard has just read (never further: a record written since stays).

The reverse flow copies every record of the flow the new primary holds, the copies of the old primary's records
included: the wipe has just deleted them at home. So its naming is the forward flow's mirror image: a prefix
forward flow (``east.orders`` on west) comes back under the identity policy, its selection widened to the
prefixed names (``east.orders`` home as ``east.orders``, west's own ``orders`` into the wiped ``orders``); an
identity forward flow comes back under the prefix policy (``west.orders``), because identity's loop guard would
skip every record whose provenance header names the old primary, exactly the ones the wipe deleted there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import yaml
from confluent_kafka import TopicPartition

from ...core.cli import UserError
from ...core.clients import make_admin
from ...core.config import Config, FlowConfig
from ...core.config_loading import load_config
from ...core.mm2 import flow_policy
from ..options import config_option, flow_option
from .reach import require_reachable
from .reads import EXIT_CANNOT_TELL, reason, refusing
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


def failback_reverse_config(config_path: str, flow_name: str) -> dict[str, Any]:
    """The reverse flow's config for a failback after the wipe: new primary → old, copying every record of the
    flow the new primary holds (the module's docstring says why the policy flips). Run by our engine: an MM2
    forward flow's ``mirror`` section is left out."""
    raw = reverse_config(config_path, flow_name)
    # the flow as written (environment references unresolved: the generated file keeps them)
    forward = FlowConfig.model_validate(yaml.safe_load(Path(config_path).read_text())["flows"][flow_name])
    (body,) = raw["flows"].values()
    body.pop("mirror", None)
    policy = flow_policy(forward)  # MirrorMaker 2's own aliases and separator name its copies
    if policy.kind == "identity":
        body["policy"] = "prefix"
        return raw
    prefix = re.escape(policy.target_topic(""))
    body["policy"] = "identity"
    body["topics"] = [*forward.topics, *(f"{prefix}(?:{p})" for p in forward.topics)]
    if forward.exclude:
        body["exclude"] = [*forward.exclude, *(f"{prefix}(?:{p})" for p in forward.exclude)]
    return raw


def wipe(config: Config, flow_name: str, source: str, offsets: list[dict[str, Any]]) -> None:
    """Delete the old source's records of the flow below ``offsets`` (the ends the guard read): the wipe. Every
    partition must answer; one that does not is named and the command refuses (exit 3): what was deleted stays
    deleted, and running it again finishes the rest."""
    admin = make_admin(config.clusters[source], "mirrorwatch-failback")
    wanted = [TopicPartition(o["topic"], o["partition"], o["offset"]) for o in offsets]
    if not wanted:
        return
    failed = []
    for tp, future in admin.delete_records(wanted, request_timeout=30).items():
        try:
            future.result(60)
        except Exception as exc:  # any failure is named in the refusal: nothing is taken as wiped
            failed.append(f"{tp.topic}[{tp.partition}]: {reason(exc, 60)}")
    if failed:
        raise UserError(
            f"refusing to call flow {flow_name}'s old source '{source}' wiped: could not delete the records of "
            f"{'; '.join(failed[:3])}",
            EXIT_CANNOT_TELL,
        )


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
@click.option("--wipe", "do_wipe", is_flag=True, help="also wipe the old source's records (step 2), after the guard")
@click.option("--json", "as_json", is_flag=True)
def plan(
    config_path: str, flow: str | None, tail_manifest: Path | None, out_dir: Path, do_wipe: bool, as_json: bool
) -> None:
    config = load_config(config_path)
    flow_name, f = config.flow(flow)
    saved = _read_saved(flow_name, tail_manifest)
    require_reachable(config.clusters[f.source], f.source)
    manifest = _still_saved(config, flow_name, saved)
    out_dir.mkdir(parents=True, exist_ok=True)
    reverse, wipe_file = out_dir / f"reverse-{flow_name}.yaml", out_dir / f"wipe-{f.source}-{flow_name}.json"
    reverse.write_text(yaml.safe_dump(failback_reverse_config(config_path, flow_name), sort_keys=False))
    offsets = [
        {"topic": k.rsplit(":", 1)[0], "partition": int(k.rsplit(":", 1)[1]), "offset": end}
        for k, end in sorted(manifest["ends"].items())
        if end > 0
    ]
    wipe_file.write_text(json.dumps({"partitions": offsets, "version": 1}, indent=2) + "\n")
    export = manifest["export"]
    tail = export.get("file") or ", ".join(export.get("topics", {}).values())
    files = {"tail": tail, "wipe": str(wipe_file.resolve()), "reverse": str(reverse.resolve())}
    steps = plan_steps(config_path, flow_name, f.source, f.target, files)
    if do_wipe:
        wipe(config, flow_name, f.source, offsets)
        steps[1] = f"done: the flow's records on '{f.source}' wiped ({len(offsets)} partitions, to {wipe_file})"
    if as_json:
        body = {"flow": flow_name, "tail_records": manifest["records"], "files": files, "steps": steps}
        click.echo(json.dumps({**body, "wiped": offsets if do_wipe else None}))
        return
    click.echo(f"failback of flow {flow_name} ({manifest['records']} tail records saved):")
    for number, step in enumerate(steps, 1):
        click.echo(f"{number}. {step}")
