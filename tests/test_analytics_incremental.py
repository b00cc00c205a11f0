"""Incremental runs (``--state``) against one from-scratch run over the same history: every table equal.

One small history holds every case the state must get right: a day boundary (21:00 → 05:10 UTC), samples
written late (within ``late_s``), an incident that spans run boundaries, a sampling gap whose last sample
before it is carried over two runs before its successor appears, a partition that appears late, a flow that
stops (its last sample is carried to the end), and a flow whose mirror changes. At 10-minute spacing every
group holds fewer than ``SKETCH_K`` values, so the KLL sketches keep every value and even the sketch-derived
percentiles must be equal, not just close.

The runs pass ``--from`` 6 hours before their time, which incremental runs round down to UTC midnight, so the
whole history stays in the look-back. Day 1 closes at the second run (boundary 00:00) and three more runs read its
sketches from the state's day rows; a second sequence (``RUNS_STRADDLING``) closes it with a boundary past
midnight (01:00), so one run both merges the day and keeps the new day's first hour sketches.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirrorwatch.core.records import lag_sample_arrow_schema
from mirrorwatch.monitor.analytics.job import TABLE_NAMES, AnalysisSettings, run_analysis
from mirrorwatch.monitor.analytics.progress import Progress

pytestmark = pytest.mark.spark

START = datetime(2026, 3, 1, 21, 0, tzinfo=UTC)
STEP = timedelta(minutes=10)
LATE_S = 1200.0
RUNS = [START + timedelta(hours=h, minutes=m) for h, m in ((1, 40), (3, 20), (5, 0), (6, 40), (8, 10))]
RUNS_STRADDLING = [START + timedelta(hours=h, minutes=m) for h, m in ((1, 10), (4, 50), (8, 10))]
LOOKBACK = timedelta(hours=6)  # from 23:00 at the last run: only the rounding to midnight keeps 21:00–23:00 in
TABLES = TABLE_NAMES


def at(h: int, m: int) -> datetime:
    """21:00 + h:m (so at(3, 0) is midnight)."""
    return START + timedelta(hours=h, minutes=m)


def sample(flow: str, topic: str, partition: int, ts: datetime, breach: bool, mirror: str) -> dict:
    true_lag = 50_000 if breach else 100 + partition
    return {
        "ts": int(ts.timestamp() * 1000),
        "flow": flow,
        "source": flow.split("-")[0],
        "target": flow.split("-")[1],
        "group": "g",
        "topic": topic,
        "partition": partition,
        "source_end": 10**6,
        "committed": 10**6 - true_lag - 500,
        "read_position": None,
        "acked_next": 10**6 - true_lag,
        "target_end": None,
        "committed_lag": true_lag + 500,
        "read_lag": None,
        "true_lag": true_lag,
        "time_lag_s": 120.0 if breach else 1.0 + partition / 10,
        "status": "STOP" if breach else "OK",
        "mirror": mirror,
    }


def history() -> list[tuple[datetime, dict]]:
    """(written at, row) for every sample."""
    out = []
    t = START
    while t < at(8, 10):
        mirror = "" if t < at(4, 0) else "mm2"  # east-west's mirror changes at 01:00
        # orders/0: an incident 23:50–00:40, across midnight and the runs at 22:40 / 00:20
        out.append((t, sample("east-west", "orders", 0, t, at(2, 50) <= t < at(3, 40), mirror)))
        # orders/1: an incident just before a gap (01:20–03:50) that two runs see open-ended
        if not (at(4, 20) <= t < at(6, 50)):
            written = t + timedelta(minutes=15) if at(3, 10) <= t < at(3, 20) else t  # 00:10 written late
            out.append((written, sample("east-west", "orders", 1, t, at(4, 0) <= t < at(4, 20), mirror)))
        if t >= at(5, 30):  # orders/2 appears at 02:30
            out.append((t, sample("east-west", "orders", 2, t, False, mirror)))
        if t < at(4, 40):  # north-south stops at 01:40, in an incident
            out.append((t, sample("north-south", "audit", 0, t, t >= at(4, 10), "mirrorwatch")))
        t += STEP
    return out


def write_visible(root, rows: list[tuple[datetime, dict]], since: datetime | None, until: datetime, n: int) -> None:
    """Files with the samples that became visible in (since, until] (written, and not in the future), one per UTC
    day, as a monitor would close them."""

    def visible(written: datetime, ts: datetime, moment: datetime | None) -> bool:
        return moment is not None and written <= moment and ts < moment

    by_day: dict[str, list[dict]] = {}
    for written, row in rows:
        ts = datetime.fromtimestamp(row["ts"] / 1000, UTC)
        if visible(written, ts, until) and not visible(written, ts, since):
            by_day.setdefault(ts.date().isoformat(), []).append(row)
    for day, day_rows in by_day.items():
        folder = root / "lag" / f"date={day}"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(day_rows, schema=lag_sample_arrow_schema()), folder / f"part-{n}.parquet")


def run(spark, history_dir, out, until: datetime, state=None) -> dict:
    settings = AnalysisSettings(
        str(history_dir),
        f"file://{out}",
        start=until - LOOKBACK if state else None,
        end=until,
        state_uri=f"file://{state}" if state else None,
        late_s=LATE_S,
    )
    return run_analysis(spark, settings, Progress(quiet=True))


def rows_of(out, name: str) -> list[tuple]:
    table = pq.read_table(out / name).to_pylist()
    return sorted((tuple(sorted(r.items(), key=lambda kv: kv[0])) for r in table), key=repr)


def run_sequence(tmp_path_factory, spark, rows, moments: list[datetime], label: str):
    root = tmp_path_factory.mktemp(f"{label}-history")
    state = tmp_path_factory.mktemp(f"{label}-state")
    summaries, previous = [], None
    for n, until in enumerate(moments):
        write_visible(root, rows, previous, until, n)
        out = tmp_path_factory.mktemp(f"{label}-out-{n}")
        summaries.append((until, run(spark, root, out, until, state), out))
        previous = until
    return root, state, summaries


@pytest.fixture(scope="module")
def runs(tmp_path_factory, spark):
    rows = history()
    root, state, summaries = run_sequence(tmp_path_factory, spark, rows, RUNS, "incr")
    scratch = tmp_path_factory.mktemp("scratch-out")
    return rows, summaries, run(spark, root, scratch, RUNS[-1]), scratch, state


@pytest.fixture(scope="module")
def straddling(tmp_path_factory, spark, runs):
    _, _, summaries = run_sequence(tmp_path_factory, spark, runs[0], RUNS_STRADDLING, "straddling")
    return summaries


def assert_tables_equal(name: str, got_out, want_out) -> None:
    got, want = rows_of(got_out, name), rows_of(want_out, name)
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        for (key, gv), (_, wv) in zip(g, w):
            if isinstance(wv, float) and not (wv is None or math.isnan(wv)):
                assert gv == pytest.approx(wv, rel=1e-12), (name, key, dict(w))
            else:
                assert gv == wv, (name, key, dict(w))


@pytest.mark.parametrize("name", TABLES)
def test_incremental_equals_from_scratch(runs, name):
    _, summaries, _, scratch, _ = runs
    assert_tables_equal(name, summaries[-1][2], scratch)


@pytest.mark.parametrize("name", TABLES)
def test_a_day_closed_past_midnight_equals_from_scratch(runs, straddling, name):
    assert_tables_equal(name, straddling[-1][2], runs[3])


def parquet_rows(folder) -> list[dict]:
    return [r for f in sorted(folder.glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def test_a_closed_day_is_kept_as_one_sketch_row_per_series(runs):
    """After the runs, day 1 is one ``days`` row per series in the state, no hour sketch of it is left, and the
    hour partials carry no sketches."""
    _, _, _, _, state = runs
    day1 = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000)
    days = [r for part in state.glob("run-*") for r in parquet_rows(part / "days")]
    assert sorted((r["topic"], r["partition"]) for r in days if r["day_ms"] == day1) == [
        ("audit", 0),
        ("orders", 0),
        ("orders", 1),
    ]
    assert all(r["true_lag_sketch"] is not None for r in days)
    hour_sketches = [r for path in state.glob("run-*/hour_sketches") for r in parquet_rows(path)]
    assert hour_sketches and all(r["hour_ms"] >= day1 + 86_400_000 for r in hour_sketches)
    hours = pq.read_table(next(state.glob("run-*/hours"))).schema.names
    assert "hour_ms" in hours and not [c for c in hours if c.endswith("_sketch")]


def test_each_run_reads_only_history_it_has_not_summarised(runs):
    rows, summaries, scratch_summary, _, _ = runs
    for n, (until, summary, _) in enumerate(summaries):
        info = summary["incremental"]
        read_from = datetime.fromisoformat(info["read_from"]) if info["read_from"] else None
        # what was visible at that run, from the boundary the previous run left (late samples included)
        expected = sum(
            1
            for written, r in rows
            if written <= until
            and r["ts"] < until.timestamp() * 1000
            and (read_from is None or r["ts"] >= read_from.timestamp() * 1000)
        )
        assert info["rows_read"] == expected, n
        if n:
            assert read_from is not None and read_from >= RUNS[n - 1] - timedelta(seconds=LATE_S + 3600)
    assert sum(s["incremental"]["rows_read"] for _, s, _ in summaries) < 2 * scratch_summary["rows"]
    in_period = sum(1 for _, r in rows if r["ts"] < RUNS[-1].timestamp() * 1000)
    assert summaries[-1][1]["rows"] == scratch_summary["rows"] == in_period


def test_the_cases_are_in_the_history(runs):
    """The history holds what the equality above is meant to cover."""
    _, summaries, _, scratch, _ = runs
    incidents = pq.read_table(scratch / "incidents").to_pylist()
    across_midnight = [i for i in incidents if i["topic"] == "orders" and i["partition"] == 0]
    assert len(across_midnight) == 1 and across_midnight[0]["start"].day != across_midnight[0]["end"].day
    assert [i["open"] for i in incidents if i["topic"] == "audit"] == [True]  # the stopped flow's last one
    gaps = pq.read_table(scratch / "sampling_gaps").to_pylist()
    assert [(g["topic"], g["partition"]) for g in gaps] == [("orders", 1)]
    assert {r["mirror"] for r in pq.read_table(scratch / "slo_by_topic").to_pylist()} == {"mm2", "mirrorwatch"}
    assert {r["partition"] for r in pq.read_table(scratch / "lag_hourly").to_pylist()} == {0, 1, 2}
    assert len({r["bucket_start"].date() for r in pq.read_table(scratch / "lag_daily").to_pylist()}) == 2


def test_sketch_tables_are_written_in_small_row_groups(spark, tmp_path):
    """A day of a 10,000-partition fleet's sketches is a table of 100 MB or more; written as one row group it failed
    a 1 GiB executor with OutOfMemoryError on reading. Here 3,000 rows of 5 kB of random text (~15 MB, which the
    writer's default would keep in one row group)."""
    from pyspark.sql import functions as F

    from mirrorwatch.monitor.analytics.incremental import SKETCH_ROW_GROUP_BYTES, write_sketch_table

    rows = spark.range(3000).select("id", F.expr("cast(randstr(5000) as binary)").alias("sketch"))
    write_sketch_table(rows, str(tmp_path / "sketches"))
    (written,) = (tmp_path / "sketches").glob("*.parquet")
    meta = pq.ParquetFile(written).metadata
    sizes = [meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)]
    assert meta.num_rows == 3000
    assert len(sizes) >= 2, sizes
    assert max(sizes) <= 2 * SKETCH_ROW_GROUP_BYTES, sizes
