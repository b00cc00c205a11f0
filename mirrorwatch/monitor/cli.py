"""``monitor``: lag service, one-shot lag table, Spark analytics and history generation."""

from __future__ import annotations

import click

from ..core.cli import LazyGroup, run_click

# Subcommands live beside the code they drive and are imported when run (core.cli.LazyGroup): `monitor lag` does
# not load the Spark job's module, nor `monitor run` the history generator's.
LAZY_COMMANDS = {
    "run": (
        "mirrorwatch.monitor.commands:run",
        "Run the monitor service: sampling, evaluator, history, Prometheus and status API.",
    ),
    "lag": (
        "mirrorwatch.monitor.commands:lag",
        "One-shot lag table: committed, read and true lag, time lag and status per partition.",
    ),
    "analyze": (
        "mirrorwatch.monitor.analytics.cli:analyze",
        "Run the Spark analytics job over a lag history and write Parquet tables + summary.json.",
    ),
    "generate-history": (
        "mirrorwatch.monitor.analytics.cli:generate_history",
        "Write a synthetic lag history (same schema as the monitor's) with known incidents.",
    ),
}


@click.group(
    cls=LazyGroup,
    lazy=LAZY_COMMANDS,
    help="Watch Kafka mirrors: committed, read and true lag, Burrow-style status, analytics.",
)
def cli() -> None:
    pass


main = run_click(cli, "monitor")
