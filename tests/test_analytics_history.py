"""History that stays small (issue 38): compaction, minute roll-ups and expiry, on plain files (no Spark).

The roll-up's figures must equal the raw samples' at minute grain (checked against plain Python), the compacted
raw must hold exactly the original rows in fewer bytes, and expiry must remove only what is past its days.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from mirrorwatch.core.records import lag_sample_arrow_schema
from mirrorwatch.core.status import PARTITION_SEVERITY
from mirrorwatch.monitor.analytics.definitions import SKETCH_RANK_ERROR
from mirrorwatch.monitor.analytics.history_writer import write_history
from mirrorwatch.monitor.analytics.synthetic import GeneratorSpec
from mirrorwatch.monitor.history_compaction import (
    COMPACT_PREFIX,
    ROLLUP_FIGURES,
    SERIES,
    compact_history,
    minute_rollup,
)

from .support.analytics_columns import SKETCHED

T0 = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp() * 1000)
SEVERITY = [s.name for s in PARTITION_SEVERITY]


def rows_table(rows: list[dict]) -> pa.Table:
    schema = lag_sample_arrow_schema()
    base = {f.name: None for f in schema}
    base.update(flow="f", source="a", target="b", group="g", topic="t", partition=0, mirror="mirrorwatch")
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=schema)


def expected_rollup(raw: pa.Table) -> dict[tuple, dict]:
    """Plain Python: per series and minute, the count, min/max/last known value of each figure, worst status."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in raw.to_pylist():
        minute = r["ts"].replace(second=0, microsecond=0)
        groups[(*[r[k] for k in SERIES], minute)].append(r)
    out = {}
    for key, rows in groups.items():
        rows.sort(key=lambda r: r["ts"])
        row: dict = {"samples": len(rows), "status": max((r["status"] for r in rows), key=SEVERITY.index)}
        for f in ROLLUP_FIGURES:
            known = [r[f] for r in rows if r[f] is not None]
            row[f"{f}_min"] = min(known) if known else None
            row[f"{f}_max"] = max(known) if known else None
            row[f"{f}_last"] = known[-1] if known else None
        out[key] = row
    return out


def rollup_by_key(table: pa.Table) -> dict[tuple, dict]:
    return {
        (*[r[k] for k in SERIES], r["minute"]): {k: v for k, v in r.items() if k not in (*SERIES, "minute", "mirror")}
        for r in table.to_pylist()
    }


@pytest.mark.parametrize(
    "case, rows",
    [
        (
            "unordered input, nulls, statuses",
            [
                {"ts": T0 + 50_000, "true_lag": 5, "time_lag_s": None, "status": "WARN"},
                {"ts": T0 + 10_000, "true_lag": 9, "time_lag_s": 1.5, "status": "OK"},
                {"ts": T0 + 30_000, "true_lag": None, "time_lag_s": 0.5, "status": "STOP"},
                {"ts": T0 + 59_999, "true_lag": None, "committed_lag": 3, "status": "UNKNOWN"},
            ],
        ),
        (
            "minute boundary and two partitions",
            [
                {"ts": T0 + 59_999, "true_lag": 1, "status": "OK"},
                {"ts": T0 + 60_000, "true_lag": 2, "status": "LOST"},
                {"ts": T0 + 60_000, "partition": 1, "true_lag": 7, "read_lag": 4, "status": "REWIND"},
                {"ts": T0 + 61_000, "partition": 1, "true_lag": 6, "read_lag": None, "status": "UNKNOWN"},
            ],
        ),
        ("a minute with nothing known", [{"ts": T0, "status": "OK"}, {"ts": T0 + 1, "status": "WARN"}]),
    ],
)
def test_rollup_equals_raw_at_minute_grain(case, rows):
    raw = rows_table(rows)
    assert rollup_by_key(minute_rollup(raw)) == expected_rollup(raw), case


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[Path, pa.Table]:
    """One day at 5 s (the monitor's default interval), 2 topics × 3 partitions, with incidents and a gap."""
    spec = GeneratorSpec(start_ms=T0, steps=17_280, interval_s=5.0, topics=("orders", "clicks"), partitions=3)
    root = tmp_path_factory.mktemp("history")
    write_history(spec, str(root))
    raw = pq.read_table(next((root / "lag").glob("date=*/*.parquet")), schema=lag_sample_arrow_schema())
    return root, raw


