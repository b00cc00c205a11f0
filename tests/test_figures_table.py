"""docs/metrics.md's figures table is checked against the code, so that it cannot drift: every function it names
as where a figure is computed exists, every test it names as checking the bound exists, and every metric it
names is one that docs/metrics.md lists (and the monitor's exporter exports, for the monitor's own)."""

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
