"""The benchmarks' JSON line (bench/jsonline.py): its shape, JSON-safe values, flattening and comparing runs.
Pure logic; no Kafka, no benchmark is run."""

from __future__ import annotations

import io
import json
import math
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from bench.jsonline import BenchRun, clean, compare, flatten, main, read_lines

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize(
    "value, expected",
    [
        (1.23456789, 1.23457),
        (float("nan"), None),
        (math.inf, None),
        ({"a": (1, float("-inf"))}, {"a": [1, None]}),
        ({3: "x"}, {"3": "x"}),
        (True, True),
    ],
)
def test_clean(value, expected):
    assert clean(value) == expected


def test_flatten():
    assert flatten({"a": {"b": [1, {"c": 2}]}, "d": 3}) == {"a.b.0": 1, "a.b.1.c": 2, "d": 3}


def emitted(run_body) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        try:
            with BenchRun("demo", {"records": 10}) as run:
                run_body(run)
        except RuntimeError:
            pass
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith('{"bench":"demo"')
    return json.loads(lines[0])


def test_one_line_with_the_documented_keys():
    record = emitted(lambda run: run.figures.update({"p99_ms": float("nan"), "records_per_s": 12.5}))
    assert list(record)[:8] == ["bench", "schema", "status", "commit", "dirty", "timestamp", "elapsed_s", "machine"]
    assert record["status"] == "ok" and record["params"] == {"records": 10}
    assert record["figures"] == {"p99_ms": None, "records_per_s": 12.5}
    assert {"cores", "load_1m_start", "load_1m_end"} <= set(record["machine"])


def test_a_failed_run_still_reports_what_it_measured():
    def body(run):
        run.figures["first_part_ms"] = 3.0
        raise RuntimeError("broker gone")

    record = emitted(body)
    assert record["status"] == "failed" and record["error"] == "RuntimeError: broker gone"
    assert record["figures"] == {"first_part_ms": 3.0}


def test_compare_rows_and_cli(tmp_path):
    old = {"bench": "b", "commit": "aaa", "timestamp": "t0", "params": {"n": 1}, "figures": {"x_ms": 2.0, "gone": 1}}
    new = {"bench": "b", "commit": "bbb", "timestamp": "t1", "params": {"n": 2}, "figures": {"x_ms": 3.0}}
    rows = compare(old, new)
    assert "parameter n: 1 → 2" in rows[1]
    assert any(r.split()[0] == "x_ms" and r.split()[-1] == "1.500" for r in rows)
    assert any(r.split()[0] == "gone" and r.split()[-1] == "-" for r in rows)
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("human text\n" + json.dumps(old) + "\n")
    b.write_text(json.dumps(new) + "\n")
    assert read_lines(str(a)) == [old]
    with redirect_stdout(io.StringIO()):
        assert main([str(a), str(b)]) == 0
        assert main([str(a)]) == 2
        assert main([str(a), str(tmp_path / "missing.log")]) == 2


def test_every_bench_script_prints_its_json_line():
    # modules that scripts import (bench/README.md says which script each serves), not scripts themselves
    helpers = {
        "__init__.py",
        "analytics_fleet.py",
        "analytics_master.py",
        "analytics_sql.py",
        "common.py",
        "cputree.py",
        "jsonline.py",
        "detection_faults.py",
        "detection_floor.py",
        "detection_watch.py",
        "mm2_runs.py",
        "soak_check.py",
    }
    scripts = [p for p in BENCH.glob("*.py") if p.name not in helpers]
    assert len(scripts) >= 10
    missing = [p.name for p in scripts if f'BenchRun("{p.stem}"' not in p.read_text()]
    assert missing == []
