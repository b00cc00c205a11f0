"""Lag math, the target cross-check, forecasts and time lag — pure functions, plain inputs, table-driven."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mirrorwatch.core.lag import (
    catch_up_seconds,
    describe_forecast,
    mirror_lags,
    plain_lag,
    rate,
    target_behind,
)
from mirrorwatch.monitor.timelag import OffsetTimeTable, produced_at, time_lag_interpolated


# source_end, committed, sync.acked_next, sync.read_position → committed, read, true lag
@pytest.mark.parametrize(
    "end,committed,acked,read,expected",
    [
        (100, 100, 100, 100, (0, 0, 0)),  # idle mirror: all exactly 0
        (100, 90, 95, 98, (10, 2, 5)),  # the seed's example shape: committed > true > read
        (100, 96, 95, 98, (4, 2, 4)),  # sync older than the commit: a commit implies an ack
        (100, 96, 95, 95, (4, 4, 4)),  # read position older than the commit too
        (100, None, 95, 98, (None, 2, 5)),  # no commit yet
        (100, 90, None, None, (10, 10, 10)),  # no sync yet: the commit is all we know
        (100, None, None, None, (None, None, None)),
        (None, 90, 95, 98, (None, None, None)),  # source end unknown
        (100, 120, 95, 98, (0, 0, 0)),  # positions beyond a stale end never give negative lag
        (0, None, None, None, (0, 0, 0)),  # an empty partition: nothing to mirror, before any commit or sync
    ],
)
def test_mirror_lag_table(end, committed, acked, read, expected):
    lags = mirror_lags(*([-1 if v is None else v] for v in (end, committed, acked, read)))
    got = tuple(None if lag[0] < 0 else int(lag[0]) for lag in (lags.committed_lag, lags.read_lag, lags.true_lag))
    assert got == expected
    c, r, t = got
    if None not in got:
        assert r <= t <= c  # the invariant, by construction


def test_invariant_holds_on_random_positions():
    rng = np.random.default_rng(3)
    n = 10_000
    committed = rng.integers(0, 1000, n)
    acked = committed + rng.integers(-50, 50, n)  # the sync may be older or newer than the commit
    read = acked + rng.integers(-50, 50, n)
    end = np.maximum.reduce([committed, acked, read]) + rng.integers(0, 100, n)
    lags = mirror_lags(end, committed, acked, read)
    assert (lags.read_lag <= lags.true_lag).all() and (lags.true_lag <= lags.committed_lag).all()
    assert (lags.read_lag >= 0).all()


def test_plain_lag():
    assert plain_lag([10, 10, -1], [4, -1, 3]).tolist() == [6, -1, -1]


@pytest.mark.parametrize(
    "target_end,downstream,behind",
    [
        (50, 40, False),
        (41, 40, False),
        (40, 40, True),
        (10, 40, True),
        (-1, 40, False),
        (50, -1, False),
    ],
)
def test_target_cross_check(target_end, downstream, behind):
    assert bool(target_behind([target_end], [downstream])[0]) is behind


@pytest.mark.parametrize(
    "lag,produce,mirror,expected",
    [
        (0, 10.0, 0.0, 0.0),  # caught up, even if the mirror is idle right now
        (100, 10.0, 20.0, 10.0),
        (100, 20.0, 20.0, math.inf),  # keeping pace is not catching up
        (100, 30.0, 20.0, math.inf),
        (100, math.nan, 20.0, math.nan),
        (-1, 1.0, 2.0, math.nan),
    ],
)
def test_catch_up_forecast(lag, produce, mirror, expected):
    got = float(catch_up_seconds([lag], [produce], [mirror])[0])
    assert (math.isnan(got) and math.isnan(expected)) or got == expected


def test_rate_and_description():
    assert rate([0, -1], 0, [50, 7], 5000).tolist()[0] == 10.0
    assert math.isnan(rate([0, -1], 0, [50, 7], 5000)[1])
    assert describe_forecast(math.inf) == "not catching up" and describe_forecast(0.0) == "caught up"
    assert describe_forecast(90) == "~1.5m" and describe_forecast(None) == "unknown"


# ---------------------------------------------------------------------------- time lag

POINTS = [(100, 0), (200, 10_000), (200, 20_000), (300, 30_000)]  # (source end, ms)


@pytest.mark.parametrize(
    "offset,expected_ms,bound",
    [
        (300, None, False),  # caught up with the newest end: nothing is behind
        (250, 20_000 + 51 / 100 * 10_000, False),  # produced in (20 s, 30 s]
        (100, 0 + 1 / 100 * 10_000, False),  # first record after the oldest pair
        (199, 10_000, False),
        (50, -7_500, True),  # older than the table: extrapolated at the table's rate (150 ms/record)
    ],
)
def test_produced_at_interpolation(offset, expected_ms, bound):
    at, is_bound = produced_at(POINTS, offset)
    assert is_bound is bound
    assert at == pytest.approx(expected_ms) if expected_ms is not None else at is None


def test_time_lag_modes():
    assert time_lag_interpolated(POINTS, 300, 40_000) == 0.0
    assert time_lag_interpolated(POINTS, 250, 40_000) == pytest.approx((40_000 - 25_100) / 1000)
    assert time_lag_interpolated([], 250, 40_000) is None


def test_offset_time_table_keeps_first_and_last_seen_of_a_quiet_end():
    table = OffsetTimeTable(size=10)
    for end, ts in [(100, 0), (200, 10), (200, 20), (200, 30), (300, 40)]:
        table.add(("t", 0), end, ts)
    assert table.points(("t", 0)) == [(100, 0), (200, 10), (200, 30), (300, 40)]
    table.add(("t", 0), 5, 50)  # recreated topic
    assert table.points(("t", 0)) == [(5, 50)]
