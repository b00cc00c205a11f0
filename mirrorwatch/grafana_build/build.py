"""Generate mirrorwatch's Grafana files from code: the dashboard JSON and the Grafana-managed alert rules.

    scripts/build-grafana            # rewrite the checked-in files (python -m mirrorwatch.grafana_build)
    scripts/build-grafana --check    # exit 1 when a checked-in file differs from what would be generated

Plain dicts, no Grafana SDK: the JSON is small, and a dependency would pin a Grafana schema version for no
gain. The alert rules are translated from grafana/prometheus/mirrorwatch-rules.yml (the single source of
the alerts), so the two alert sets cannot drift apart unnoticed (tests/test_grafana_rules.py checks).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from ..core.status import CanaryStatus, GroupStatus, PartitionStatus
from . import promql

HERE = promql.HERE  # the repository's grafana/ folder: plain files, this package writes two of them
DATASOURCE_UID = "mirrorwatch-prometheus"  # the uid grafana/provisioning/datasources/prometheus.yml gives
GRAFANA_FOLDER = "mirrorwatch"
GRAFANA_INTERVAL = "1m"  # Grafana rule-group evaluation interval (Prometheus uses its global interval)

# ---------------------------------------------------------------------------------------------- dashboard
DS = {"type": "prometheus", "uid": "${datasource}"}
F = 'flow=~"$flow"'
FT = 'flow=~"$flow",topic=~"$topic"'
# Value mappings: the status enums give code and text, these give each status its colour.
GROUP_COLORS = {GroupStatus.OK: "green", GroupStatus.WARN: "yellow", GroupStatus.ERR: "red", GroupStatus.STOP: "red",
                GroupStatus.STALL: "red", GroupStatus.REWIND: "orange", GroupStatus.NOTFOUND: "purple",
                GroupStatus.UNKNOWN: "text"}
CANARY_COLORS = {CanaryStatus.OK: "green", CanaryStatus.WARNING: "yellow", CanaryStatus.CRITICAL: "red",
                 CanaryStatus.UNKNOWN: "text"}
PARTITION_COLORS = {PartitionStatus.OK: "green", PartitionStatus.WARN: "yellow", PartitionStatus.STOP: "red",
                    PartitionStatus.STALL: "red", PartitionStatus.REWIND: "orange", PartitionStatus.UNKNOWN: "text"}


def mappings(colors: dict[GroupStatus, str] | dict[CanaryStatus, str] | dict[PartitionStatus, str]) -> list[dict]:
    """One value mapping per status code: its enum name as text, in code order."""
    return [{"type": "value", "options": {str(s.value): {"text": s.name, "color": colors[s], "index": s.value}
                                          for s in sorted(colors)}}]


def thresholds(*steps: tuple[float | None, str]) -> dict:
    return {"mode": "absolute", "steps": [{"value": v, "color": c} for v, c in steps]}


def target(expr: str, legend: str = "", ref: str = "A", **extra) -> dict:
    return {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend or "__auto", **extra}


class Layout:
    """Places panels left to right on Grafana's 24-column grid and numbers them."""

    def __init__(self) -> None:
        self.panels: list[dict] = []
        self.x = self.y = self.row_h = 0

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append({"type": "row", "title": title, "collapsed": False, "panels": [],
                            "id": len(self.panels) + 1, "gridPos": {"x": 0, "y": self.y, "w": 24, "h": 1}})
        self.y += 1

    def add(self, w: int, h: int, panel: dict) -> None:
        if self.x + w > 24:
            self._newline()
        panel = {"id": len(self.panels) + 1, "gridPos": {"x": self.x, "y": self.y, "w": w, "h": h},
                 "datasource": DS, **panel}
        self.panels.append(panel)
        self.x, self.row_h = self.x + w, max(self.row_h, h)

    def _newline(self) -> None:
        self.y, self.x, self.row_h = self.y + self.row_h, 0, 0


def stat(title: str, targets: list[dict], unit: str = "none", steps=((None, "green"),), maps=None,
         description: str = "") -> dict:
    return {"type": "stat", "title": title, "description": description, "targets": targets,
            "fieldConfig": {"defaults": {"unit": unit, "thresholds": thresholds(*steps), "mappings": maps or [],
                                         "color": {"mode": "thresholds"}}, "overrides": []},
            "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "background", "graphMode": "none", "textMode": "value_and_name"}}


def timeseries(title: str, targets: list[dict], unit: str = "short", description: str = "",
               threshold: float | None = None, overrides: list | None = None) -> dict:
    custom = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0, "showPoints": "never",
              "spanNulls": False, "thresholdsStyle": {"mode": "line" if threshold is not None else "off"}}
    steps = [(None, "green")] + ([(threshold, "red")] if threshold is not None else [])
    return {"type": "timeseries", "title": title, "description": description, "targets": targets,
            "fieldConfig": {"defaults": {"unit": unit, "custom": custom, "thresholds": thresholds(*steps)},
                            "overrides": overrides or []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}}


