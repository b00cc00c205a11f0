"""``mirrorwatch-kafka``: resolve the jars, or run local clusters in the foreground until Ctrl-C."""

from __future__ import annotations

import signal
import threading

import click

from ..core.cli import UserError, run_click
from .jars import KAFKA_VERSION, LauncherError, cache_dir, ensure_jars
from .launcher import LocalClusters


@click.group(help=f"Real local Apache Kafka {KAFKA_VERSION} clusters (KRaft, one node each) for demos and tests.")
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
def up(names: tuple[str, ...], base_dir: str | None) -> None:
    clusters = LocalClusters(list(names) or ["east", "west"], base_dir or cache_dir() / "clusters")
    try:
        clusters.start()
    except LauncherError as exc:
        raise UserError(str(exc), 1) from None
    for cluster in clusters.clusters.values():
        click.echo(
            f"{cluster.name}: bootstrap.servers={cluster.bootstrap}  (started in {cluster.startup_seconds:.1f} s, log {cluster.log_path})"
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
