"""Prometheus exporter: the latest Snapshot as Prometheus text (names and labels from docs/metrics.md).

Cheap at 10k partitions because (1) nothing is read from Kafka at scrape time, only the snapshot's arrays;
(2) the text is rendered by :class:`TextRenderer` (label strings cached per partition layout) once per snapshot
and served from a cache to every scrape until the next cycle (:class:`MetricsCache`). One renderer: a
prometheus-client Collector rendered the same families a second way (it was ~10x slower, and only the tests
read it); the tests parse this text with prometheus-client's own parser. Unknown values are left out rather
than exported as 0 — a 0 lag would say "healthy" about a partition the monitor cannot see; its status says
UNKNOWN (5) instead.

``monitor.series`` chooses the level of the per-partition families (lags, RPO, records lost, partition status):
per partition, per topic or per flow, same names with fewer labels; how values fold is
:mod:`mirrorwatch.monitor.series`, which labels each level has is docs/metrics.md.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ..core.connect_rest import STATES
from ..core.lag import slowest_catch_up
from ..core.status import GroupStatus, PartitionStatus, codes_help
from .model import GroupView, Snapshot
from .series import Rollup, SeriesLevel, rollup_of, series_values


def connect_series(v: GroupView) -> list[tuple[str, list[tuple[str, str]], int]]:
    """An MM2 flow's Connect REST state as series (kube-state-metrics style: one series per possible state, 1 for
    the current one, so an alert matches ``state="FAILED"``); none without ``mirror.connect``."""
    if v.kind != "mirror" or v.connect is None:
        return []
    flow = [("flow", v.flow), ("source", v.cluster), ("target", v.target)]
    out: list[tuple[str, list[tuple[str, str]], int]] = [("mirrorwatch_mm2_connect_up", flow, int(v.connect.up))]
    for c in v.connect.connectors:
        base = flow + [("connector", c.name), ("role", c.role)]
        out += [("mirrorwatch_mm2_connector_state", base + [("state", s)], int(s == c.state)) for s in STATES]
        for t in c.tasks:
            out += [
                ("mirrorwatch_mm2_task_state", base + [("task", str(t.id)), ("state", s)], int(s == t.state))
                for s in STATES
            ]
    return out


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(value: float | int) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    return str(value)


class TextRenderer:
    """Renders the exporter's families (:data:`_FAMILIES`) straight to the text format.

    prometheus-client's generate_latest formats every sample through generic code (≈0.5 s for the ~60k
    samples of 10k partitions); here the per-partition label strings are built once per partition layout and
    reused every cycle, so a render is a loop of string joins (tests parse the output with
    prometheus-client's own parser).
    """

    def __init__(self, clock: Callable[[], float] = time.time, series: SeriesLevel = "partition"):
        self._clock = clock
        self._level: SeriesLevel = series
        # (flow, source, target, group) → (topics, partitions, label strings, rollup) of that layout
        self._labels: dict[tuple[str, str, str, str], tuple[list[str], list[int], list[str], Rollup | None]] = {}

    def _series(self, v: GroupView) -> tuple[list[str], Rollup | None]:
        """The label strings of the view's per-partition families at the exported level (``monitor.series``)
        and how its partitions fold into them; built once per partition layout."""
        key = (v.flow, v.cluster, v.target, v.group)
        cached = self._labels.get(key)
        if cached is None or cached[0] != v.topics or cached[1] != v.partitions:
            base = f'flow="{_esc(v.flow)}",source="{_esc(v.cluster)}",target="{_esc(v.target)}",group="{_esc(v.group)}"'
            rollup = rollup_of(v.topics, self._level)
            if rollup is None:
                strings = [f'{base},topic="{_esc(t)}",partition="{p}"' for t, p in zip(v.topics, v.partitions)]
            elif self._level == "topic":
                strings = [f'{base},topic="{_esc(t)}"' for t in rollup.keys]
            else:
                strings = [base]
            cached = self._labels[key] = (list(v.topics), list(v.partitions), strings, rollup)
        return cached[2], cached[3]

    def render(self, snap: Snapshot) -> bytes:
        families: dict[str, list[str]] = {name: [] for name in _FAMILIES}
        now = self._clock()
        ages: dict[tuple[str, str, str], float] = {}
        for v in snap.views:
            for name, pairs, value in connect_series(v):
                text = ",".join(f'{k}="{_esc(val)}"' for k, val in pairs)
                families[name].append(f"{name}{{{text}}} {value}")
            g = f'flow="{_esc(v.flow)}",source="{_esc(v.cluster)}",target="{_esc(v.target)}",group="{_esc(v.group)}"'
            families["mirrorwatch_group_status"].append(f"mirrorwatch_group_status{{{g}}} {v.group_status}")
            if v.kind == "mirror":
                f = f'flow="{_esc(v.flow)}",source="{_esc(v.cluster)}",target="{_esc(v.target)}"'
                families["mirrorwatch_flow_info"].append(f'mirrorwatch_flow_info{{{f},mirror="{_esc(v.engine)}"}} 1')
                if v.heartbeat_age_s is not None:
                    families["mirrorwatch_heartbeat_age_seconds"].append(
                        f"mirrorwatch_heartbeat_age_seconds{{{f}}} {_num(float(v.heartbeat_age_s))}"
                    )
                if v.coverage and v.coverage["ratio"] is not None:
                    families["mirrorwatch_translation_coverage_ratio"].append(
                        f"mirrorwatch_translation_coverage_ratio{{{f}}} {_num(float(v.coverage['ratio']))}"
                    )
                for group, seconds in sorted(((v.coverage or {}).get("checkpoint_age_s") or {}).items()):
                    families["mirrorwatch_checkpoint_age_seconds"].append(
                        f'mirrorwatch_checkpoint_age_seconds{{{f},group="{_esc(group)}"}} {_num(float(seconds))}'
                    )
            key = (v.flow, v.cluster, v.target)
            a = now - v.last_ok_ms / 1000.0 if v.last_ok_ms else math.inf
            ages[key] = max(ages.get(key, 0.0), a)
            if v.status is None:
                continue
            labels, rollup = self._series(v)
            unknown = v.group_status == GroupStatus.UNKNOWN
            out_status = families["mirrorwatch_partition_status"]
            if unknown:
                out_status.extend(f"mirrorwatch_partition_status{{{l}}} {int(PartitionStatus.UNKNOWN)}" for l in labels)
                continue
            families["mirrorwatch_window_complete_ratio"].append(
                f"mirrorwatch_window_complete_ratio{{{g}}} {_num(float(v.complete))}"
            )
            values = series_values(v, rollup, self._level)
            if values.status is not None:
                out_status.extend(
                    f"mirrorwatch_partition_status{{{l}}} {s}" for l, s in zip(labels, values.status.tolist())
                )
            out_lag = families["mirrorwatch_lag_records"]
            arrays = [(kind, arr.tolist()) for kind, arr in values.lags]
            for i, l in enumerate(labels):
                for kind, lags in arrays:
                    if lags[i] >= 0:
                        out_lag.append(f'mirrorwatch_lag_records{{{l},kind="{kind}"}} {lags[i]}')
            if values.time_lag_s is not None:
                out_time, out_rpo = families["mirrorwatch_time_lag_seconds"], families["mirrorwatch_rpo_seconds"]
                for l, t in zip(labels, values.time_lag_s.tolist()):
                    if not math.isnan(t):
                        out_time.append(f"mirrorwatch_time_lag_seconds{{{l}}} {_num(t)}")
                        out_rpo.append(f"mirrorwatch_rpo_seconds{{{l}}} {_num(t)}")
            if v.kind == "mirror":
                worst = v.figures.rpo_seconds
                if worst is not None:
                    families["mirrorwatch_flow_rpo_seconds"].append(
                        f"mirrorwatch_flow_rpo_seconds{{{g}}} {_num(worst)}"
                    )
            if values.open_transaction_s is not None:
                out_txn = families["mirrorwatch_open_transaction_seconds"]
                for l, t in zip(labels, values.open_transaction_s.tolist()):
                    if not math.isnan(t):
                        out_txn.append(f"mirrorwatch_open_transaction_seconds{{{l}}} {_num(t)}")
            if v.transactions is not None:  # one series per flow: what the alert counts (no per-partition threshold)
                families["mirrorwatch_hanging_transactions"].append(
                    f"mirrorwatch_hanging_transactions{{{g}}} {int(v.transactions.hanging.sum())}"
                )
            if values.records_lost is not None:
                out_lost = families["mirrorwatch_records_lost"]
                out_lost.extend(
                    f"mirrorwatch_records_lost{{{l}}} {n}"
                    for l, n in zip(labels, values.records_lost.tolist())
                    if n >= 0
                )
            out_catch_up = families["mirrorwatch_catch_up_seconds"]
            if self._level == "flow":
                slowest = slowest_catch_up(v.topic_catch_up_s)
                if slowest is not None:
                    out_catch_up.append(f"mirrorwatch_catch_up_seconds{{{g}}} {_num(float(slowest))}")
                continue
            for topic, seconds in v.topic_catch_up_s.items():
                if not math.isnan(seconds):
                    out_catch_up.append(
                        f'mirrorwatch_catch_up_seconds{{{g},topic="{_esc(topic)}"}} {_num(float(seconds))}'
                    )
        for (flow, source, target), a in ages.items():
            families["mirrorwatch_sample_age_seconds"].append(
                f'mirrorwatch_sample_age_seconds{{flow="{_esc(flow)}",source="{_esc(source)}",target="{_esc(target)}"}} '
                f"{_num(float(a))}"
            )
        for cluster, is_up in sorted(snap.cluster_up.items()):
            families["mirrorwatch_cluster_up"].append(
                f'mirrorwatch_cluster_up{{cluster="{_esc(cluster)}"}} {int(is_up)}'
            )
        parts = []
        for name, help_text in _FAMILIES.items():
            parts.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge")
            parts.extend(families[name])
        return ("\n".join(parts) + "\n").encode()


_FAMILIES = {
    "mirrorwatch_lag_records": "Mirror lag in records (kind: committed, read, true)",
    "mirrorwatch_time_lag_seconds": "Age of the oldest source record not yet on the target",
    "mirrorwatch_rpo_seconds": "RPO: age of the oldest source record not yet on the target (= time lag)",
    "mirrorwatch_flow_rpo_seconds": "RPO of the flow: the largest of its partitions'",
    "mirrorwatch_records_lost": "Records removed from the source (retention, DeleteRecords, a recreated topic) "
    "before they reached the target (a mirror) or the group (a watched group): log start − acked_next / committed",
    "mirrorwatch_open_transaction_seconds": "Transactional targets: seconds the target partition's last stable offset "
    "has stood below its end offset (0 = no transaction open)",
    "mirrorwatch_hanging_transactions": "Transactional targets: target partitions whose transaction has been open "
    "longer than monitor.hanging_transaction_s (read_committed readers see nothing past it)",
    "mirrorwatch_catch_up_seconds": "Forecast time to catch up; +Inf when not catching up",
    "mirrorwatch_partition_status": codes_help(PartitionStatus),
    "mirrorwatch_group_status": codes_help(GroupStatus),
    "mirrorwatch_window_complete_ratio": "Share of partitions with a full evaluator window",
    "mirrorwatch_sample_age_seconds": "Seconds since the last successful sample",
    "mirrorwatch_cluster_up": "0 once two samples in a row could not reach the cluster (or a first sample), else 1",
    "mirrorwatch_flow_info": "1 per flow; mirror says what mirrors it: mirrorwatch (our engine) or mm2 (MirrorMaker 2)",
    "mirrorwatch_heartbeat_age_seconds": "Age of the newest heartbeat that crossed the mirror (MirrorMaker 2 flows)",
    "mirrorwatch_translation_coverage_ratio": "Share of the source groups on mirrored topics with a usable checkpoint",
    "mirrorwatch_checkpoint_age_seconds": "Age of a source group's newest checkpoint on the target",
    "mirrorwatch_mm2_connect_up": "1 when the flow's Connect REST API answered for every MM2 connector at the last poll",
    "mirrorwatch_mm2_connector_state": "1 for an MM2 connector's current state (Connect's, or UNKNOWN), 0 for the others",
    "mirrorwatch_mm2_task_state": "1 for an MM2 connector task's current state (Connect's), 0 for the others",
}


class MetricsCache:
    """Renders the exposition once per snapshot and serves it to every scrape until the next cycle (sample age
    is the only value that changes between cycles; it is at most ``max_age_s`` stale in the cached text)."""

    def __init__(self, snapshot: Callable[[], Snapshot], max_age_s: float = 1.0, series: SeriesLevel = "partition"):
        self._snapshot = snapshot
        self._renderer = TextRenderer(series=series)
        self._lock = threading.Lock()
        self._key: tuple[int, int, int] | None = None
        self._body = b""
        self._max_age_s = max_age_s

    def render(self) -> bytes:
        snap = self._snapshot()
        with self._lock:
            key = (id(snap), snap.seq, int(time.monotonic() / self._max_age_s))
            if key != self._key:
                self._body = self._renderer.render(snap)
                self._key = key
            return self._body
