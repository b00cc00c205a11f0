"""``mirrorwatch doctor --config F [--flow N] [--json]``: exit 0 all fine, 1 warnings, 2 something missing,
3 cannot run (bad config or usage)."""

from __future__ import annotations

import json
import logging
import sys

import click

from ..core.cli import run_click
from ..core.config import load_config

STYLE = {"OK": "green", "WARN": "yellow", "MISSING": "bold red", "UNVERIFIED": "dim"}


@click.group(help="mirrorwatch tools that span components.")
def cli() -> None:
    pass


@cli.command(
    help="Preflight: reachability, authentication, ACLs, topics and clock skew per flow. "
    "Exit 0 fine, 1 warnings, 2 something missing, 3 bad config."
)
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False), help="mirrorwatch YAML config")
@click.option("--flow", "flows", multiple=True, help="flow(s) to check (default: all)")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("-v", "--verbose", is_flag=True, help="client library logs on stderr")
def doctor(config_path: str, flows: tuple[str, ...], as_json: bool, verbose: bool) -> int:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.CRITICAL, stream=sys.stderr)
    config = load_config(config_path)
    names = [config.flow(f)[0] for f in flows] or list(config.flows) or [config.flow(None)[0]]
    from .report import exit_code, run_doctor, to_json

    rows = run_doctor(config, names)
    if as_json:
        click.echo(json.dumps(to_json(rows), indent=2))
    else:
        _print(rows)
    return exit_code(rows)


def _print(rows) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False, width=max(160, Console().width))
    table = Table(title="mirrorwatch doctor", title_justify="left")
    for header in ("flow", "check", "cluster", "status", "detail", "fix"):
        table.add_column(header, overflow="fold")
    for r in rows:
        table.add_row(r.flow, r.check, r.cluster, f"[{STYLE[r.status]}]{r.status}[/]", r.detail, r.fix)
    console.print(table)
    counts = {s: sum(r.status == s for r in rows) for s in STYLE}
    console.print("  ".join(f"{s} {n}" for s, n in counts.items()))


main = run_click(cli, "mirrorwatch", config_exit_code=3, internal_exit_code=3)
