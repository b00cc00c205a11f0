"""The analytics outputs' columns that come from KLL sketches (docs/analytics.md): equal across runs only within the
sketch's rank error, so the tests that compare two runs' tables leave them out or compare them with a tolerance."""

from __future__ import annotations

PERCENTILES = (50, 95, 99)
SKETCHED: dict[str, set[str]] = {
    "lag_daily": {f"{k}_p{p}" for k in ("true_lag", "committed_lag", "time_lag_s") for p in PERCENTILES},
    "committed_view": {f"committed_minus_true_p{p}" for p in PERCENTILES},
    "trend_daily": {"true_lag_p99", "time_lag_s_p99", "true_lag_p99_change", "time_lag_s_p99_change"},
    "trend": {
        "first_true_lag_p99",
        "last_true_lag_p99",
        "true_lag_p99_change",
        "true_lag_p99_change_ratio",
        "true_lag_p99_slope_per_day",
        "time_lag_s_p99_slope_per_day",
    },
}
