"""``monitor analyze`` on bad input: one line and exit 2; corrupt files skipped with a warning naming them."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from mirrorwatch.core.records import lag_sample_arrow_schema
from mirrorwatch.monitor.cli import main


def run_cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code


def test_missing_history_is_one_line_exit_2(tmp_path, capsys):
    # Local paths are checked before Spark starts, so this needs no Spark session.
    assert run_cli(["analyze", "--history", str(tmp_path / "nope"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "history not found" in err and "Traceback" not in err


def test_bad_period_is_one_line_exit_2(tmp_path, capsys):
    assert run_cli(["analyze", "--history", str(tmp_path), "--out", str(tmp_path / "o"), "--from", "yesterday"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.spark
def test_empty_history_is_one_line_exit_2(tmp_path, capsys, spark):
    (tmp_path / "lag" / "date=2026-01-05").mkdir(parents=True)
    assert run_cli(["analyze", "--history", str(tmp_path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no readable lag history files" in err


@pytest.mark.spark
def test_history_with_zero_rows_is_one_line_exit_2(tmp_path, capsys, spark):
    folder = tmp_path / "lag" / "date=2026-01-05"
    folder.mkdir(parents=True)
    pq.write_table(lag_sample_arrow_schema().empty_table(), folder / "part-0.parquet")
    assert run_cli(["analyze", "--history", f"file://{tmp_path}", "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is empty" in err


@pytest.mark.spark
def test_corrupt_files_are_skipped_with_a_warning_naming_them(tmp_path, capsys, spark):
    history = tmp_path / "history"
    assert (
        run_cli(
            [
                "generate-history",
                "--out",
                str(history),
                "--days",
                "2",
                "--interval",
                "60",
                "--topics",
                "orders",
                "--partitions",
                "1",
                "--quiet",
            ]
        )
        == 0
    )
    day1, day2 = sorted((history / "lag").glob("date=*/*.parquet"))
    rows_day1 = pq.read_metadata(day1).num_rows
    data = day2.read_bytes()
    day2.write_bytes(data[: len(data) // 2])  # truncated, as by a crash mid-write
    garbage = day1.parent / "part-99999.parquet"
    garbage.write_bytes(b"PAR1 this is not parquet at all, though it starts like one")
    out = tmp_path / "out"
    assert run_cli(["analyze", "--history", str(history), "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "skipping corrupt Parquet file" in line]
    assert len(warnings) == 2
    assert any(day2.name in w and "date=" in w and str(day2.parent.name) in w for w in warnings)
    assert any(garbage.name in w for w in warnings)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == rows_day1
    assert len(summary["files"]["skipped"]) == 2


@pytest.mark.spark
def test_odd_series_and_a_period_filter_with_progress_on_stderr(tmp_path, capsys, spark):
    """A single-sample partition, duplicate timestamps (median spacing 0) and --from/--to must not break the
    job (Spark 4 runs in ANSI mode, where a division by zero fails); progress shows one line per stage."""
    import pyarrow as pa

    def row(ts_ms, partition, true_lag):
        return {
            "ts": ts_ms,
            "flow": "f",
            "source": "s",
            "target": "t",
            "group": "g",
            "topic": "x",
            "partition": partition,
            "source_end": 100,
            "committed": None,
            "read_position": None,
            "acked_next": None,
            "target_end": None,
            "committed_lag": None,
            "read_lag": None,
            "true_lag": true_lag,
            "time_lag_s": 1.0,
            "status": "OK",
        }

    day = 1_767_571_200_000  # 2026-01-05T00:00Z
    rows = [row(day + i * 10_000, 0, 10 * i) for i in range(100)]
    rows += [row(day + 5_000, 1, 7)]
    rows += [row(day + 20_000, 2, 20_000), row(day + 20_000, 2, 20_000), row(day + 30_000, 2, 1)]
    rows += [row(day + 86_400_000 + 1000, 0, 5)]  # next day, outside --to
    for d in ("2026-01-05", "2026-01-06"):
        (tmp_path / "lag" / f"date={d}").mkdir(parents=True)
    first = [r for r in rows if r["ts"] < day + 86_400_000]
    pq.write_table(
        pa.Table.from_pylist(first, schema=lag_sample_arrow_schema()), tmp_path / "lag/date=2026-01-05/a.parquet"
    )
    pq.write_table(
        pa.Table.from_pylist(rows[-1:], schema=lag_sample_arrow_schema()), tmp_path / "lag/date=2026-01-06/a.parquet"
    )
    out = tmp_path / "out"
    assert (
        run_cli(
            [
                "analyze",
                "--history",
                str(tmp_path),
                "--out",
                str(out),
                "--from",
                "2026-01-05T00:00:05Z",
                "--to",
                "2026-01-06",
                "--slo-lag",
                "1000",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "writing incidents" in err and "writing summary.json" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] == len(first) - 1  # the sample at 00:00:00 is before --from
    incidents = pq.read_table(out / "incidents").to_pylist()
    assert [(i["partition"], i["samples"], i["open"]) for i in incidents] == [(2, 2, False)]
