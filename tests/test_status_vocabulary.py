"""One status vocabulary: every Grafana value mapping, every alert threshold on a status metric, the exporters'
HELP texts and the canary's exit codes agree with the enums in mirrorwatch.core.status, and no other module
keeps its own list of status names."""

from __future__ import annotations

import ast
import json
import re
from enum import IntEnum
from pathlib import Path

import pytest
import yaml

from mirrorwatch.canary.status import EXIT_CODES
from mirrorwatch.core.status import CanaryStatus, GroupStatus, PartitionStatus, codes_help
from mirrorwatch.grafana_build import promql

STATUS_METRICS: dict[str, type[IntEnum]] = {
    "mirrorwatch_group_status": GroupStatus,
    "mirrorwatch_partition_status": PartitionStatus,
    "mirrorwatch_canary_status": CanaryStatus,
}
PACKAGE = Path(__file__).resolve().parents[1] / "mirrorwatch"


def status_metric_of(expr: str) -> type[IntEnum] | None:
    found = {enum for metric, enum in STATUS_METRICS.items() if metric in expr}
    assert len(found) <= 1, f"one status metric per query: {expr}"
    return found.pop() if found else None


def value_mapped_panels() -> list[tuple[str, type[IntEnum], dict]]:
    """(panel title, the status enum its queries read, its value mappings) for every panel that maps values."""
    out = []
    for path in sorted(promql.DASHBOARDS.glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            mappings = panel.get("fieldConfig", {}).get("defaults", {}).get("mappings") or []
            exprs = [t["expr"] for t in panel.get("targets", [])]
            enums = {status_metric_of(e) for e in exprs} - {None}
            if enums:
                assert len(enums) == 1, f"{panel['title']}: one status metric per panel"
                out.append((panel["title"], enums.pop(), mappings))
            elif mappings:
                # a mapping on a panel that shows no status metric must not look like a status code mapping
                texts = {o["text"] for m in mappings for o in m["options"].values()}
                assert not texts & {s.name for e in STATUS_METRICS.values() for s in e}, panel["title"]
    return out


def test_every_status_panel_maps_every_code_to_its_enum_name():
    panels = value_mapped_panels()
    assert {enum for _, enum, _ in panels} == set(STATUS_METRICS.values())  # each status metric is shown somewhere
    for title, enum, mappings in panels:
        assert len(mappings) == 1 and mappings[0]["type"] == "value", title
        options = mappings[0]["options"]
        assert {int(code): o["text"] for code, o in options.items()} == {s.value: s.name for s in enum}, title
        assert all(o["index"] == int(code) for code, o in options.items()), title


def alert_conditions() -> list[tuple[str, type[IntEnum], list[tuple[str, float]]]]:
    """(alert name, status enum, its comparisons) for each Prometheus alert on a status metric, recording rules
    expanded (flow_group:mirrorwatch_group_status:max reads mirrorwatch_group_status)."""
    doc = promql.load_rules()
    out = []
    for rule in promql.rules_of(doc, "alert"):
        query, ops = promql.split_condition(rule["expr"])
        enum = status_metric_of(promql.expand_recording_rules(query, doc))
        if enum is not None:
            out.append((rule["alert"], enum, ops))
    return out


def codes_selected(ops: list[tuple[str, float]], enum: type[IntEnum]) -> set[IntEnum]:
    compare = {
        ">=": float.__ge__,
        "<=": float.__le__,
        "==": float.__eq__,
        "!=": float.__ne__,
        ">": float.__gt__,
        "<": float.__lt__,
    }
    return {s for s in enum if all(compare[op](float(s.value), num) for op, num in ops)}


# Which statuses each status alert means to fire on: written as enum members, checked against the numbers.
EXPECTED_ALERTS = {
    # ERR through REWIND; not NOTFOUND, not UNKNOWN
    "MirrorwatchEvaluatorError": (
        GroupStatus,
        {GroupStatus.ERR, GroupStatus.STOP, GroupStatus.STALL, GroupStatus.REWIND},
    ),
    "MirrorwatchCanaryCritical": (CanaryStatus, {CanaryStatus.CRITICAL}),
    "MirrorwatchCanaryUnknown": (CanaryStatus, {CanaryStatus.UNKNOWN}),
}


def test_prometheus_alert_thresholds_select_the_intended_statuses():
    conditions = alert_conditions()
    assert {name for name, _, _ in conditions} == set(EXPECTED_ALERTS)
    for name, enum, ops in conditions:
        expected_enum, expected = EXPECTED_ALERTS[name]
        assert enum is expected_enum, name
        assert codes_selected(ops, enum) == expected, f"{name}: {ops} selects {codes_selected(ops, enum)}"


def test_grafana_alert_thresholds_select_the_intended_statuses():
    doc = yaml.safe_load(promql.GRAFANA_ALERTS.read_text())
    rules = {r["title"]: r for g in doc["groups"] for r in g["rules"]}
    for name, (enum, expected) in EXPECTED_ALERTS.items():
        models = {d["refId"]: d["model"] for d in rules[name]["data"]}
        assert status_metric_of(models["A"]["expr"]) is enum, name
        ops = [
            (op, float(num))
            for op, num in re.findall(
                r"\$B\s*(>=|<=|==|!=|>|<)\s*(-?\d+(?:\.\d+)?)", models[rules[name]["condition"]]["expression"]
            )
        ]
        assert codes_selected(ops, enum) == expected, f"{name}: {ops}"


@pytest.mark.parametrize("enum", [PartitionStatus, GroupStatus, CanaryStatus])
def test_codes_are_dense_from_zero(enum):
    # Grafana's value mappings, numpy arrays indexed by code and the exit codes all assume 0..n-1
    assert [s.value for s in enum] == list(range(len(enum)))


def test_help_texts_and_exit_codes_come_from_the_enums():
    assert codes_help(GroupStatus) == "0 OK, 1 WARN, 2 ERR, 3 STOP, 4 STALL, 5 REWIND, 6 NOTFOUND, 7 UNKNOWN"
    assert codes_help(PartitionStatus) == "0 OK, 1 WARN, 2 STOP, 3 STALL, 4 REWIND, 5 UNKNOWN, 6 LOST"
    assert EXIT_CODES == {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}


STATUS_NAMES = {s.name for e in STATUS_METRICS.values() for s in e}


def status_name_collections(path: Path) -> list[int]:
    """Lines of list/tuple/set/dict literals holding three or more status names: a private copy of the vocabulary
    (two are allowed: the page's traffic-light words include OK and UNKNOWN)."""
    tree = ast.parse(path.read_text())
    exported = {
        id(node.value)
        for node in ast.walk(tree)  # __all__ lists names of objects, not statuses
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    }
    lines = []
    for node in ast.walk(tree):
        if id(node) in exported:
            continue
        items = (
            node.elts
            if isinstance(node, (ast.List, ast.Tuple, ast.Set))
            else node.values
            if isinstance(node, ast.Dict)
            else []
        )
        names = [i.value for i in items if isinstance(i, ast.Constant) and i.value in STATUS_NAMES]
        if len(names) >= 3:
            lines.append(node.lineno)
    return lines


def test_no_module_keeps_its_own_status_list():
    offenders = {
        str(p.relative_to(PACKAGE)): status_name_collections(p)
        for p in PACKAGE.rglob("*.py")
        if p != PACKAGE / "core" / "status.py"
    }
    assert {p: lines for p, lines in offenders.items() if lines} == {}


def test_metrics_contract_lists_the_enum_codes():
    """docs/metrics.md, the metrics contract, spells each status gauge's codes as the enum does."""
    contract = (PACKAGE.parent / "docs" / "metrics.md").read_text()
    for metric, enum in STATUS_METRICS.items():
        line = next(line for line in contract.splitlines() if line.startswith(f"| `{metric}` "))
        assert codes_help(enum) in line, f"docs/metrics.md: {metric} should list {codes_help(enum)}"
