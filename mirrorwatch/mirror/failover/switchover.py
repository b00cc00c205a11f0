"""``mirror failover switchover``: a planned move of a flow's consumer groups to the target, gate by gate.

Steps (``switchover_steps``): 1 the flow is healthy; 2 writes have stopped (quiet window, no open transaction);
3 true lag 0 on every partition, proved; 4 every group translated and applied on the target (refused while
active there or on the source); 5 every group's target position read back against the translation; 6 the
report, and the reverse flow's config written ready to start. The state is a JSON file, saved after every step
(and after every group in step 4): ``--resume`` continues a switchover that stopped or crashed, re-checking the
gates 1–3 (time has passed) unless every group is applied already, and never translating a group twice.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import yaml

from ...core.cli import UserError
from ...core.config_loading import load_config
from ...core.redact import is_secret_key
from ..options import config_option, flow_option
from .reach import require_reachable
from .reads import refusing
from .switchover_steps import (
    Blocked,
    Plan,
    apply_one,
    step_caught_up,
    step_healthy,
    step_quiet,
    translate_one,
    verify_one,
)

FORMAT = "mirrorwatch-switchover/1"
STEPS = ("healthy", "quiet", "caught_up", "applied", "verified", "reported")
EXIT_BLOCKED = 1  # a gate was not met within --wait: nothing after it was done


def _save(path: Path, state: dict[str, Any]) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    partial.replace(path)  # a crash leaves the old state or the new one, never half of one


def _load_state(path: Path, flow_name: str, groups: tuple[str, ...], resume: bool) -> dict[str, Any]:
    if not resume:
        if path.exists():
            raise UserError(
                f"a switchover of flow {flow_name} is under way or done (state {path}): add --resume to continue "
                "it, or remove the file to start again",
                2,
            )
        return {"format": FORMAT, "flow": flow_name, "groups": list(groups), "done": {}, "translated": {}}
    if not path.exists():
        raise UserError(f"--resume: no switchover state at {path}; run without --resume to start one", 2)
    state: dict[str, Any] = json.loads(path.read_text())
    if state.get("format") != FORMAT or state.get("flow") != flow_name:
        raise UserError(f"--resume: {path} is not the state of a switchover of flow {flow_name}", 2)
    if groups and sorted(groups) != sorted(state["groups"]):
        raise UserError(f"--resume: the switchover in {path} moves groups {', '.join(state['groups'])}, not these", 2)
    return state


def reverse_config(config_path: str, flow_name: str) -> dict[str, Any]:
    """The config with only the reverse flow (target → source, same topic selection). A secret written literally
    in the config becomes an environment reference: generated config never holds a secret."""
    raw = yaml.safe_load(Path(config_path).read_text())
    forward = dict(raw["flows"][flow_name] or {})
    source, target = forward["source"], forward["target"]
    body = {k: v for k, v in forward.items() if k not in ("group", "source", "target")}
    for alias, cluster in (raw.get("clusters") or {}).items():
        for key, value in list((cluster or {}).items()):
            if is_secret_key(key) and not re.fullmatch(r"\$\{[^}]+\}", str(value)):
                name = re.sub(r"[^A-Z0-9]+", "_", f"{alias}_{key}".upper())
                cluster[key] = f"${{{name}}}"
    raw["flows"] = {f"{target}-{source}": {"source": target, "target": source, **body}}
    return dict(raw)


def _run(
    plan: Plan, state: dict[str, Any], path: Path, stop_after: str | None, reverse_path: Path, config_path: str
) -> None:
    done, translated = state["done"], state["translated"]
    state.pop("blocked", None)

    def finish(name: str, figures: dict[str, Any]) -> None:
        done[name] = figures
        _save(path, state)
        if stop_after == name:
            raise _Stopped(name)

    all_applied = "applied" in done
    gates = (
        (1, "healthy", "the flow is healthy", step_healthy),
        (2, "quiet", "writes have stopped", step_quiet),
        (3, "caught_up", "true lag 0 on every partition, proved", step_caught_up),
    )
    for number, name, title, step in gates:
        if all_applied:
            continue  # the groups have moved: the gates were met then, and are history now
        plan.say(f"{number}. {title}")
        finish(name, step(plan))
    if not all_applied:
        plan.say("4. every group translated and applied on the target (refused while active)")
        applied = done.get("applied_groups", {})
        for group in plan.groups:
            if group not in translated:
                translated[group] = translate_one(plan, group)
                _save(path, state)
            if group not in applied:
                applied[group] = apply_one(plan, group, translated[group])
                done["applied_groups"] = applied
                _save(path, state)
            plan.say(f"   {group}: {len(translated[group])} partitions applied")
        finish("applied", {"groups": len(plan.groups)})
    plan.say("5. every group's position on the target read back against its translation")
    finish("verified", {"groups": [verify_one(plan, g, translated[g]) for g in plan.groups]})
    plan.say(f"6. report; the reverse flow's config written to {reverse_path}")
    reverse_path.write_text(yaml.safe_dump(reverse_config(config_path, plan.flow_name), sort_keys=False))
    finish("reported", {"reverse_config": str(reverse_path.resolve())})


class _Stopped(Exception):
    """The test hook ``--stop-after``: leave as a crash after that step would (its state saved)."""


def report(state: dict[str, Any]) -> dict[str, Any]:
    done = state["done"]
    return {
        "flow": state["flow"],
        "switched": "reported" in done,
        "steps_done": [s for s in STEPS if s in done],
        "heartbeat_age_s": done.get("healthy", {}).get("heartbeat_age_s"),
        "partitions": done.get("caught_up", {}).get("partitions", []),
        "groups": [{"group": g, "partitions": rows} for g, rows in sorted(state["translated"].items())],
        "reverse_config": done.get("reported", {}).get("reverse_config"),
    }


def _print_human(result: dict[str, Any]) -> None:
    lagging = [p for p in result["partitions"] if p["true_lag"]]
    click.echo(f"partitions: {len(result['partitions'])}, true lag 0 on {len(result['partitions']) - len(lagging)}")
    for g in result["groups"]:
        again = sum(r["redelivered_at_most"] for r in g["partitions"])
        click.echo(f"group {g['group']}: {len(g['partitions'])} partitions moved, at most {again} records re-delivered")
        for r in g["partitions"]:
            click.echo(
                f"  {r['topic']}[{r['partition']}] source {r['source_offset']} → "
                f"{r['target_topic']}[{r['partition']}] target {r['target_offset']}"
            )
    click.echo(
        f"switchover of flow {result['flow']} done; start the reverse flow: mirror run --config {result['reverse_config']}"
        if result["switched"]
        else f"switchover of flow {result['flow']} not finished (steps done: {', '.join(result['steps_done']) or 'none'})"
    )


@click.command("switchover", help="Planned switchover: gated steps, resumable (state file), reverse config written.")
@config_option
@flow_option
@click.option("--group", "groups", multiple=True, help="consumer group to move (repeat for each)")
@click.option("--resume", is_flag=True, help="continue the switchover in --state")
@click.option("--state", "state_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--reverse-config", "reverse_path", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--quiet-s", default=10.0, show_default=True, help="how long the source's ends must stay unchanged")
@click.option("--wait-s", default=120.0, show_default=True, help="how long each gate waits before it gives up")
@click.option("--stop-after", type=click.Choice(STEPS), default=None, hidden=True)
@click.option("--json", "as_json", is_flag=True)
def switchover(
    config_path: str,
    flow: str | None,
    groups: tuple[str, ...],
    resume: bool,
    state_path: Path | None,
    reverse_path: Path | None,
    quiet_s: float,
    wait_s: float,
    stop_after: str | None,
    as_json: bool,
) -> int:
    config = load_config(config_path)
    flow_name, f = config.flow(flow)
    path = state_path or Path(f"switchover-{flow_name}.state.json")
    state = _load_state(path, flow_name, groups, resume)
    if not state["groups"]:
        raise UserError("give the consumer groups to move: --group G (repeat for each)", 2)
    for alias in (f.source, f.target):
        require_reachable(config.clusters[alias], alias)
    say = (lambda _line: None) if as_json else click.echo
    plan = Plan(config, flow_name, f, tuple(state["groups"]), quiet_s, wait_s, say)
    reverse = reverse_path or path.with_name(f"reverse-{flow_name}.yaml")
    code = 0
    try:
        with refusing(f"switch flow {flow_name} over"):
            _run(plan, state, path, stop_after, reverse, config_path)
    except Blocked as exc:
        state["blocked"] = str(exc)
        _save(path, state)
        if not as_json:
            raise UserError(
                f"switchover of flow {flow_name} stopped: {exc}; fix it and add --resume", EXIT_BLOCKED
            ) from None
        code = EXIT_BLOCKED
    except _Stopped as exc:
        say(f"stopped after step {exc} (--stop-after); continue with --resume")
    result = report(state)
    if as_json:
        click.echo(json.dumps({**result, "blocked": state.get("blocked") if code else None}))
    else:
        _print_human(result)
    return code