def test_compaction_keeps_every_row_rolls_up_and_is_small(generated):
    root, raw = generated
    folder = root / "lag" / "date=2026-01-05"
    (original,) = folder.glob("part-*.parquet")
    report = compact_history(root, datetime(2026, 1, 6, 12, tzinfo=UTC), raw_days=7, rollup_days=30)
    assert report.compacted == [str(original)] and not report.unreadable
    assert not original.exists()
    compacted = folder / f"{COMPACT_PREFIX}{original.name}"
    table = pq.read_table(compacted, schema=lag_sample_arrow_schema())
    assert table.equals(raw.sort_by([(k, "ascending") for k in [*SERIES, "ts"]]))
    # issue 38's goal for raw samples: at most 12 bytes each
    assert os.path.getsize(compacted) / raw.num_rows <= 12
    rollup = pq.read_table(root / "rollup" / "date=2026-01-05" / original.name).drop_columns(["date"])
    minutes = raw.select(SERIES).append_column("minute", pc.floor_temporal(raw["ts"], unit="minute"))
    assert rollup.num_rows == minutes.group_by([*SERIES, "minute"]).aggregate([]).num_rows
    assert pc.sum(rollup["samples"]).as_py() == raw.num_rows
    # every figure, on the first two hours (plain Python is slow; minutes are independent of one another)
    cut = pa.scalar(T0 + 2 * 3_600_000, pa.int64()).cast(raw.schema.field("ts").type)
    early = raw.filter(pc.less(raw["ts"], cut))
    assert rollup_by_key(rollup.filter(pc.less(rollup["minute"], cut))) == expected_rollup(early)
    # row groups carry the ts statistics the job filters on
    meta = pq.ParquetFile(compacted).metadata
    ts = lag_sample_arrow_schema().get_field_index("ts")
    assert all(meta.row_group(g).column(ts).statistics.has_min_max for g in range(meta.num_row_groups))


def make_days(root: Path, days: list[str], compacted: bool) -> None:
    for day in days:
        for sub in ("lag", "rollup"):
            folder = root / sub / f"date={day}"
            folder.mkdir(parents=True)
            ts = int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp() * 1000)
            name = f"{COMPACT_PREFIX}part-1.parquet" if (compacted or sub == "rollup") else "part-1.parquet"
            pq.write_table(rows_table([{"ts": ts, "status": "OK"}]), folder / name)


def test_expiry_removes_only_what_is_past_its_days(tmp_path):
    days = ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-08", "2026-01-09", "2026-01-10"]
    make_days(tmp_path, days, compacted=True)
    # now 2026-01-10 12:00: raw kept 2 days → days ending by 2026-01-08 12:00 go (01-08 ends at 01-09 00:00: kept)
    report = compact_history(tmp_path, datetime(2026, 1, 10, 12, tzinfo=UTC), raw_days=2, rollup_days=8)
    left = {sub: sorted(p.name for p in (tmp_path / sub).iterdir()) for sub in ("lag", "rollup")}
    assert left["lag"] == ["date=2026-01-08", "date=2026-01-09", "date=2026-01-10"]
    # roll-ups kept 8 days → days ending by 2026-01-02 12:00 go: 01-01 only
    assert left["rollup"] == [f"date={d}" for d in days[1:]]
    assert len(report.expired_raw) == 3 and len(report.expired_rollup) == 1


def test_expiry_keeps_a_day_whose_file_could_not_be_rolled_up(tmp_path):
    make_days(tmp_path, ["2026-01-01"], compacted=True)
    damaged = tmp_path / "lag" / "date=2026-01-01" / "part-2.parquet"
    damaged.write_bytes(b"PAR1 not really")
    report = compact_history(tmp_path, datetime(2026, 1, 10, tzinfo=UTC), raw_days=2, rollup_days=30)
    assert [path for path, _ in report.unreadable] == [str(damaged)]
    assert report.kept == [str(damaged.parent)] and damaged.exists()
    assert any("cannot compact" in line for line in report.lines())


def test_an_interrupted_compaction_is_finished(tmp_path, generated):
    _, raw = generated
    folder = tmp_path / "lag" / "date=2026-01-05"
    folder.mkdir(parents=True)
    pq.write_table(raw, folder / "part-1.parquet")
    pq.write_table(raw, folder / f"{COMPACT_PREFIX}part-1.parquet")  # the run died before deleting the original
    report = compact_history(tmp_path, datetime(2026, 1, 6, tzinfo=UTC), raw_days=7, rollup_days=30)
    assert report.finished == [str(folder / "part-1.parquet")] and not report.compacted
    assert [p.name for p in folder.iterdir()] == [f"{COMPACT_PREFIX}part-1.parquet"]


