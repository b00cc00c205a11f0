"""``core.rpo.rpo_seconds``, the RPO's one arithmetic (the monitor and ``mirror failover check`` call it), table-driven."""

from __future__ import annotations

import math

import pytest

from mirrorwatch.core.rpo import rpo_seconds

NOW = 1_000_000


@pytest.mark.parametrize(
    "true_lag, oldest_ms, bound, expected",
    [
        (0, NOW - 5000, math.inf, 0.0),  # nothing missing: 0, whatever the record's time
        (0, math.nan, math.inf, 0.0),
        (3, NOW - 5000, math.inf, 5.0),  # the oldest missing record's age at the moment measured
        (3, NOW + 2000, math.inf, 0.0),  # produced after the target's end was read: not missing then
        (3, NOW - 5000, 2.0, 2.0),  # it reached the source at most 2 s ago (an earlier sample): capped
        (3, NOW - 5000, 9.0, 5.0),
        (3, math.nan, math.inf, math.nan),  # its time could not be read: unknown, never 0
        (-1, NOW - 5000, math.inf, math.nan),  # true lag unknown
    ],
)
def test_rpo_seconds(true_lag, oldest_ms, bound, expected):
    got = float(rpo_seconds([true_lag], [oldest_ms], NOW, [bound])[0])
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_rpo_seconds_without_a_bound_is_the_age():
    assert rpo_seconds([1, 0, 2], [NOW - 1500, NOW, NOW - 250], NOW).tolist() == [1.5, 0.0, 0.25]
