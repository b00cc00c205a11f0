"""Prometheus exporter: a custom Collector over the latest Snapshot (names and labels from docs/metrics.md).

Cheap at 10k partitions because (1) the collector reads the snapshot's arrays directly, no per-scrape Kafka
work, and (2) the text exposition is rendered once per snapshot and served from a cache to every scrape
until the next cycle (:class:`MetricsCache`). Unknown values are left out rather than exported as 0 — a 0
lag would say "healthy" about a partition the monitor cannot see; its status says UNKNOWN (5) instead.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from .model import Snapshot
from .status import P_UNKNOWN

PARTITION_LABELS = ["flow", "source", "target", "group", "topic", "partition"]
GROUP_LABELS = ["flow", "source", "target", "group"]


class SnapshotCollector:
    def __init__(self, snapshot: Callable[[], Snapshot], clock: Callable[[], float] = time.time):
        self._snapshot, self._clock = snapshot, clock

    def describe(self):
        return []  # no collect() at registration time

    def collect(self):
        snap = self._snapshot()
        lag = GaugeMetricFamily("mirrorwatch_lag_records", "Mirror lag in records (kind: committed, read, true)",
                                labels=PARTITION_LABELS + ["kind"])
        time_lag = GaugeMetricFamily("mirrorwatch_time_lag_seconds",
                                     "Age of the oldest source record not yet on the target", labels=PARTITION_LABELS)
        catch_up = GaugeMetricFamily("mirrorwatch_catch_up_seconds",
                                     "Forecast time to catch up; +Inf when not catching up",
                                     labels=GROUP_LABELS + ["topic"])
        p_status = GaugeMetricFamily("mirrorwatch_partition_status",
                                     "0 OK, 1 WARN, 2 STOP, 3 STALL, 4 REWIND, 5 UNKNOWN", labels=PARTITION_LABELS)
        g_status = GaugeMetricFamily("mirrorwatch_group_status",
                                     "0 OK, 1 WARN, 2 ERR, 3 STOP, 4 STALL, 5 REWIND, 6 NOTFOUND, 7 UNKNOWN",
                                     labels=GROUP_LABELS)
        complete = GaugeMetricFamily("mirrorwatch_window_complete_ratio",
                                     "Share of partitions with a full evaluator window", labels=GROUP_LABELS)
        age = GaugeMetricFamily("mirrorwatch_sample_age_seconds", "Seconds since the last successful sample",
                                labels=["flow", "source", "target"])
        up = GaugeMetricFamily("mirrorwatch_cluster_up", "1 when the last sample reached the cluster",
                               labels=["cluster"])
        now = self._clock()
        ages: dict[tuple[str, str, str], float] = {}
        for v in snap.views:
            glabels = [v.flow, v.cluster, v.target, v.group]
            g_status.add_metric(glabels, v.group_status)
            key = (v.flow, v.cluster, v.target)
            a = now - v.last_ok_ms / 1000.0 if v.last_ok_ms else math.inf
            ages[key] = max(ages.get(key, 0.0), a)  # plain groups share ("", cluster, ""): the stalest speaks
            status = v.status
            if status is None:
                continue
            unknown = v.group_status == 7
            if not unknown:
                complete.add_metric(glabels, v.complete)
            kinds = [("committed", v.committed_lag)]
            if v.kind == "mirror":
                kinds += [("read", v.read_lag), ("true", v.true_lag)]
            for i, (topic, partition) in enumerate(zip(v.topics, v.partitions)):
                plabels = glabels + [topic, str(partition)]
                p_status.add_metric(plabels, P_UNKNOWN if unknown else int(status[i]))
                if unknown:
                    continue
                for kind, arr in kinds:
                    if arr is not None and arr[i] >= 0:
                        lag.add_metric(plabels + [kind], int(arr[i]))
                if v.time_lag_s is not None and not math.isnan(v.time_lag_s[i]):
                    time_lag.add_metric(plabels, float(v.time_lag_s[i]))
            if not unknown:
                for topic, seconds in v.topic_catch_up_s.items():
                    if not math.isnan(seconds):
                        catch_up.add_metric(glabels + [topic], seconds)
        for (flow, source, target), a in ages.items():
            age.add_metric([flow, source, target], a)
        for cluster, is_up in sorted(snap.cluster_up.items()):
            up.add_metric([cluster], 1 if is_up else 0)
        return [lag, time_lag, catch_up, p_status, g_status, complete, age, up]


class MetricsCache:
    """Renders the exposition once per snapshot (sample age is the only value that changes between cycles,
    and it is at most ``max_age_s`` stale in the cached text)."""

    def __init__(self, snapshot: Callable[[], Snapshot], max_age_s: float = 1.0):
        self._snapshot = snapshot
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SnapshotCollector(snapshot))
        self._lock = threading.Lock()
        self._key: tuple | None = None
        self._body = b""
        self._max_age_s = max_age_s

    def render(self) -> bytes:
        snap = self._snapshot()
        with self._lock:
            key = (id(snap), snap.seq, int(time.monotonic() / self._max_age_s))
            if key != self._key:
                self._body = generate_latest(self.registry)
                self._key = key
            return self._body
