"""Generate mirrorwatch's Grafana files from code: the dashboard JSON and the Grafana-managed alert rules (and
the Helm chart's verbatim copy of the Prometheus rule file, deploy/helm/mirrorwatch/files/).

    scripts/build-grafana            # rewrite the checked-in files (python -m mirrorwatch.grafana_build)
    scripts/build-grafana --check    # exit 1 when a checked-in file differs from what would be generated

The dashboard is built with Grafana's SDK (``dashboard.py`` and its rows, grafana-foundation-sdk). The alert rules are
translated from grafana/prometheus/mirrorwatch-rules.yml (the single source of the alerts), so the two alert
sets cannot drift apart unnoticed (tests/test_grafana_rules.py checks). They stay hand-built dicts: the SDK
models the alerting HTTP API's rule (with its folderUID, ruleGroup and orgID on every rule, which the
provisioning file format puts on the group instead), not the file-provisioning document (apiVersion, groups
with orgId, name, folder) that Grafana reads from provisioning/alerting/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from . import promql
from .dashboard import flows_dashboard

HERE = promql.HERE  # the repository's grafana/ folder: plain files, this package writes two of them
# Helm's .Files reads only inside the chart, so the chart's PrometheusRule renders from a copy of the rule file.
HELM_RULES = HERE.parent / "deploy" / "helm" / "mirrorwatch" / "files" / "mirrorwatch-rules.yml"
DATASOURCE_UID = "mirrorwatch-prometheus"  # the uid grafana/provisioning/datasources/prometheus.yml gives
GRAFANA_FOLDER = "mirrorwatch"
GRAFANA_INTERVAL = "1m"  # Grafana rule-group evaluation interval (Prometheus uses its global interval)


# ------------------------------------------------------------------------------------- Grafana alert rules
# Grafana-managed alerting has no inhibition rules. What grafana/alertmanager/alertmanager.yml inhibits is left
# out of the Grafana queries instead, with `unless` on the signal of the alert that would inhibit it
# (docs/alerts.md, "What differs"): a flow in trouble or touching an unreachable cluster has only its one page.
# Unlike an inhibition this also restarts the silenced alert's `for:`, so recovery cannot page what was silenced.
_FLOW_SILENCED = (
    "unless on (flow, source, target) "
    "(flow:mirrorwatch_flow_trouble:cause > 0 or on (flow, source, target) flow_cluster:mirrorwatch_cluster_up:max == 0)"
)
_MIRROR_JOB_SILENCED = (
    'unless on (job) label_replace(max(flow:mirrorwatch_flow_trouble:cause == 1), "job", "mirrorwatch-mirror", "", "")'
)
GRAFANA_UNLESS = {
    "MirrorwatchFlowInTrouble": "unless on (flow, source, target) (max by (flow, source, target) (mirrorwatch_records_lost) > 0 or on (flow, source, target) sum by (flow, source, target) (mirrorwatch_mirror_records_lost_total) > 0)",
    "MirrorwatchExporterDown": _MIRROR_JOB_SILENCED,
    "MirrorwatchServiceWedged": _MIRROR_JOB_SILENCED + " unless on () (max by (cluster) (mirrorwatch_cluster_up) == 0)",
    **dict.fromkeys(
        [
            "MirrorwatchTrueLagHigh",
            "MirrorwatchRpoHigh",
            "MirrorwatchEvaluatorError",
            "MirrorwatchCanaryCritical",
            "MirrorwatchCanaryUnknown",
            "MirrorwatchHeartbeatStale",
            "MirrorwatchMonitorSampleStale",
            "MirrorwatchTranslationCoverageLow",
            "MirrorwatchHangingTransaction",
            "MirrorwatchMm2ConnectorFailed",
            "MirrorwatchMm2ConnectorPaused",
            "MirrorwatchMm2ConnectUnreachable",
        ],
        _FLOW_SILENCED,
    ),
}


def grafana_query(name: str, query: str, doc: dict[str, Any]) -> str:
    """The alert's query with recording rules expanded and, where Alertmanager would inhibit it, its silencer."""
    unless = GRAFANA_UNLESS.get(name)
    if unless is None:
        return promql.expand_recording_rules(query, doc)
    return f"({promql.expand_recording_rules(query, doc)}) {promql.expand_recording_rules(unless, doc)}"


def grafana_template(text: str) -> str:
    # Grafana exposes the reduced number as $values.B.Value; $labels works the same as in Prometheus.
    return text.replace("$value ", "$values.B.Value ").replace("$value}", "$values.B.Value}")


def grafana_rule(rule: dict[str, Any], doc: dict[str, Any]) -> dict[str, Any]:
    query, ops = promql.split_condition(rule["expr"])
    condition = " && ".join(f"$B {op} {num:g}" for op, num in ops)
    return {
        "uid": rule["alert"].lower()[:40],
        "title": rule["alert"],
        "condition": "C",
        "data": [
            {
                "refId": "A",
                "relativeTimeRange": {"from": 600, "to": 0},
                "datasourceUid": DATASOURCE_UID,
                "model": {
                    "refId": "A",
                    "expr": grafana_query(rule["alert"], query, doc),
                    "instant": True,
                    "range": False,
                    "intervalMs": 1000,
                    "maxDataPoints": 43200,
                },
            },
            # dropNN: a NaN sample is "no value", as in Prometheus where NaN > x is false
            {
                "refId": "B",
                "datasourceUid": "__expr__",
                "model": {
                    "refId": "B",
                    "type": "reduce",
                    "expression": "A",
                    "reducer": "last",
                    "settings": {"mode": "dropNN"},
                },
            },
            {
                "refId": "C",
                "datasourceUid": "__expr__",
                "model": {"refId": "C", "type": "math", "expression": condition},
            },
        ],
        "for": rule.get("for", "0m"),
        # No series is "nothing wrong" in Prometheus; make Grafana agree instead of raising NoData alerts.
        "noDataState": "OK",
        "execErrState": "Error",
        "labels": dict(rule.get("labels", {})),
        "annotations": {k: grafana_template(v) for k, v in rule.get("annotations", {}).items()},
        "isPaused": False,
    }


def grafana_alerts() -> dict[str, Any]:
    doc = promql.load_rules()
    return {
        "apiVersion": 1,
        "groups": [
            {
                "orgId": 1,
                "name": "mirrorwatch",
                "folder": GRAFANA_FOLDER,
                "interval": GRAFANA_INTERVAL,
                "rules": [grafana_rule(r, doc) for r in promql.rules_of(doc, "alert")],
            }
        ],
    }


# ----------------------------------------------------------------------------------------------- outputs
HEADER = (
    "# GENERATED by mirrorwatch/grafana_build/build.py from grafana/prometheus/mirrorwatch-rules.yml; do not edit.\n"
    "# Grafana-managed alert rules equivalent to the Prometheus alerts (differences: docs/alerts.md).\n"
)


def outputs() -> dict[Path, str]:
    return {
        HERE / "dashboards" / "mirrorwatch-flows.json": json.dumps(
            flows_dashboard(), cls=JSONEncoder, indent=2, ensure_ascii=False
        )
        + "\n",
        promql.GRAFANA_ALERTS: HEADER
        + yaml.safe_dump(grafana_alerts(), sort_keys=False, width=200, allow_unicode=True),
        HELM_RULES: promql.RULES.read_text(),
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
