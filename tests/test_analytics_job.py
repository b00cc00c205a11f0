"""End to end on a generated history with known incidents: ``monitor analyze`` must find exactly them."""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest

from mirrorwatch.monitor.cli import main

pytestmark = pytest.mark.spark

# One run on this module's small history (11,364 rows) issued 53 Spark jobs before the trim in BENCHMARKS.md, 14
# after, and 32 since the tables are built from hour partials (issue 38: what incremental runs merge; the
# aggregations over the cached partials shuffle again). Each job has a fixed cost whatever the data size
# (scheduling, and on a cluster the executors), so a change that adds jobs fails here, as a count: a slower suite
# would not say why.
MAX_SPARK_JOBS = 32


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


def ms(value) -> int | None:
    return None if value is None else int(value.replace(tzinfo=value.tzinfo or UTC).timestamp() * 1000)


@contextmanager
def counting_spark_jobs(spark, group: str):
    """Yields a list that holds, after the block, the ids of the Spark jobs this thread started in it (a job group:
    the jobs adaptive execution starts on its own threads inherit it). The shared session is left without one."""
    sc = spark.sparkContext
    sc.setJobGroup(group, "counted by tests/test_analytics_job.py")
    ids: list[int] = []
    try:
        yield ids
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            sc.setLocalProperty(key, None)
    ids.extend(sc.statusTracker().getJobIdsForGroup(group))


@pytest.fixture(scope="module")
def analysed_jobs() -> list[int]:
    """The ids of the Spark jobs of the ``analysed`` run (filled by that fixture)."""
    return []


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, spark, analysed_jobs):
    history = tmp_path_factory.mktemp("history")
    out = tmp_path_factory.mktemp("analytics")
    assert (
        run_cli(
            [
                "generate-history",
                "--out",
                str(history),
                "--days",
                "1",
                "--interval",
                "30",
                "--topics",
                "orders,payments",
                "--partitions",
                "2",
                "--quiet",
            ]
        )
        == 0
    )
    with counting_spark_jobs(spark, "test_analytics_job") as jobs:
        assert run_cli(["analyze", "--history", str(history), "--out", str(out), "--quiet"]) == 0
    analysed_jobs.extend(jobs)
    truth = json.loads((history / "ground_truth.json").read_text())

    def table(name):
        return pq.read_table(out / name).to_pylist()

    return truth, table, out


def test_every_injected_incident_is_found_to_the_sample(analysed):
    truth, table, _ = analysed
    found = {(r["topic"], r["partition"], ms(r["start"])): r for r in table("incidents")}
    assert len(found) == len(truth["incidents"])
    for expected in truth["incidents"]:
        got = found[(expected["topic"], expected["partition"], expected["start_ms"])]
        assert ms(got["end"]) == expected["end_ms"]
        assert ms(got["recovered"]) == expected["recovered_ms"]
        assert got["samples"] == expected["samples"]
        assert got["duration_s"] == expected["duration_s"]
        assert got["peak_true_lag"] == expected["peak_true_lag"]
        assert ms(got["peak_ts"]) == expected["peak_ms"]
        assert got["peak_time_lag_s"] == expected["peak_time_lag_s"]
        assert got["catch_up_rate_per_s"] == pytest.approx(expected["catch_up_rate_per_s"], rel=1e-12)
        assert got["open"] is False
        # the generator's evaluator says STOP while a stopped partition has lag, WARN past the SLO lag
        assert got["statuses"] and set(got["statuses"]) <= {"STOP", "WARN", "OK"}, got["statuses"]
        assert got["statuses"] == sorted(got["statuses"])


def test_slo_compliance_equals_the_known_value(analysed):
    truth, table, _ = analysed
    by_topic = {r["topic"]: r for r in table("slo_by_topic")}
    for topic, expected in truth["compliance"]["by_topic"].items():
        for key in ("compliant_ms", "breach_ms", "unknown_ms", "unobserved_ms"):
            assert by_topic[topic][key] == expected[key], (topic, key)
        assert by_topic[topic]["compliance"] == expected["compliance"]
    (flow,) = table("slo_by_flow")
    assert flow["compliance"] == truth["compliance"]["flow"]


def test_sampling_gaps_are_reported_not_averaged_over(analysed):
    truth, table, _ = analysed
    (gap,) = [e for e in truth["injected"] if e["kind"] == "sampling_gap"]
    gaps = table("sampling_gaps")
    assert len(gaps) == 4  # one per partition
    for g in gaps:
        assert ms(g["gap_start"]) == gap["start_ms"] - 30_000  # the last sample before the monitor went down
        assert ms(g["gap_end"]) == gap["end_ms"]  # the first one after
        assert g["median_spacing_s"] == 30.0
    hourly = table("lag_hourly")
    gap_hour = datetime.fromtimestamp(gap["start_ms"] // 3_600_000 * 3600, UTC)
    covered = [h["coverage"] for h in hourly if h["bucket_start"].replace(tzinfo=UTC) == gap_hour]
    assert covered and all(c < 1.0 for c in covered)
    assert sum(h["gaps"] for h in hourly) == 4
    for day in table("lag_daily"):  # one day of 2880 slots, some of them inside the gap
        assert day["coverage"] == day["samples"] / 2880 < 1.0


def test_committed_view_errs_high_and_would_have_paged_falsely(analysed):
    _, table, _ = analysed
    for row in table("committed_view"):
        assert row["committed_minus_true_min"] >= 0
        assert row["committed_minus_true_p99"] > 0
        assert row["false_pages"] > 0 and 0 < row["false_page_share"] < 1


def test_topic_windows_trend_and_summary(analysed):
    truth, table, out = analysed
    stops = [e for e in truth["injected"] if e["kind"] == "mirror_stop"]
    windows = table("incidents_by_topic")
    for stop in stops:
        for topic in ("orders", "payments"):
            (w,) = [
                w
                for w in windows
                if w["topic"] == topic and ms(w["start"]) <= stop["end_ms"] and ms(w["end"]) >= stop["start_ms"]
            ]
            assert w["partitions"] == 2
    assert {r["topic"] for r in table("trend")} == {"orders", "payments"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == truth["rows"]
    assert summary["incidents"]["count"] == len(truth["incidents"])
    assert summary["files"]["skipped"] == []


def test_one_run_issues_few_spark_jobs(analysed, analysed_jobs):
    # a count, not a time: tests never assert on wall-clock speed
    assert 0 < len(analysed_jobs) <= MAX_SPARK_JOBS, f"{len(analysed_jobs)} Spark jobs; see BENCHMARKS.md"
