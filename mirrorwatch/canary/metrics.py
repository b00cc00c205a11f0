"""The service's Prometheus metrics (names and meanings: docs/metrics.md, canary section)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from ..core.status import CanaryStatus, codes_help

# *_created series are not part of the metrics contract (docs/metrics.md) and only add noise to every scrape
disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated in prometheus_client

LABELS = ("flow", "source", "target")
# round trips from tens of ms (local) to the 30 s default critical timeout and beyond (late arrivals)
ROUND_TRIP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class CanaryMetrics:
    def __init__(self, registry: CollectorRegistry):
        self.registry = registry
        self.round_trip = Histogram(
            "mirrorwatch_canary_round_trip_seconds",
            "Canary event produce on source to seen on target",
            LABELS,
            buckets=ROUND_TRIP_BUCKETS,
            registry=registry,
        )
        self.lost = Counter(
            "mirrorwatch_canary_lost",
            "Own canary events the target will never have: a later event of the same source partition arrived "
            "on the target without it (a mirror keeps a partition's order, so it was skipped); counted once",
            LABELS,
            registry=registry,
        )
        self.late = Counter(
            "mirrorwatch_canary_late",
            "Own canary events that arrived on the target after crit_latency_s",
            LABELS,
            registry=registry,
        )
        self.overdue = Gauge(
            "mirrorwatch_canary_overdue_events",
            "Own canary events past crit_latency_s that have not arrived and are not lost: late, still expected",
            LABELS,
            registry=registry,
        )
        self.oldest_overdue = Gauge(
            "mirrorwatch_canary_oldest_overdue_seconds",
            "Age of the oldest overdue canary event (past crit_latency_s, not arrived, not lost); 0 when none",
            LABELS,
            registry=registry,
        )
        self.duplicates = Counter(
            "mirrorwatch_canary_duplicates", "Canary events seen more than once", LABELS, registry=registry
        )
        self.reordered = Counter(
            "mirrorwatch_canary_reordered",
            "Lower sequence seen after a higher one on a partition",
            LABELS,
            registry=registry,
        )
        self.probes = Counter("mirrorwatch_canary_probes", "Canary probes run", LABELS, registry=registry)
        self.status = Gauge(
            "mirrorwatch_canary_status", f"Last status: {codes_help(CanaryStatus)}", LABELS, registry=registry
        )
        self.cluster_up = Gauge(
            "mirrorwatch_canary_cluster_up",
            "1 when the cluster answered the last probe's metadata request, 0 when it did not",
            LABELS + ("cluster", "role"),
            registry=registry,
        )
        self.heartbeat_age = Gauge(
            "mirrorwatch_canary_heartbeat_age_seconds",
            "Age of the newest mirrored heartbeat",
            LABELS,
            registry=registry,
        )
