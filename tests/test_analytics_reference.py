"""Spark's figures against an independent plain-Python computation on a small, irregular history.

The history has two partitions, unknown (null) lags, irregular spacing, a sampling gap and crosses midnight,
so hourly and daily buckets both split it. Counts, max and compliance must be exact; hourly percentiles are
exact in Spark (``percentile``, linear interpolation) and compared to 1e-9; the committed view's come from
merged KLL sketches and must lie within the sketch's rank error.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirrorwatch.core.records import lag_sample_arrow_schema
from mirrorwatch.monitor.analytics.definitions import SKETCH_RANK_ERROR
from mirrorwatch.monitor.analytics.job import AnalysisSettings, run_analysis
from mirrorwatch.monitor.analytics.progress import Progress

pytestmark = pytest.mark.spark

SLO_LAG, SLO_TIME, GAP_FACTOR = 500, 20.0, 3.0
START_MS = int(datetime(2026, 3, 1, 22, 30, tzinfo=UTC).timestamp() * 1000)


def make_rows() -> list[dict]:
    rng = random.Random(42)
    rows = []
    for partition in (0, 1):
        t = START_MS + partition * 1700
        for i in range(600):
            t += rng.choice([9_000, 10_000, 10_000, 11_000])
            if partition == 0 and 200 <= i < 230:
                continue  # the monitor missed 30 samples: a sampling gap
            true_lag = rng.choice([rng.randint(0, 400), rng.randint(0, 1500)])
            committed_lag = None if rng.random() < 0.05 else true_lag + rng.randint(0, 900)
            time_lag = None if rng.random() < 0.03 else round(rng.uniform(0, 30), 3)
            rows.append(
                {
                    "ts": t,
                    "flow": "east-west",
                    "source": "east",
                    "target": "west",
                    "group": "g",
                    "topic": "orders",
                    "partition": partition,
                    "source_end": 10**6 + i,
                    "committed": None if committed_lag is None else 10**6 + i - committed_lag,
                    "read_position": None,
                    "acked_next": 10**6 + i - true_lag,
                    "target_end": None,
                    "committed_lag": committed_lag,
                    "read_lag": None,
                    "true_lag": None if rng.random() < 0.02 else true_lag,
                    "time_lag_s": time_lag,
                    "status": "OK",
                }
            )
    return rows


def percentile(values: list[float], p: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default method)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * p
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def reference(rows: list[dict]):
    series = defaultdict(list)
    for r in rows:
        series[r["partition"]].append(r)
    hourly = defaultdict(list)
    gaps = []
    weights = {"compliant": 0, "breach": 0, "unknown": 0, "unobserved": 0}
    for partition, rs in series.items():
        rs.sort(key=lambda r: r["ts"])
        spacings = [b["ts"] - a["ts"] for a, b in zip(rs, rs[1:])]
        within = defaultdict(list)  # per hour: the spacings that begin and end in it
        for a, b in zip(rs, rs[1:]):
            if a["ts"] // 3_600_000 == b["ts"] // 3_600_000:
                within[a["ts"] // 3_600_000].append(b["ts"] - a["ts"])
        for i, r in enumerate(rs):
            hourly[(partition, r["ts"] // 3_600_000)].append(r)
            spacing = spacings[i] if i < len(spacings) else None
            median = percentile(within[r["ts"] // 3_600_000], 0.5)
            if median is None:
                weight, unobserved = 0, spacing or 0
            else:
                cap = math.floor(GAP_FACTOR * median)
                weight = math.floor(median) if spacing is None else min(spacing, cap)
                unobserved = 0 if spacing is None else max(spacing - cap, 0)
            weights["unobserved"] += unobserved
            if spacing is not None and median is not None and spacing > GAP_FACTOR * median:
                gaps.append((partition, r["ts"], spacing))
            tl, tm = r["true_lag"], r["time_lag_s"]
            if (tl is not None and tl > SLO_LAG) or (tm is not None and tm > SLO_TIME):
                weights["breach"] += weight
            elif tl is not None and tm is not None:
                weights["compliant"] += weight
            else:
                weights["unknown"] += weight
    return hourly, gaps, weights


@pytest.fixture(scope="module")
def analysed(tmp_path_factory, spark):
    rows = make_rows()
    history = tmp_path_factory.mktemp("ref-history")
    by_day = defaultdict(list)
    for r in rows:
        by_day[datetime.fromtimestamp(r["ts"] / 1000, UTC).date()].append(r)
    for n, (day, rs) in enumerate(sorted(by_day.items())):
        (history / "lag" / f"date={day}").mkdir(parents=True)
        table = pa.Table.from_pylist([{**r, "mirror": "mm2"} for r in rs], schema=lag_sample_arrow_schema())
        if n == 0:  # the first day written before the history had its mirror column: one series all the same
            table = table.drop_columns(["mirror"])
        pq.write_table(table, history / "lag" / f"date={day}" / "part-0.parquet")
    out = tmp_path_factory.mktemp("ref-out")
    settings = AnalysisSettings(
        str(history), f"file://{out}", slo_lag=SLO_LAG, slo_time_s=SLO_TIME, gap_factor=GAP_FACTOR
    )
    summary = run_analysis(spark, settings, Progress(quiet=True))
    return rows, summary, lambda name: pq.read_table(out / name).to_pylist()


def test_hourly_counts_max_and_percentiles(analysed):
    rows, summary, table = analysed
    assert summary["rows"] == len(rows)
    hourly_ref, _, _ = reference(rows)
    got = {(h["partition"], int(h["bucket_start"].timestamp()) // 3600): h for h in table("lag_hourly")}
    assert set(got) == set(hourly_ref)
    for key, rs in hourly_ref.items():
        h = got[key]
        assert h["samples"] == len(rs)
        for kind in ("true_lag", "committed_lag", "time_lag_s"):
            values = [r[kind] for r in rs if r[kind] is not None]
            assert h[f"{kind}_known"] == len(values)
            assert h[f"{kind}_max"] == max(values)
            for p in (0.5, 0.95, 0.99):
                assert h[f"{kind}_p{int(p * 100)}"] == pytest.approx(percentile(values, p), rel=1e-9, abs=1e-9)


def test_daily_buckets_split_at_utc_midnight(analysed):
    rows, _, table = analysed
    daily = table("lag_daily")
    assert sorted({d["bucket_start"].date().isoformat() for d in daily}) == ["2026-03-01", "2026-03-02"]
    assert sum(d["samples"] for d in daily) == len(rows)


def test_compliance_and_gaps_match_exactly(analysed):
    rows, _, table = analysed
    _, gaps_ref, weights = reference(rows)
    (slo,) = table("slo_by_topic")  # one row: the older day's rows (no mirror column) joined the flow's series
    assert slo["mirror"] == "mm2"
    assert (slo["compliant_ms"], slo["breach_ms"], slo["unknown_ms"], slo["unobserved_ms"]) == (
        weights["compliant"],
        weights["breach"],
        weights["unknown"],
        weights["unobserved"],
    )
    assert slo["compliance"] == weights["compliant"] / (weights["compliant"] + weights["breach"])
    gaps = sorted(
        (g["partition"], int(g["gap_start"].timestamp() * 1000), round(g["gap_s"] * 1000))
        for g in table("sampling_gaps")
    )
    assert gaps == sorted(gaps_ref) and len(gaps) == 1


def test_committed_view_counts(analysed):
    rows, _, table = analysed
    both = [r for r in rows if r["committed_lag"] is not None and r["true_lag"] is not None]
    diffs = [r["committed_lag"] - r["true_lag"] for r in both]
    false_pages = sum(
        1
        for r in both
        if r["committed_lag"] > SLO_LAG
        and r["true_lag"] <= SLO_LAG
        and r["time_lag_s"] is not None
        and r["time_lag_s"] <= SLO_TIME
    )
    (view,) = table("committed_view")
    assert view["samples"] == len(both)
    assert (view["committed_minus_true_min"], view["committed_minus_true_max"]) == (min(diffs), max(diffs))
    # from the hours' KLL sketches merged: a value seen, whose rank is within the sketch's rank error of p95
    p95 = view["committed_minus_true_p95"]
    assert p95 in diffs
    below, at_or_below = sum(d < p95 for d in diffs) / len(diffs), sum(d <= p95 for d in diffs) / len(diffs)
    assert below - SKETCH_RANK_ERROR <= 0.95 <= at_or_below + SKETCH_RANK_ERROR
    assert view["false_pages"] == false_pages > 0
