"""Command-line options shared by the mirror's commands."""

import click

config_option = click.option(
    "--config", "config_path", required=True, type=click.Path(dir_okay=False), help="mirrorwatch YAML config"
)
flow_option = click.option("--flow", default=None, help="flow name (default: the only flow)")
