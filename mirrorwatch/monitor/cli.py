"""``monitor``: lag service, one-shot lag table, Spark analytics and history generation."""

from __future__ import annotations

import click

from ..core.cli import run_click


@click.group(help="Watch Kafka mirrors: committed, read and true lag, Burrow-style status, analytics.")
def cli() -> None:
    pass


def _register() -> None:
    # Subcommands live beside the code they drive; each module exposes a list ``commands``.
    from .commands import commands as monitor_commands

    for command in monitor_commands:
        cli.add_command(command)
    from .analytics.cli import commands as analytics_commands

    for command in analytics_commands:
        cli.add_command(command)


_register()
main = run_click(cli, "monitor")
