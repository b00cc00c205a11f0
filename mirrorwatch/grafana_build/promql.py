"""Every PromQL expression the grafana/ files contain, and the small parsing the generator and tests share.

Sources: the Prometheus rule file (recording and alert rules), the Grafana-managed alert rules, and every
dashboard panel target and label_values() variable query. Grafana template variables are replaced by
values that keep the expression valid PromQL and match everything (``=~"$flow"`` becomes ``=~".*"``), so a
test can run each expression against a real Prometheus.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

# the repository's grafana/ folder (the builder is a development tool: it runs from a checkout)
HERE = Path(__file__).resolve().parents[2] / "grafana"
RULES = HERE / "prometheus" / "mirrorwatch-rules.yml"
DASHBOARDS = HERE / "dashboards"
GRAFANA_ALERTS = HERE / "provisioning" / "alerting" / "mirrorwatch-alerts.yml"

# Grafana's built-in interval variables and our dashboard variables, as PromQL-valid stand-ins.
VARIABLES = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
    "flow": ".*",
    "mirror": ".*",
    "topic": ".*",
    "datasource": "prometheus",
}
_VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$([A-Za-z_]\w*)")  # not $1: label_replace's capture reference
# The trailing comparisons of an alert expression: "<query> > 10000", "<query> >= 2 <= 5".
_CONDITION = re.compile(r"((?:\s*(?:>=|<=|==|!=|>|<)\s*-?\d+(?:\.\d+)?)+)\s*$")
_COMPARISON = re.compile(r"(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?)")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*\w+\s*\)\s*$")


def substitute_variables(expr: str) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in VARIABLES:
            raise KeyError(f"unknown template variable ${name} in {expr!r}")
        return VARIABLES[name]

    return _VAR.sub(repl, expr)


def split_condition(expr: str) -> tuple[str, list[tuple[str, float]]]:
    """``"q > 10 <= 20"`` -> ``("q", [(">", 10.0), ("<=", 20.0)])``; an expression without one raises."""
    m = _CONDITION.search(expr)
    if not m:
        raise ValueError(f"alert expression does not end in '<op> <number>': {expr!r}")
    ops = [(op, float(num)) for op, num in _COMPARISON.findall(m.group(1))]
    return expr[: m.start()].strip(), ops


def load_rules(path: Path = RULES) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())  # the rules file: a mapping with "groups"
    return doc


def rules_of(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    """kind 'alert' or 'record'."""
    return [r for g in doc["groups"] for r in g["rules"] if kind in r]


def expand_recording_rules(expr: str, doc: dict[str, Any]) -> str:
    """Replace recording-rule names by their (parenthesised) expressions, recursively, so the result does
    not depend on the rule file being loaded. A recording-rule name with its own label matchers is refused:
    it cannot be expanded by text."""
    records = {r["record"]: r["expr"] for r in rules_of(doc, "record")}
    if expr.strip() in records:  # the whole query is one recording rule: no parentheses needed
        expr = records[expr.strip()]
    for _ in range(10):
        changed = False
        for name, body in records.items():
            pat = re.compile(r"(?<![\w:])" + re.escape(name) + r"(?![\w:])")
            if not pat.search(expr):
                continue
            if re.search(r"(?<![\w:])" + re.escape(name) + r"\s*[{\[]", expr):
                raise ValueError(f"cannot expand {name} with matchers or a range in {expr!r}")
            expr, changed = pat.sub(lambda _m: f"({body})", expr), True
        if not changed:
            return expr
    raise ValueError(f"recording rules nest too deep in {expr!r}")


def dashboard_expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        if var.get("type") == "query" and query:
            m = _LABEL_VALUES.match(query)  # label_values() is Grafana's; its selector is PromQL
            out.append((f"variable {var['name']}", m.group(1) if m else query))
    for panel in dashboard.get("panels", []):
        for target in panel.get("targets", []):
            if target.get("expr"):
                out.append((f"panel {panel['title']!r} {target.get('refId', '')}", target["expr"]))
    return out


def grafana_alert_queries(doc: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for group in doc["groups"]:
        for rule in group["rules"]:
            for data in rule["data"]:
                if data["datasourceUid"] != "__expr__":
                    out.append((f"grafana alert {rule['title']} {data['refId']}", data["model"]["expr"]))
    return out


def all_promql_expressions(substitute: bool = True) -> list[tuple[str, str]]:
    """[(where, expr)] for every PromQL expression in grafana/, variables substituted unless told not to."""
    found: list[tuple[str, str]] = []
    for rule in rules_of(load_rules(), "record") + rules_of(load_rules(), "alert"):
        found.append((f"rule {rule.get('record') or rule.get('alert')}", rule["expr"]))
    found += grafana_alert_queries(yaml.safe_load(GRAFANA_ALERTS.read_text()))
    for path in sorted(DASHBOARDS.glob("*.json")):
        found += [(f"{path.name}: {w}", e) for w, e in dashboard_expressions(json.loads(path.read_text()))]
    return [(w, substitute_variables(e) if substitute else e) for w, e in found]
