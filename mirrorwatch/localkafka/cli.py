"""``mirrorwatch-kafka``: resolve the jars, or run local clusters in the foreground until Ctrl-C."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from ..core.cli import UserError, run_click
from .jars import KAFKA_VERSION, LauncherError, cache_dir, ensure_jars
from .launcher import LocalClusters
from .multinode import MultiNodeClusters


@click.group(
    help=f"Real local Apache Kafka {KAFKA_VERSION} clusters (KRaft; one node each unless --brokers) for demos and tests."
)
def cli() -> None:
    pass


@cli.command(help="Resolve the broker (and MirrorMaker 2) jars from Maven Central into the cache.")
@click.option("--mm2/--no-mm2", default=True, help="also resolve connect-mirror (MirrorMaker 2)")
def jars(mm2: bool) -> None:
    try:
        for kind in ("broker", "mm2") if mm2 else ("broker",):
            click.echo(f"{kind}: {ensure_jars(kind)}")
    except LauncherError as exc:
        raise UserError(str(exc), 1) from None


@cli.command(help="Start clusters (default: east and west) and keep them up until Ctrl-C.")
@click.argument("names", nargs=-1)
@click.option("--dir", "base_dir", default=None, help="where cluster data lives (default: .cache/clusters)")
@click.option(
    "--brokers",
    type=click.IntRange(1, 9),
    default=1,
    show_default=True,
    help="nodes per cluster (combined broker+controller, all voters); with 3: topics and internal topics RF 3, "
    "min.insync.replicas 2",
)
def up(names: tuple[str, ...], base_dir: str | None, brokers: int) -> None:
    chosen = list(names) or ["east", "west"]
    folder = Path(base_dir) if base_dir else cache_dir() / "clusters"
    clusters: LocalClusters | MultiNodeClusters
    if brokers == 1:
        clusters = LocalClusters(chosen, folder)
    else:
        # their own folder: a single-node cluster's data under the same name is another cluster
        clusters = MultiNodeClusters(chosen, folder / f"{brokers}-nodes", brokers)
    try:
        clusters.start()
    except LauncherError as exc:
        raise UserError(str(exc), 1) from None
    for cluster in clusters.clusters.values():
        started = cluster.startup_seconds or 0.0
        click.echo(
            f"{cluster.name}: bootstrap.servers={cluster.bootstrap}  (started in {started:.1f} s, log {cluster.log_path})"
        )
    click.echo("Press Ctrl-C to stop them.")
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    clusters.stop()


main = run_click(cli, "mirrorwatch-kafka", internal_exit_code=1)
