"""docs/metrics.md's figures table is checked against the code, so that it cannot drift: every function it names
as where a figure is computed exists, every test it names as checking the bound exists, every metric it names is
one that docs/metrics.md lists (and the monitor's exporter exports, for the monitor's own), and its "shown on"
column says Grafana, alerts and exporter exactly where the Grafana builder's panels, the alert rules and the
exporters show one of the figure's metrics."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "metrics.md"


def figure_rows() -> list[list[str]]:
    text = DOC.read_text()
    section = text.split("## Figures: where each is computed and where it is shown", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| figure ")]
    cells = [[c.strip() for c in row.strip().strip("|").split(" | ")] for row in rows]
    assert cells and all(len(c) == 6 for c in cells), "each row: figure | name | computed in | shown on | bound | test"
    return cells


ROWS = figure_rows()


def _resolve(dotted: str):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_each_figure_names_its_one_function_and_it_exists(row):
    functions = re.findall(r"`(mirrorwatch\.[\w.]+)`", row[2])
    assert functions, f"{row[0]}: 'computed in' names no mirrorwatch function"
    for dotted in functions:
        assert callable(_resolve(dotted)), dotted


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_each_bound_names_a_test_that_exists(row):
    tests = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row[5])
    assert tests, f"{row[0]}: names no test"
    for path, name in tests:
        tree = ast.parse((ROOT / path).read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in names, f"{path}::{name} does not exist"


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_each_metric_named_is_a_listed_metric(row):
    from mirrorwatch.monitor.exporter import _FAMILIES

    listed = set(re.findall(r"^\| `(mirrorwatch_\w+)` \|", DOC.read_text(), re.M))
    for metric in re.findall(r"`(mirrorwatch_\w+)", row[1]):
        assert metric in listed, f"{row[0]}: {metric} is not in docs/metrics.md's metric tables"
        if not metric.startswith(("mirrorwatch_canary_", "mirrorwatch_mirror_")):
            assert metric in _FAMILIES, f"{row[0]}: the monitor exports no {metric}"


# ------------------------------------------------------------------ "shown on", read from the surfaces themselves


def _shown_on(row: list[str]) -> set[str]:
    return {s.strip().split(" ")[0].strip("`") for s in row[3].split(",")}


def _metrics(row: list[str]) -> list[tuple[str, str | None]]:
    """(metric, its ``kind`` label or None) of each metric the row names."""
    return re.findall(r'`(mirrorwatch_\w+)(?:\{kind="(\w+)"\})?', row[1])


def _recording_rules() -> dict[str, str]:
    from mirrorwatch.grafana_build import promql

    return {r["record"]: r["expr"] for r in promql.rules_of(promql.load_rules(), "record")}


def _reads(expr: str, metric: tuple[str, str | None], records: dict[str, str], depth: int = 0) -> bool:
    """``expr`` reads ``metric`` (with that ``kind``, when the row names one), itself or through the recording rules
    it names (recursively)."""
    name, kind = metric
    for m in re.finditer(rf"(?<![\w:]){re.escape(name)}(?:_total|_bucket|_sum|_count)?(?![\w:])(\{{[^}}]*\}})?", expr):
        wanted = re.search(r'kind(=~?)"([^"]*)"', m.group(1) or "")
        if kind is None or wanted is None or re.fullmatch(wanted.group(2), kind):
            return True
    return depth < 10 and any(
        _reads(body, metric, records, depth + 1)
        for record, body in records.items()
        if re.search(rf"(?<![\w:]){re.escape(record)}(?![\w:])", expr)
    )


def _grafana_expressions() -> list[str]:
    """Every PromQL expression of the dashboards as the builder makes them (mirrorwatch.grafana_build), not as
    a checked-in file says."""
    import json

    from mirrorwatch.grafana_build import build, promql

    boards = [json.loads(text) for path, text in build.outputs().items() if path.suffix == ".json"]
    return [promql.substitute_variables(e) for board in boards for _, e in promql.dashboard_expressions(board)]


def _alert_expressions() -> list[str]:
    from mirrorwatch.grafana_build import promql

    return [r["expr"] for r in promql.rules_of(promql.load_rules(), "alert")]


GRAFANA, ALERTS = _grafana_expressions(), _alert_expressions()


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
def test_shown_on_says_exactly_where_grafana_the_alerts_and_the_exporter_show_it(row):
    """The "shown on" column against the surfaces' own code: the Grafana builder's panels, the alert rules (through
    the recording rules they read) and the monitor's exporter. A figure one of them shows is listed there; a
    surface listed there shows one of the figure's metrics."""
    from mirrorwatch.monitor.exporter import _FAMILIES

    records, shown, metrics = _recording_rules(), _shown_on(row), _metrics(row)
    on_grafana = any(_reads(e, m, records) for e in GRAFANA for m in metrics)
    on_alerts = any(_reads(e, m, records) for e in ALERTS for m in metrics)
    exported = any(m in _FAMILIES or m.startswith("mirrorwatch_canary_") for m, _ in metrics)
    assert ("Grafana" in shown) == on_grafana, f"{row[0]}: Grafana shows it: {on_grafana}; 'shown on': {row[3]}"
    assert ("alerts" in shown) == on_alerts, f"{row[0]}: an alert reads it: {on_alerts}; 'shown on': {row[3]}"
    assert ("exporter" in shown) == exported, f"{row[0]}: exported: {exported}; 'shown on': {row[3]}"
