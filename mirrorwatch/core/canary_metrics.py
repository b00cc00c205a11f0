"""Reading the canary's own Prometheus endpoint: the one parser of its series, for the monitor's recent figures,
the status page and ``mirror failover check``. They read what the canary publishes, as any Prometheus server
would, rather than importing the canary. Names: docs/metrics.md, canary section."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from .status import CanaryStatus

_STATUS_NAMES = {s.value: s.name for s in CanaryStatus}


def canary_status_name(code: float) -> str | None:
    """The status word of ``mirrorwatch_canary_status``'s value (None for NaN: no probe judged yet)."""
    if math.isnan(code):
        return None
    return _STATUS_NAMES.get(int(code), CanaryStatus.UNKNOWN.name)


@dataclass
class CanaryReading:
    """One flow's canary series at one scrape; counters are totals since the canary started."""

    status: str | None = None
    heartbeat_age_s: float | None = None  # None: no heartbeat seen yet (the gauge is NaN)
    probes: float = 0.0
    lost: float = 0.0  # events the target will never have (a later one of the partition arrived first)
    late: float = 0.0  # events that arrived after crit_latency_s
    overdue: float = 0.0  # gauge: events past crit_latency_s, not arrived, not lost (late, still expected)
    oldest_overdue_s: float = 0.0  # gauge: age of the oldest of them, 0 when none
    duplicates: float = 0.0
    reordered: float = 0.0
    round_trip_sum_s: float = 0.0  # 0 until a first probe came back (the histogram has no series before)
    round_trip_count: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)  # le → cumulative count

    def mean_round_trip_s(self) -> float | None:
        """The mean round trip of every probe since the canary started (not of recent ones)."""
        return self.round_trip_sum_s / self.round_trip_count if self.round_trip_count else None


_FIGURES = {
    "mirrorwatch_canary_probes_total": "probes",
    "mirrorwatch_canary_lost_total": "lost",
    "mirrorwatch_canary_late_total": "late",
    "mirrorwatch_canary_overdue_events": "overdue",
    "mirrorwatch_canary_oldest_overdue_seconds": "oldest_overdue_s",
    "mirrorwatch_canary_duplicates_total": "duplicates",
    "mirrorwatch_canary_reordered_total": "reordered",
    "mirrorwatch_canary_round_trip_seconds_sum": "round_trip_sum_s",
    "mirrorwatch_canary_round_trip_seconds_count": "round_trip_count",
}


def parse_canary_metrics(text: str) -> dict[str, CanaryReading]:
    """Canary readings per flow name from Prometheus text; raises ValueError on text that is not Prometheus'."""
    readings: dict[str, CanaryReading] = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("mirrorwatch_canary_"):
            continue
        for sample in family.samples:
            flow = sample.labels.get("flow")
            if flow is None:
                continue
            reading = readings.setdefault(flow, CanaryReading())
            value = float(sample.value)
            if sample.name == "mirrorwatch_canary_status":
                reading.status = canary_status_name(value)
            elif sample.name == "mirrorwatch_canary_heartbeat_age_seconds":
                reading.heartbeat_age_s = None if math.isnan(value) else value
            elif sample.name == "mirrorwatch_canary_round_trip_seconds_bucket":
                reading.buckets[float(sample.labels["le"])] = value
            elif sample.name in _FIGURES:
                setattr(reading, _FIGURES[sample.name], value)
    return readings
