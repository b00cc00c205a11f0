"""The analytics job on a real Spark standalone cluster (harness/spark_cluster.py): ``monitor analyze --master
spark://…`` must write exactly the tables and summary that local[2] writes for the same generated history; the
spark-submit entry point must run as a plain script."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mirrorwatch.monitor.analytics import submit
from mirrorwatch.monitor.analytics.job import TABLE_NAMES, AnalysisSettings, run_job

from .support.analytics_columns import SKETCHED

# a driver and an executor JVM per run, on a shared 2-core machine: more room than the suite's default 600 s
pytestmark = [pytest.mark.spark, pytest.mark.timeout(2400)]
BIN = Path(sys.executable).parent
TABLES = TABLE_NAMES
# differs between runs by nature: when it ran, and where it wrote
VOLATILE_SUMMARY_KEYS = {"generated_at", "tables"}
# Percentiles from merged KLL sketches (docs/analytics.md, "Percentiles"): a sketch that compacts (more than
# SKETCH_K values, as a day of 288 samples here) chooses its survivors at random and merges in the order the
# executors deliver, so two runs may answer with different values within the rank error. Only their presence
# is compared; tests/test_analytics_reference.py checks their rank.


def presence(row: dict, columns: set[str]) -> dict:
    return {k: (v is not None) if k in columns else v for k, v in row.items()}


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cluster-history")
    # small on purpose (1,152 rows): the point is where the job runs, not how much it reads
    subprocess.run(
        [
            str(BIN / "monitor"),
            "generate-history",
            "--out",
            str(path),
            "--days",
            "1",
            "--interval",
            "300",
            "--topics",
            "orders,payments",
            "--partitions",
            "2",
            "--quiet",
        ],
        check=True,
    )
    return path


@pytest.fixture(scope="module")
def reference(history, tmp_path_factory, spark) -> Path:
    """local[2]: the session shared by the analytics tests."""
    out = tmp_path_factory.mktemp("local-out")
    run_job(AnalysisSettings(str(history), str(out)))
    return out


def rows(out: Path, table: str) -> list[tuple]:
    """A table's rows in a canonical order (Spark does not promise row order across masters)."""
    data = [presence(r, SKETCHED.get(table, set())) for r in pq.read_table(out / table).to_pylist()]
    return sorted((tuple(r.items()) for r in data), key=repr)


def assert_close(got, expected, where: str) -> None:
    """Equal, except that doubles may differ in the last bits: sums of doubles may add in another order when the
    partitions sit on other executors."""
    if isinstance(got, dict) and isinstance(expected, dict):
        assert set(got) == set(expected), where
        for key in got:
            assert_close(got[key], expected[key], f"{where}.{key}")
    elif isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), where
        for i, (a, b) in enumerate(zip(got, expected)):
            assert_close(a, b, f"{where}[{i}]")
    elif isinstance(got, float) and isinstance(expected, float) and not (math.isnan(got) and math.isnan(expected)):
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), where
    else:
        assert got == expected, where


def assert_same_output(got: Path, expected: Path) -> None:
    for table in TABLES:
        left, right = rows(got, table), rows(expected, table)
        assert left or table == "sampling_gaps", f"{table} is empty"
        assert_close(left, right, table)
    summary_got = json.loads((got / "summary.json").read_text())
    summary_expected = json.loads((expected / "summary.json").read_text())
    for key in VOLATILE_SUMMARY_KEYS:
        summary_got.pop(key), summary_expected.pop(key)
    for summary in (summary_got, summary_expected):
        for key in ("committed_view", "trend"):
            summary[key] = [presence(r, SKETCHED[key]) for r in summary[key]]
    assert_close(summary_got, summary_expected, "summary")


def completed_apps(cluster) -> set[str]:
    return {app["id"] for app in cluster.state().get("completedapps", [])}


def test_monitor_analyze_on_the_standalone_cluster_equals_local(spark_cluster, history, reference, tmp_path):
    out = tmp_path / "out"
    before = completed_apps(spark_cluster)
    # a separate process: this test process already holds the local[2] session, which run_job would reuse
    result = subprocess.run(
        [
            str(BIN / "monitor"),
            "analyze",
            "--master",
            spark_cluster.master_url,
            "--history",
            str(history),
            "--out",
            str(out),
            "--quiet",
        ],
        env=spark_cluster.env(),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert_same_output(out, reference)
    # it really ran there: the master lists one more finished application, with executors on the worker
    new = completed_apps(spark_cluster) - before
    assert len(new) == 1, new


def test_the_spark_submit_script_runs_as_a_plain_script():
    """``spark-submit submit.py`` runs the file as a script, outside the package: its imports must be absolute.
    The job it starts is ``monitor analyze``'s own (job.main), which the test above runs on the cluster, so a
    second cluster application (~2 minutes of a 2-core machine) would add no check; this one takes a second."""
    result = subprocess.run(
        [sys.executable, submit.__file__, "--help"], capture_output=True, text=True, timeout=120, cwd="/"
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--history" in result.stdout and "--master" in result.stdout
