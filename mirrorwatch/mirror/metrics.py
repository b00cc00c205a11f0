"""The engine's Prometheus metrics, read from its own counters at scrape time.

The data path only does integer adds on plain dicts (no label lookups, no locks per record); this collector
turns them into metric families when Prometheus scrapes. Names: docs/metrics.md.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

if TYPE_CHECKING:
    from .engine import MirrorEngine

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class LatencyHistogram:
    """A histogram the single data-path thread updates without locks."""

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float, count: int = 1) -> None:
        """``count`` records that took ``seconds`` (the engine settles reports once per poll round)."""
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += count
        self.total += seconds * count

    def buckets(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, count in zip(LATENCY_BUCKETS + (float("inf"),), self.counts):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return out


class EngineCollector:
    def __init__(self, engine: MirrorEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[Metric]:
        e = self.engine
        base = [e.flow_name, e.policy.source, e.policy.target]
        names = ["flow", "source", "target"]
        records = CounterMetricFamily(
            "mirrorwatch_mirror_records", "Records acknowledged by the target", labels=names + ["topic", "partition"]
        )
        nbytes = CounterMetricFamily(
            "mirrorwatch_mirror_bytes",
            "Key+value bytes acknowledged by the target",
            labels=names + ["topic", "partition"],
        )
        position = GaugeMetricFamily(
            "mirrorwatch_mirror_position",
            "Engine positions per source partition (next offset)",
            labels=names + ["topic", "partition", "kind"],
        )
        for (topic, partition), state in list(e.partitions.items()):
            labels = base + [topic, str(partition)]
            records.add_metric(labels, state.records)
            nbytes.add_metric(labels, state.bytes)
            for kind, value in (("read", state.read_next), ("acked", state.acked_next), ("committed", state.committed)):
                if value is not None:
                    position.add_metric(labels + [kind], value)
        yield records
        yield nbytes
        yield position
        latency = HistogramMetricFamily(
            "mirrorwatch_mirror_replication_latency_seconds",
            "Target ack time minus source record timestamp",
            labels=names,
        )
        latency.add_metric(base, e.latency.buckets(), e.latency.total)
        yield latency
        errors = CounterMetricFamily(
            "mirrorwatch_mirror_produce_errors", "Produce errors", labels=names + ["topic", "retriable"]
        )
        # every mirrored topic exports both series from the start, so rate() and panels see 0, not "no data"
        for topic in sorted(e.target_names):
            for retriable in (True, False):
                errors.add_metric(
                    base + [topic, "true" if retriable else "false"], e.produce_errors.get((topic, retriable), 0)
                )
        yield errors
        in_flight = GaugeMetricFamily(
            "mirrorwatch_mirror_in_flight_records", "Records sent, not yet acknowledged", labels=names
        )
        in_flight.add_metric(base, e.in_flight)
        yield in_flight
        rebalances = CounterMetricFamily(
            "mirrorwatch_mirror_rebalances", "Partition assignment changes", labels=names + ["group"]
        )
        rebalances.add_metric(base + [e.group], e.rebalances)
        yield rebalances
        replacements = CounterMetricFamily(
            "mirrorwatch_mirror_consumer_replacements",
            "Source consumers replaced after staying outside their group while the source answered",
            labels=names + ["group"],
        )
        replacements.add_metric(base + [e.group], e.consumer_replacements)
        yield replacements
        lost = CounterMetricFamily(
            "mirrorwatch_mirror_records_lost",
            "Source records removed (retention, "
            "DeleteRecords, a recreated topic) before they were mirrored; counted under "
            "mirror.on_records_lost: continue",
            labels=names + ["topic", "partition"],
        )
        # every owned partition from the start (0), so panels and alerts see 0 rather than "no data"
        lost_counts = dict(e.records_lost)
        for key in list(e.partitions):
            lost_counts.setdefault(key, 0)
        for (topic, partition), count in sorted(lost_counts.items()):
            lost.add_metric(base + [topic, str(partition)], count)
        yield lost
        if e.exactly_once:
            transactions = CounterMetricFamily(
                "mirrorwatch_mirror_transactions",
                "Exactly-once: transactions on the target (records and positions together), by outcome",
                labels=names + ["outcome"],
            )
            transactions.add_metric(base + ["committed"], e.transactions_committed)
            transactions.add_metric(base + ["aborted"], e.transactions_aborted)
            yield transactions
        heartbeats = CounterMetricFamily(
            "mirrorwatch_mirror_heartbeats", "Heartbeats written to the source", labels=names
        )
        heartbeats.add_metric(base, e.heartbeats_sent)
        yield heartbeats

        up = GaugeMetricFamily(
            "mirrorwatch_mirror_cluster_up",
            "1 while the cluster answers the mirror's metadata probe, "
            "0 while it is unreachable (stopped, frozen, partitioned)",
            labels=names + ["cluster", "role"],
        )
        for role, alias, _ in e.watch.clusters:
            up.add_metric(base + [alias, role], 1.0 if e.watch.up[role] else 0.0)
        yield up
        matched = GaugeMetricFamily(
            "mirrorwatch_mirror_matched_topics",
            "Source topics matching the flow's include/exclude "
            "regexes (mirrorwatch's own topics not counted); 0 = the flow mirrors nothing",
            labels=names,
        )
        if e.matched_topics is not None:
            matched.add_metric(base, e.matched_topics)
        yield matched
        shared = GaugeMetricFamily(
            "mirrorwatch_mirror_internal_topics_shared",
            "Other consumer groups on the source that "
            "also consume the heartbeats/canary topics this flow mirrors (should be 0)",
            labels=names,
        )
        if e.shared_with is not None:
            shared.add_metric(base, len(e.shared_with))
        yield shared