def state_timeline(title: str, targets: list[dict], maps: list[dict], description: str = "") -> dict:
    return {"type": "state-timeline", "title": title, "description": description, "targets": targets,
            "fieldConfig": {"defaults": {"mappings": maps, "color": {"mode": "thresholds"},
                                         "thresholds": thresholds((None, "text"))}, "overrides": []},
            "options": {"showValue": "never", "mergeValues": True, "rowHeight": 0.9}}


def lag_by_kind(kind: str) -> str:
    return f'sum by (flow, topic) (mirrorwatch_lag_records{{kind="{kind}",{FT}}})'


def quantile(q: str, metric: str, rng: str = "$__rate_interval", by: str = "flow") -> str:
    return f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{F}}}[{rng}])))"


def flows_dashboard() -> dict:
    L = Layout()
    L.row("Overview")
    L.add(6, 5, stat("Evaluator status (worst group)", [target(f"max by (flow) (mirrorwatch_group_status{{{F}}})", "{{flow}}")],
                     maps=mappings(GROUP_COLORS)))
    L.add(6, 5, stat("Canary status", [target(f"max by (flow) (mirrorwatch_canary_status{{{F}}})", "{{flow}}")],
                     maps=mappings(CANARY_COLORS)))
    L.add(4, 5, stat("True lag", [target(f'sum by (flow) (mirrorwatch_lag_records{{kind="true",{F}}})', "{{flow}}")],
                     steps=((None, "green"), (10000, "red")), description="Alert threshold: 10000 records for 5m."))
    L.add(4, 5, stat("Time lag", [target(f"max by (flow) (mirrorwatch_time_lag_seconds{{{F}}})", "{{flow}}")],
                     unit="s", steps=((None, "green"), (120, "red"))))
    L.add(4, 5, stat("Heartbeat age", [target(f"max by (flow) (mirrorwatch_canary_heartbeat_age_seconds{{{F}}})", "{{flow}}")],
                     unit="s", steps=((None, "green"), (60, "red"))))

    L.row("Lag: committed vs read vs true")
    # One panel with all three so the committed saw-tooth sits right beside the flat true lag.
    L.add(24, 9, timeseries(
        "Committed, read and true lag per flow",
        [target(f"sum by (flow, kind) (mirrorwatch_lag_records{{{FT}}})", "{{flow}} {{kind}}")],
        description="Committed lag saw-tooths with the mirror's commit interval and is not alerted on; "
                    "true lag (from offset syncs) is what the target is really missing. Read lag under-reports.",
        threshold=10000,
        overrides=[
            {"matcher": {"id": "byRegexp", "options": ".* committed"},
             "properties": [{"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                            {"id": "custom.fillOpacity", "value": 10}]},
            {"matcher": {"id": "byRegexp", "options": ".* true"},
             "properties": [{"id": "custom.lineWidth", "value": 3}]}]))
    for kind in ("committed", "read", "true"):
        L.add(8, 8, timeseries(f"{kind.capitalize()} lag by topic", [target(lag_by_kind(kind), "{{flow}} {{topic}}")],
                               threshold=10000 if kind == "true" else None))

    L.row("Throughput")
    L.add(12, 8, timeseries("Mirrored records/s by topic", [target(
        f"sum by (flow, topic) (rate(mirrorwatch_mirror_records_total{{{FT}}}[$__rate_interval]))", "{{flow}} {{topic}}")],
        unit="rps"))
    L.add(12, 8, timeseries("Mirrored bytes/s by topic", [target(
        f"sum by (flow, topic) (rate(mirrorwatch_mirror_bytes_total{{{FT}}}[$__rate_interval]))", "{{flow}} {{topic}}")],
        unit="Bps"))
    L.add(8, 7, timeseries("Replication latency (ack − record time)", [
        target(quantile(q, "mirrorwatch_mirror_replication_latency_seconds"), f"{{{{flow}}}} p{int(float(q) * 100)}", ref)
        for q, ref in (("0.5", "A"), ("0.99", "B"))], unit="s"))
    L.add(8, 7, timeseries("Produce errors/s", [target(
        f"sum by (flow, retriable) (rate(mirrorwatch_mirror_produce_errors_total{{{FT}}}[$__rate_interval]))",
        "{{flow}} retriable={{retriable}}")], unit="rps"))
    L.add(8, 7, timeseries("In-flight records and rebalances", [
        target(f"sum by (flow) (mirrorwatch_mirror_in_flight_records{{{F}}})", "{{flow}} in flight"),
        target(f"sum by (flow) (increase(mirrorwatch_mirror_rebalances_total{{{F}}}[$__rate_interval]))",
               "{{flow}} rebalances", "B")]))

    L.row("Time lag and status")
    L.add(12, 8, timeseries("Time lag by topic (oldest record not yet on the target)", [target(
        f"max by (flow, topic) (mirrorwatch_time_lag_seconds{{{FT}}})", "{{flow}} {{topic}}")], unit="s", threshold=120))
    L.add(12, 8, timeseries("Catch-up forecast", [target(
        f"max by (flow, topic) (mirrorwatch_catch_up_seconds{{{FT}}})", "{{flow}} {{topic}}")], unit="s",
        description="+Inf: not catching up."))
    L.add(12, 8, state_timeline("Group status", [target(
        f"max by (flow, group) (mirrorwatch_group_status{{{F}}})", "{{flow}} {{group}}")],
        mappings(GROUP_COLORS)))
    L.add(12, 8, state_timeline("Partition status", [target(
        f"max by (flow, topic, partition) (mirrorwatch_partition_status{{{FT}}})", "{{topic}}/{{partition}}")],
        mappings(PARTITION_COLORS)))

    L.row("Canary and heartbeats")
    L.add(12, 8, timeseries("Canary round trip percentiles", [
        target(quantile(q, "mirrorwatch_canary_round_trip_seconds"), f"{{{{flow}}}} p{int(float(q) * 100)}", ref)
        for q, ref in (("0.5", "A"), ("0.9", "B"), ("0.99", "C"))], unit="s"))
    L.add(12, 8, {"type": "heatmap", "title": "Canary round trip heatmap", "targets": [target(
        f"sum by (le) (increase(mirrorwatch_canary_round_trip_seconds_bucket{{{F}}}[$__rate_interval]))",
        "{{le}}", format="heatmap")],
        "options": {"calculate": False, "yAxis": {"unit": "s"}, "cellGap": 1,
                    "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64}},
        "fieldConfig": {"defaults": {}, "overrides": []}})
    L.add(12, 8, timeseries("Canary lost, duplicate, reordered events", [
        target(f"sum by (flow) (increase(mirrorwatch_canary_{m}_total{{{F}}}[$__rate_interval]))", f"{{{{flow}}}} {m}", ref)
        for m, ref in (("lost", "A"), ("duplicates", "B"), ("reordered", "C"))]))
    L.add(12, 8, timeseries("Heartbeat age", [target(
        f"max by (flow) (mirrorwatch_canary_heartbeat_age_seconds{{{F}}})", "{{flow}}")], unit="s", threshold=60))

    L.row("SLO and collector health")
    # Needs the recording rules loaded (flow:mirrorwatch_time_lag_slo:ok).
    L.add(8, 6, stat("Time lag SLO: share of time with time lag ≤ 60 s", [target(
        f"avg by (flow) (avg_over_time(flow:mirrorwatch_time_lag_slo:ok{{{F}}}[$__range]))", "{{flow}}")],
        unit="percentunit", steps=((None, "red"), (0.99, "green")),
        description="Objective: 99 % of the time. Needs grafana/prometheus/mirrorwatch-rules.yml loaded."))
    L.add(8, 6, stat("Canary delivery: share of probes not lost", [target(
        f"1 - sum by (flow) (increase(mirrorwatch_canary_lost_total{{{F}}}[$__range])) / "
        f"clamp_min(sum by (flow) (increase(mirrorwatch_canary_probes_total{{{F}}}[$__range])), 1)", "{{flow}}")],
        unit="percentunit", steps=((None, "red"), (0.999, "green"))))
    L.add(8, 6, stat("Canary round trip p99 over the range", [target(
        quantile("0.99", "mirrorwatch_canary_round_trip_seconds", "$__range"), "{{flow}}")], unit="s"))
    L.add(12, 7, state_timeline("Exporters and clusters up", [
        target('up{job=~"mirrorwatch-mirror|mirrorwatch-canary|mirrorwatch-monitor"}', "{{job}} {{instance}}"),
        target("mirrorwatch_cluster_up", "cluster {{cluster}}", "B")],
        [{"type": "value", "options": {"0": {"text": "DOWN", "color": "red"}, "1": {"text": "UP", "color": "green"}}}]))
    L.add(12, 7, timeseries("Monitor sample age and evaluator window complete", [
        target(f"max by (flow) (mirrorwatch_sample_age_seconds{{{F}}})", "{{flow}} sample age (s)"),
        target(f"min by (flow) (mirrorwatch_window_complete_ratio{{{F}}})", "{{flow}} window complete", "B")]))

    variable = lambda name, query, label: {  # noqa: E731
        "type": "query", "name": name, "label": label, "datasource": DS, "query": {"query": query, "refId": name},
        "definition": query, "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
        "current": {"text": "All", "value": "$__all"}, "sort": 1}
    return {
        "uid": "mirrorwatch-flows", "title": "mirrorwatch: mirror flows", "tags": ["mirrorwatch", "kafka"],
        "editable": True, "schemaVersion": 39, "version": 1, "refresh": "30s", "timezone": "",
        "time": {"from": "now-1h", "to": "now"}, "graphTooltip": 1, "annotations": {"list": []}, "links": [],
        "templating": {"list": [
            {"type": "datasource", "name": "datasource", "label": "Prometheus", "query": "prometheus",
             "current": {}, "hide": 0},
            variable("flow", 'label_values(mirrorwatch_lag_records{flow!=""}, flow)', "Flow"),
            variable("topic", 'label_values(mirrorwatch_lag_records{flow=~"$flow"}, topic)', "Topic")]},
        "panels": L.panels,
    }


# ------------------------------------------------------------------------------------- Grafana alert rules
def grafana_template(text: str) -> str:
    # Grafana exposes the reduced number as $values.B.Value; $labels works the same as in Prometheus.
    return text.replace("$value ", "$values.B.Value ").replace("$value}", "$values.B.Value}")


def grafana_rule(rule: dict, doc: dict) -> dict:
    query, ops = promql.split_condition(rule["expr"])
    condition = " && ".join(f"$B {op} {num:g}" for op, num in ops)
    return {
        "uid": rule["alert"].lower()[:40], "title": rule["alert"], "condition": "C",
        "data": [
            {"refId": "A", "relativeTimeRange": {"from": 600, "to": 0}, "datasourceUid": DATASOURCE_UID,
             "model": {"refId": "A", "expr": promql.expand_recording_rules(query, doc), "instant": True,
                       "range": False, "intervalMs": 1000, "maxDataPoints": 43200}},
            # dropNN: a NaN sample is "no value", as in Prometheus where NaN > x is false
            {"refId": "B", "datasourceUid": "__expr__",
             "model": {"refId": "B", "type": "reduce", "expression": "A", "reducer": "last",
                       "settings": {"mode": "dropNN"}}},
            {"refId": "C", "datasourceUid": "__expr__",
             "model": {"refId": "C", "type": "math", "expression": condition}},
        ],
        "for": rule.get("for", "0m"),
        # No series is "nothing wrong" in Prometheus; make Grafana agree instead of raising NoData alerts.
        "noDataState": "OK", "execErrState": "Error",
        "labels": dict(rule.get("labels", {})),
        "annotations": {k: grafana_template(v) for k, v in rule.get("annotations", {}).items()},
        "isPaused": False,
    }


def grafana_alerts() -> dict:
    doc = promql.load_rules()
    return {"apiVersion": 1, "groups": [{
        "orgId": 1, "name": "mirrorwatch", "folder": GRAFANA_FOLDER, "interval": GRAFANA_INTERVAL,
        "rules": [grafana_rule(r, doc) for r in promql.rules_of(doc, "alert")]}]}


# ----------------------------------------------------------------------------------------------- outputs
HEADER = ("# GENERATED by mirrorwatch/grafana_build/build.py from grafana/prometheus/mirrorwatch-rules.yml; do not edit.\n"
          "# Grafana-managed alert rules equivalent to the Prometheus alerts (differences: docs/alerts.md).\n")


def outputs() -> dict[Path, str]:
    return {
        HERE / "dashboards" / "mirrorwatch-flows.json": json.dumps(flows_dashboard(), indent=2, ensure_ascii=False) + "\n",
        promql.GRAFANA_ALERTS: HEADER + yaml.safe_dump(grafana_alerts(), sort_keys=False, width=200, allow_unicode=True),
    }


def main(argv: list[str]) -> int:
    stale = [p for p, text in outputs().items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"out of date: {p} (run scripts/build-grafana)")
        return 1 if stale else 0
    for p, text in outputs().items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return 0
