"""RPO seconds: the age of the oldest source record not yet on the target. The one function every surface's
figure comes from (the monitor's sampler, ``mirror failover check``); docs/metrics.md names it.

Where that record's production time comes from is the caller's: the monitor reads its timestamp
(``monitor.time_lag_mode: exact``) or interpolates it from sampled end offsets (``interpolate``); the failover
check reads it. The arithmetic is here, once.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def rpo_seconds(
    true_lag: ArrayLike,
    oldest_missing_ms: ArrayLike,
    measured_at_ms: float,
    arrived_within_s: ArrayLike = np.inf,
) -> np.ndarray:
    """Seconds per partition: 0 where nothing is missing (``true_lag == 0``); the age of the oldest missing
    record at ``measured_at_ms`` (the moment the target's end was read: a record produced after it was not
    missing then) where ``true_lag > 0``; NaN where the true lag or that record's time is unknown (negative lag,
    NaN time), never 0.

    ``arrived_within_s``: an upper bound of the time that record can have been on the source
    (``monitor.timelag.arrival_age_bound``: an earlier sample found it not yet there). A record created long
    before it reached the source (queued in a slow producer) is old by its CreateTime, but the mirror can only
    have kept it from the target since it arrived; both are upper bounds, so their minimum is too. A one-shot
    reading has no earlier sample: no bound (inf).
    """
    lag = np.asarray(true_lag, np.int64)
    produced = np.asarray(oldest_missing_ms, np.float64)
    with np.errstate(invalid="ignore"):
        age = np.minimum(np.maximum(0.0, (measured_at_ms - produced) / 1000.0), np.asarray(arrived_within_s, float))
    return np.where(lag == 0, 0.0, np.where(lag > 0, age, np.nan))
