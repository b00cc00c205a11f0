"""The expected analytics of a generated history, in numpy — the generator's ground truth.

Independent of Spark, but following the same definitions (``definitions``), so tests can demand that the Spark
job finds exactly these incidents and this compliance. Pure functions; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class SeriesFlags:
    weight_ms: np.ndarray  # int64, time each sample stands for
    unobserved_ms: np.ndarray  # int64, part of the spacing beyond the cap (sampling gaps)
    gap_after: np.ndarray  # bool, spacing to the next sample is a sampling gap
    breach: np.ndarray
    compliant: np.ndarray


HOUR_MS = 3_600_000


def hour_medians(ts_ms: np.ndarray) -> np.ndarray:
    """Per sample: the median of its series' spacings that begin and end in the sample's UTC hour (NaN if none)."""
    hours = ts_ms // HOUR_MS
    spacing = np.diff(ts_ms)
    out = np.full(len(ts_ms), np.nan)
    edges = [0, *(np.flatnonzero(np.diff(hours)) + 1).tolist(), len(ts_ms)]
    for a, b in zip(edges, edges[1:]):  # ts_ms is sorted: each hour is one slice
        if b - a >= 2:
            out[a:b] = np.median(spacing[a : b - 1])
    return out


def series_flags(
    ts_ms: np.ndarray,
    true_lag: np.ndarray,
    time_lag_s: np.ndarray,
    slo_lag: float,
    slo_time_s: float,
    gap_factor: float,
) -> SeriesFlags:
    """``true_lag`` / ``time_lag_s`` as float arrays with NaN for unknown; ``ts_ms`` sorted."""
    n = len(ts_ms)
    spacing = np.diff(ts_ms)
    median = hour_medians(ts_ms)
    weight = np.zeros(n, dtype=np.int64)
    unobserved = np.zeros(n, dtype=np.int64)
    gap_after = np.zeros(n, dtype=bool)
    has = ~np.isnan(median)
    cap = np.where(has, np.floor(gap_factor * np.nan_to_num(median)), 0).astype(np.int64)
    if n:
        weight[:-1] = np.where(has[:-1], np.minimum(spacing, cap[:-1]), 0)
        weight[-1] = int(np.floor(median[-1])) if has[-1] else 0
        unobserved[:-1] = np.where(has[:-1], np.maximum(spacing - cap[:-1], 0), spacing)
        with np.errstate(invalid="ignore"):
            gap_after[:-1] = has[:-1] & (spacing > gap_factor * median[:-1])
    with np.errstate(invalid="ignore"):
        breach = (true_lag > slo_lag) | (time_lag_s > slo_time_s)
        compliant = (true_lag <= slo_lag) & (time_lag_s <= slo_time_s)
    return SeriesFlags(weight, unobserved, gap_after, breach, compliant)


def series_incidents(
    ts_ms: np.ndarray, true_lag: np.ndarray, time_lag_s: np.ndarray, flags: SeriesFlags
) -> list[dict[str, Any]]:
    """Maximal runs of breach samples with no sampling gap inside; same fields as the Spark ``incidents`` table."""
    b = flags.breach
    n = len(b)
    prev_b = np.concatenate([[False], b[:-1]])
    prev_gap = np.concatenate([[False], flags.gap_after[:-1]])
    starts = np.flatnonzero(b & (~prev_b | prev_gap))
    out = []
    for s in starts:
        e = s
        while e + 1 < n and b[e + 1] and not flags.gap_after[e]:
            e += 1
        run_lag = true_lag[s : e + 1]
        if np.all(np.isnan(run_lag)):
            peak_lag = peak_ts = None
        else:
            k = int(np.nanargmax(run_lag))  # first occurrence of the maximum
            peak_lag, peak_ts = int(run_lag[k]), int(ts_ms[s + k])
        run_time = time_lag_s[s : e + 1]
        peak_time = None if np.all(np.isnan(run_time)) else float(np.nanmax(run_time))
        recovered = e + 1 < n and not flags.gap_after[e] and bool(flags.compliant[e + 1])
        ref = e + 1 if recovered else e
        rate = None
        if peak_lag is not None and peak_ts is not None and not np.isnan(true_lag[ref]) and int(ts_ms[ref]) != peak_ts:
            rate = (peak_lag - int(true_lag[ref])) / ((int(ts_ms[ref]) - peak_ts) / 1000.0)
        end_ref_ts = int(ts_ms[e + 1]) if recovered else int(ts_ms[e])
        out.append(
            {
                "start_ms": int(ts_ms[s]),
                "end_ms": int(ts_ms[e]),
                "recovered_ms": int(ts_ms[e + 1]) if recovered else None,
                "samples": int(e - s + 1),
                "duration_s": (end_ref_ts - int(ts_ms[s])) / 1000.0,
                "peak_true_lag": peak_lag,
                "peak_ms": peak_ts,
                "peak_time_lag_s": peak_time,
                "catch_up_rate_per_s": rate,
            }
        )
    return out