def test_the_scheduled_run_compacts_and_expires_before_the_job(tmp_path):
    """``monitor run``'s scheduled analytics (on the leader): the compaction child first, then the job."""
    import sys
    import time

    from mirrorwatch.core.config import AnalyticsSchedule
    from mirrorwatch.monitor.analytics_runs import AnalyticsRunner, HistoryRetention

    history = tmp_path / "history"
    old = datetime.fromtimestamp(time.time() - 10 * 86_400, UTC).strftime("%Y-%m-%d")
    today = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%d")
    make_days(history, [old], compacted=False)
    make_days(history, [today], compacted=False)
    runner = AnalyticsRunner(
        AnalyticsSchedule(every_s=60), str(history), str(tmp_path / "out"), retention=HistoryRetention(2, 30)
    )
    # the job (a stand-in) writes down the raw files it finds: the history as compaction left it
    listing = (
        "import os, sys, glob; os.makedirs(sys.argv[1]); names = sorted(os.path.basename(p) for p in "
        "glob.glob(os.path.join(sys.argv[2], 'lag', 'date=*', '*.parquet'))); "
        "open(os.path.join(sys.argv[1], 'seen'), 'w').write(' '.join(names))"
    )

    def job(settings: AnalyticsSchedule, history_dir: str, out_dir: str, now: datetime) -> list[str]:
        return [sys.executable, "-c", listing, out_dir, history_dir]

    runner.command = job
    status = runner.run()
    assert status.state == "ok", status.reason
    assert (tmp_path / "out" / "seen").read_text() == f"{COMPACT_PREFIX}part-1.parquet"
    assert [p.name for p in (history / "lag").iterdir()] == [f"date={today}"]
    assert sorted(p.name for p in (history / "rollup").iterdir()) == [f"date={old}", f"date={today}"]
    assert sorted(p.name for p in (history / "lag" / f"date={today}").iterdir()) == [f"{COMPACT_PREFIX}part-1.parquet"]


# Percentiles from KLL sketches: a sketch depends on the order it saw its values in, and the compacted file holds
# them in another order, so these agree only within the sketch's rank error (checked below for lag_daily's true
# lag against the raw values); every other column must be equal.


def _rows(folder: Path, drop: list[str]) -> list[str]:
    """A table's rows, order-free, without ``drop``, doubles to 12 significant digits (sums may add up in another
    order)."""

    def norm(v: object) -> object:
        if isinstance(v, float):
            return float(f"{v:.12g}")
        if isinstance(v, list):
            return [norm(x) for x in v]
        return v

    rows = pq.read_table(folder).to_pylist()
    return sorted(repr({k: norm(v) for k, v in r.items() if k not in drop}) for r in rows)


@pytest.mark.spark
def test_the_job_reads_the_compacted_history_as_the_original(tmp_path, spark):
    import shutil

    from mirrorwatch.monitor.analytics.job import TABLE_NAMES
    from mirrorwatch.monitor.cli import main

    def cli(argv: list[str]) -> int:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        return int(exc.value.code or 0)

    original, compacted = tmp_path / "original", tmp_path / "compacted"
    spec = ["--days", "1", "--interval", "30", "--topics", "orders,payments", "--partitions", "2", "--quiet"]
    assert cli(["generate-history", "--out", str(original), *spec]) == 0
    shutil.copytree(original, compacted)
    report = compact_history(compacted, datetime(2026, 1, 6, tzinfo=UTC), raw_days=7, rollup_days=30)
    assert report.compacted and not list((compacted / "lag").glob("date=*/part-*"))
    for history in (original, compacted):
        out = tmp_path / f"out-{history.name}"
        assert cli(["analyze", "--history", str(history), "--out", str(out), "--quiet"]) == 0
    for name in TABLE_NAMES:
        drop = SKETCHED.get(name, set())
        assert _rows(tmp_path / "out-compacted" / name, drop) == _rows(tmp_path / "out-original" / name, drop), name
    raw = pq.read_table(original / "lag", schema=lag_sample_arrow_schema()).to_pylist()
    for day in pq.read_table(tmp_path / "out-compacted" / "lag_daily").to_pylist():
        values = [
            r["true_lag"]
            for r in raw
            if r["topic"] == day["topic"] and r["partition"] == day["partition"] and r["true_lag"] is not None
        ]
        for p in (50, 95, 99):
            got = day[f"true_lag_p{p}"]
            below = sum(v < got for v in values) / len(values)
            at_or_below = sum(v <= got for v in values) / len(values)
            assert below - SKETCH_RANK_ERROR <= p / 100 <= at_or_below + SKETCH_RANK_ERROR, (day["partition"], p)
