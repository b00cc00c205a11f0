"""The synthetic history generator and its numpy ground truth (no Spark)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from mirrorwatch.core.records import lag_sample_arrow_schema
from mirrorwatch.monitor.analytics.synthetic import GeneratorSpec, generate
from mirrorwatch.monitor.cli import main

START_MS = 1_767_571_200_000  # 2026-01-05T00:00Z


def small_spec(**kw) -> GeneratorSpec:
    return GeneratorSpec(
        **{
            "start_ms": START_MS,
            "steps": 2880,
            "interval_s": 30.0,
            "topics": ("orders", "payments"),
            "partitions": 2,
            **kw,
        }
    )


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


def test_lag_ordering_invariants_hold_everywhere():
    series, _ = generate(small_spec(steps=8640, interval_s=10.0))
    for s in series:
        known = s.committed_known
        assert np.all(s.read_lag >= 0)
        assert np.all(s.read_lag <= s.true_lag)
        assert np.all(s.true_lag[known] <= s.committed_lag[known])
        assert np.all(np.diff(s.acked_next) >= 0), "the target never un-acknowledges"
        assert np.all(np.diff(s.ts_ms) > 0)
        assert np.all(s.time_lag_s >= 0)
        assert not known[0] or known.all(), "committed is unknown only before the first commit"


def test_committed_lag_saw_tooths_above_true_lag():
    series, _ = generate(small_spec(steps=8640, interval_s=10.0))
    s = series[0]
    excess = (s.committed_lag - s.true_lag)[s.committed_known]
    assert (excess > 0).mean() > 0.5  # most of the time the committed view is behind
    assert (np.diff(s.committed_lag[s.committed_known]) < 0).sum() > 100  # drops at each commit


def test_every_injected_incident_has_one_ground_truth_incident_per_affected_partition(tmp_path):
    assert (
        run_cli(
            [
                "generate-history",
                "--out",
                str(tmp_path),
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
    truth = json.loads((tmp_path / "ground_truth.json").read_text())
    kinds = {e["kind"] for e in truth["injected"]}
    assert kinds == {"mirror_stop", "slow_target", "burst", "sampling_gap"}
    expected = 0
    for ev in truth["injected"]:
        if ev["kind"] == "sampling_gap":
            continue
        for topic in ("orders", "payments"):
            for partition in (0, 1):
                if (ev["topic"] in (None, topic)) and (ev["partition"] in (None, partition)):
                    expected += 1
                    found = [
                        i
                        for i in truth["incidents"]
                        if i["topic"] == topic
                        and i["partition"] == partition
                        and ev["start_ms"] <= i["start_ms"] < ev["end_ms"]
                    ]
                    assert len(found) == 1, (ev, topic, partition)
                    assert found[0]["cause"] == ev["kind"]
                    assert found[0]["recovered_ms"] is not None
    assert len(truth["incidents"]) == expected, "no incident outside the injected ones"
    assert 0.9 < truth["compliance"]["flow"] < 1.0


def test_written_files_have_exactly_the_history_schema_and_cut_sampling_gaps(tmp_path):
    assert (
        run_cli(
            [
                "generate-history",
                "--out",
                str(tmp_path),
                "--samples",
                "20000",
                "--interval",
                "10",
                "--topics",
                "a,b",
                "--partitions",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    files = sorted((tmp_path / "lag").glob("date=*/*.parquet"))
    assert [f.parent.name for f in files] == ["date=2026-01-05", "date=2026-01-06"]
    table = pq.read_table(files[0], schema=lag_sample_arrow_schema())
    assert pq.read_schema(files[0]).equals(lag_sample_arrow_schema())
    truth = json.loads((tmp_path / "ground_truth.json").read_text())
    gaps = [e for e in truth["injected"] if e["kind"] == "sampling_gap"]
    assert gaps and truth["rows"] < 20000  # samples inside the gap were dropped
    rows = sum(pq.read_metadata(f).num_rows for f in files)
    assert rows == truth["rows"]
    ts = table.column("ts").cast("int64").to_numpy()
    assert not np.any((ts >= gaps[0]["start_ms"]) & (ts < gaps[0]["end_ms"]))


def test_days_and_samples_are_exclusive(tmp_path, capsys):
    assert run_cli(["generate-history", "--out", str(tmp_path), "--days", "1", "--samples", "5"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0


def test_roll_writes_one_file_per_period_within_its_day(tmp_path):
    """``--roll 3600``: one file per hour of history, as a monitor rolling hourly writes them (the fleet bench)."""
    argv = ["generate-history", "--out", str(tmp_path), "--start", "2026-01-05T22:00:00Z", "--days", "0.125"]
    assert run_cli([*argv, "--interval", "60", "--partitions", "1", "--roll", "3600", "--quiet"]) == 0
    files = sorted(str(f.relative_to(tmp_path / "lag")) for f in (tmp_path / "lag").glob("date=*/*.parquet"))
    assert files == [
        "date=2026-01-05/part-220000.parquet",
        "date=2026-01-05/part-230000.parquet",
        "date=2026-01-06/part-000000.parquet",
    ]
    for f in files:
        ts = pq.read_table(tmp_path / "lag" / f).column("ts").cast("int64").to_numpy() // 1000
        assert len(set(ts // 3600)) == 1  # each file holds one hour
    truth = json.loads((tmp_path / "ground_truth.json").read_text())
    assert sum(pq.read_metadata(tmp_path / "lag" / f).num_rows for f in files) == truth["rows"]


def test_roll_must_divide_a_day(tmp_path, capsys):
    assert run_cli(["generate-history", "--out", str(tmp_path), "--roll", "7000"]) == 2
    assert "--roll 7000" in capsys.readouterr().err
