"""``mirrorwatch doctor --config F [--flow N] [--json]``: exit 0 all fine, 1 warnings, 2 something missing,
3 cannot run (bad config or usage).

``mirrorwatch config from-strimzi FILE`` / ``from-mm2 FILE [--out F]``: a mirrorwatch config written from a
Strimzi KafkaMirrorMaker2 resource or an MM2 dedicated-mode mm2.properties (docs/mirrormaker2.md); exit 0 written,
2 the input cannot be used (one line on stderr)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.cli import UserError, run_click
from ..core.config_loading import load_config

if TYPE_CHECKING:  # the doctor's and the importers' modules load when their command runs
    from .config_import import Imported
    from .report import Row

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


def _print(rows: list[Row]) -> None:
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


@cli.group(help="Write a mirrorwatch config from what already runs MirrorMaker 2 (docs/mirrormaker2.md).")
def config() -> None:
    pass


_FILE = click.argument("file", type=click.Path(dir_okay=True))
_OUT = click.option("--out", "out", type=click.Path(dir_okay=False), help="write the config here, not to stdout")


@config.command(
    "from-strimzi",
    help="FILE: Strimzi KafkaMirrorMaker2 resource(s) (kafka.strimzi.io/v1beta2 or v1; other documents in the "
    "file are skipped). Prints the config; what cannot be carried over goes to stderr, one line each. "
    "Exit 2 on input it cannot use.",
)
@_FILE
@_OUT
def from_strimzi(file: str, out: str | None) -> None:
    from .config_import import from_strimzi as convert

    _import(file, out, "from-strimzi", convert)


@config.command(
    "from-mm2",
    help="FILE: an MM2 dedicated-mode mm2.properties; one flow per enabled source->target pair. Prints the "
    "config; what cannot be carried over goes to stderr, one line each. Exit 2 on input it cannot use.",
)
@_FILE
@_OUT
def from_mm2(file: str, out: str | None) -> None:
    from .config_import import from_mm2_properties as convert

    _import(file, out, "from-mm2", convert)


def _read_text(path: str) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{path} is not UTF-8 text (byte {exc.start}): a binary file given by mistake? Give the text file"
        ) from None


def _import(file: str, out: str | None, command: str, convert: Callable[[str, str], Imported]) -> None:
    import yaml

    from ..core.config_loading import config_from_dict
    from .config_import import ImportProblem, render_yaml

    try:
        imported = convert(_read_text(file), file)
    except ImportProblem as exc:
        raise UserError(str(exc)) from None
    text = render_yaml(imported, f"mirrorwatch config {command} {file}")
    config_from_dict(yaml.safe_load(text), origin="the written config")  # what we write must load
    if out:
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    else:
        click.echo(text, nl=False)
    for note in imported.notes:
        click.echo(f"mirrorwatch: not carried over: {note}", err=True)


main = run_click(cli, "mirrorwatch", config_exit_code=3, internal_exit_code=3)
