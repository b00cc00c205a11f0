"""The demo: two local Kafka clusters (east, west) with sample topics, and the mirrorwatch services.

Run through ``scripts/demo`` (which does the set-up first). Ctrl-C stops everything it started.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

import click
from confluent_kafka.admin import AdminClient, NewTopic

from .core.cli import UserError, run_click, setup_logging
from .localkafka import LauncherError, LocalClusters, cache_dir

SAMPLE_TOPICS = {"orders": 6, "payments": 3}


def create_sample_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics
    wanted = [NewTopic(name, parts, 1) for name, parts in SAMPLE_TOPICS.items() if name not in existing]
    for future in admin.create_topics(wanted).values() if wanted else ():
        future.result(30)


@click.command(help="Run the mirrorwatch demo on two local Kafka clusters (east → west).")
@click.option("--dir", "base_dir", default=None, help="demo state folder (default .cache/demo)")
def cli(base_dir: str | None) -> None:
    setup_logging()
    base = cache_dir() / "demo" if base_dir is None else base_dir
    clusters = LocalClusters(["east", "west"], f"{base}/clusters")
    started = time.monotonic()
    try:
        clusters.start()
    except LauncherError as exc:
        raise UserError(str(exc), 1) from None
    create_sample_topics(clusters["east"].bootstrap)
    print(f"\nmirrorwatch demo up in {time.monotonic() - started:.1f} s")
    for cluster in clusters.clusters.values():
        print(f"  Kafka {cluster.name:5} bootstrap.servers={cluster.bootstrap}   log: {cluster.log_path}")
    print(f"  sample topics on east: {', '.join(SAMPLE_TOPICS)}")
    print("Press Ctrl-C to stop everything the demo started.\n")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    print("stopping ...", file=sys.stderr)
    clusters.stop()


main = run_click(cli, "demo")

if __name__ == "__main__":
    main()
