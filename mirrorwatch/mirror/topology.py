"""``mirror topology``: which clusters mirror into a cluster, from the heartbeats found there."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import TypedDict

import click
from confluent_kafka import TopicPartition
from rich.console import Console
from rich.table import Table

from ..core.cli import UserError
from ..core.clients import make_consumer
from ..core.config import ClusterConfig, Config
from ..core.config_loading import load_config
from ..core.mm2 import any_heartbeat
from ..core.oneshot import require_clusters, timeout_option, within
from ..core.reading import read_to_end
from ..core.records import RecordFormatError

TAIL = 200  # heartbeats read per partition (from the end): plenty for the newest of each upstream


class UpstreamRow(TypedDict):
    """One upstream cluster seen from a cluster (a row of the table, an item of ``--json``'s ``upstreams``)."""

    cluster: str
    upstream: str
    via: str
    topic: str
    age_s: float


def heartbeat_topics(topics: Iterable[str], name: str) -> list[str]:
    return sorted(t for t in topics if t == name or t.endswith("." + name))


def latest_heartbeats(cluster: ClusterConfig, topic_name: str) -> dict[tuple[str, str], tuple[int, str]]:
    """(source, target) → (newest heartbeat ts_ms, topic it was found in)."""
    consumer = make_consumer(cluster, "mirrorwatch-topology", None, **{"enable.partition.eof": True})
    try:
        metadata = consumer.list_topics(timeout=10).topics
        positions, ends = {}, {}
        for topic in heartbeat_topics(metadata, topic_name):
            for p in metadata[topic].partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high > low:
                    positions[(topic, p)], ends[(topic, p)] = max(low, high - TAIL), high
        if not positions:
            return {}
        consumer.assign([TopicPartition(t, p, offset) for (t, p), offset in positions.items()])
        latest: dict[tuple[str, str], tuple[int, str]] = {}
        for msg in read_to_end(consumer, positions, 15, ends):
            try:
                beat = any_heartbeat(msg.key(), msg.value())  # ours (JSON) or MirrorMaker 2's
            except RecordFormatError:
                continue
            key, found_in = (beat.source, beat.target), msg.topic()
            assert found_in is not None  # read_to_end yields records of a partition
            if key not in latest or beat.ts_ms > latest[key][0]:
                latest[key] = (beat.ts_ms, found_in)
        return latest
    finally:
        consumer.close()


@click.command(help="List the upstream clusters mirrored into a cluster and the age of their latest heartbeat.")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False))
@click.option("--cluster", default=None, help="cluster alias to inspect (default: every flow's target)")
@click.option("--json", "as_json", is_flag=True)
@timeout_option
def topology(config_path: str, cluster: str | None, as_json: bool, timeout_s: float) -> None:
    config = load_config(config_path)
    aliases = [cluster] if cluster else sorted({f.target for f in config.flows.values()}) or sorted(config.clusters)
    for alias in aliases:
        if alias not in config.clusters:
            raise UserError(f"cluster '{alias}' is not defined (defined: {', '.join(config.clusters)})", 2)
    require_clusters([(a, config.clusters[a]) for a in aliases], timeout_s)
    within(timeout_s, lambda: _topology(config, aliases, as_json), "mirror topology")


def _topology(config: Config, aliases: list[str], as_json: bool) -> None:
    rows: list[UpstreamRow] = []
    for alias in aliases:
        try:
            found = latest_heartbeats(config.clusters[alias], config.mirror.heartbeats_topic)
        except Exception as exc:
            raise UserError(
                f"cannot read heartbeats on '{alias}' at {config.clusters[alias].bootstrap_servers}: {exc}", 3
            ) from None
        now = time.time() * 1000
        for (source, target), (ts_ms, topic) in sorted(found.items()):
            # a heartbeat written on this cluster itself (not mirrored in) is its own outgoing beat
            if topic != config.mirror.heartbeats_topic or source != alias:
                rows.append(
                    {
                        "cluster": alias,
                        "upstream": source,
                        "via": f"{source}→{target}",
                        "topic": topic,
                        "age_s": round((now - ts_ms) / 1000, 1),
                    }
                )
    if as_json:
        click.echo(json.dumps({"upstreams": rows}))
        return
    table = Table(title="upstream clusters (from mirrored heartbeats)")
    for header in ("cluster", "upstream", "via", "topic", "heartbeat age s"):
        table.add_column(header)
    for r in rows:
        table.add_row(r["cluster"], r["upstream"], r["via"], r["topic"], f"{r['age_s']:.1f}")
    Console().print(table)
    if not rows:
        click.echo("no mirrored heartbeats found")
