"""The Burrow rules (DESIGN.md), table-driven, through the reference and the vectorised evaluator alike."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mirrorwatch.core.status import GroupStatus, PartitionStatus, group_status_of
from mirrorwatch.monitor.evaluator import Commit, WindowSet, partition_status, summarize

W = 5  # window size used by the table


def win(*triples):
    """(offset, ts_s, lag) → Commits (ts in seconds for readability)."""
    return [Commit(o, int(t * 1000), lag) for o, t, lag in triples]


# name, window (oldest first), current lag, now (s), allowed lag, caught-up time (s) or None, expected
CASES = [
    ("empty window is OK", [], None, 10, 0, None, PartitionStatus.OK),
    ("rule 1: current lag 0", win((10, 1, 5), (10, 2, 5), (10, 3, 5)), 0, 100, 0, None, PartitionStatus.OK),
    ("rule 1: lag within allowed", win((10, 1, 5), (10, 2, 5), (10, 3, 5)), 3, 100, 3, None, PartitionStatus.OK),
    (
        "rule 1: unknown current lag falls back to newest stored lag",
        win((10, 1, 5), (12, 2, 5), (14, 3, 0)),
        None,
        100,
        0,
        None,
        PartitionStatus.OK,
    ),
    (
        "rule 2: stopped (silent longer than window span)",
        win((10, 1, 5), (20, 2, 6), (30, 3, 7)),
        8,
        6,
        0,
        None,
        PartitionStatus.STOP,
    ),
    (
        "rule 2: exactly the span is not yet stopped (strict >)",
        win((10, 1, 5), (20, 2, 6), (30, 3, 7)),
        8,
        5,
        0,
        None,
        PartitionStatus.WARN,
    ),
    ("rule 2: single sample, later now → STOP", win((10, 1, 5)), 5, 2, 0, None, PartitionStatus.STOP),
    (
        "rule 2: single sample, now == its time → not STOP (and one sample cannot STALL)",
        win((10, 1, 5)),
        5,
        1,
        0,
        None,
        PartitionStatus.OK,
    ),
    (
        "rule 2: quiet topic, caught up recently → not STOP",
        win((10, 1, 5), (20, 2, 6), (30, 3, 7)),
        8,
        6,
        0,
        5,
        PartitionStatus.WARN,
    ),
    ("rule 2: caught up long ago → STOP", win((10, 1, 5), (20, 2, 6), (30, 3, 7)), 8, 10, 0, 4, PartitionStatus.STOP),
    ("rule 2 beats rewind", win((30, 1, 5), (10, 2, 6), (20, 3, 7)), 8, 9, 0, None, PartitionStatus.STOP),
    (
        "rule 3: rewind in the middle, not recovered",
        win((10, 1, 5), (20, 2, 6), (5, 3, 9), (8, 4, 8), (9, 5, 8)),
        8,
        5,
        0,
        None,
        PartitionStatus.REWIND,
    ),
    (
        "rule 3: rewind in the middle, recovered",
        win((10, 1, 5), (20, 2, 6), (5, 3, 9), (20, 4, 8), (25, 5, 7)),
        8,
        5,
        0,
        None,
        PartitionStatus.OK,
    ),
    (
        "rule 3: recovered to exactly the pre-rewind offset is forgiven",
        win((10, 1, 9), (20, 2, 9), (5, 3, 9), (20, 4, 9), (20, 5, 9)),
        9,
        5,
        0,
        None,
        PartitionStatus.WARN,
    ),
    (
        "rule 3: rewind at the newest sample",
        win((10, 1, 5), (20, 2, 6), (30, 3, 7), (40, 4, 9), (35, 5, 9)),
        9,
        5,
        0,
        None,
        PartitionStatus.REWIND,
    ),
    ("rule 3 beats lag-zero-in-window", win((10, 1, 0), (20, 2, 6), (5, 3, 9)), 9, 3, 0, None, PartitionStatus.REWIND),
    (
        "rule 4: lag zero at the oldest sample",
        win((10, 1, 0), (10, 2, 5), (10, 3, 9)),
        9,
        3,
        0,
        None,
        PartitionStatus.OK,
    ),
    ("rule 4: lag zero in the middle", win((10, 1, 5), (12, 2, 0), (12, 3, 9)), 9, 3, 0, None, PartitionStatus.OK),
    (
        "rule 4: lag within allowed somewhere",
        win((10, 1, 5), (10, 2, 2), (10, 3, 9)),
        9,
        3,
        2,
        None,
        PartitionStatus.OK,
    ),
    (
        "rule 5: stalled (same offset throughout)",
        win((10, 1, 5), (10, 2, 6), (10, 3, 7)),
        7,
        3,
        0,
        None,
        PartitionStatus.STALL,
    ),
    ("rule 5: full window stalled", win(*[(10, t, 5) for t in range(1, W + 1)]), 5, W, 0, None, PartitionStatus.STALL),
    ("rule 6: lag growing → WARN", win((10, 1, 5), (20, 2, 6), (30, 3, 7)), 8, 3, 0, None, PartitionStatus.WARN),
    (
        "rule 6: flat lag counts as not decreasing (tie)",
        win((10, 1, 5), (20, 2, 5), (30, 3, 5)),
        5,
        3,
        0,
        None,
        PartitionStatus.WARN,
    ),
    ("rule 6: one decrease → OK", win((10, 1, 5), (20, 2, 4), (30, 3, 7)), 8, 3, 0, None, PartitionStatus.OK),
    (
        "rule 6: unknown lags are skipped (5, ?, 3 decreases)",
        win((10, 1, 5), (20, 2, None), (30, 3, 3)),
        3,
        3,
        0,
        None,
        PartitionStatus.OK,
    ),
    (
        "rule 6: unknown lags are skipped (5, ?, 6 does not)",
        win((10, 1, 5), (20, 2, None), (30, 3, 6)),
        6,
        3,
        0,
        None,
        PartitionStatus.WARN,
    ),
    (
        "rule 6: no known lag at all is vacuously not decreasing",
        win((10, 1, None), (20, 2, None)),
        None,
        2,
        0,
        None,
        PartitionStatus.WARN,
    ),
    (
        "rule 7: lag decreasing, offsets moving",
        win((10, 1, 9), (20, 2, 7), (30, 3, 4)),
        4,
        3,
        0,
        None,
        PartitionStatus.OK,
    ),
    ("window not yet full, moving and lag growing", win((10, 1, 1), (11, 2, 3)), 4, 2, 0, None, PartitionStatus.WARN),
    ("ties in commit times: span 0, now equal", win((10, 1, 5), (20, 1, 6)), 6, 1, 0, None, PartitionStatus.WARN),
    ("ties in commit times: span 0, now later", win((10, 1, 5), (20, 1, 6)), 6, 1.01, 0, None, PartitionStatus.STOP),
]


def _load(case_windows):
    """A WindowSet whose rows are the table's windows (arrays set directly: the table is about the rules)."""
    ws = WindowSet(len(case_windows), W)
    for row, (window, current, _allowed, caught) in enumerate(case_windows):
        n = len(window)
        for j, c in enumerate(window):
            col = W - n + j
            ws.offsets[col, row], ws.times[col, row] = c.offset, c.ts_ms
            ws.lags[col, row] = -1 if c.lag is None else c.lag
        ws.count[row] = n
        ws.current_lag[row] = (
            (-1 if window[-1].lag is None else window[-1].lag)
            if current is None and n
            else (-1 if current is None else current)
        )
        if caught is not None:
            ws.caught_up[row] = int(caught * 1000)
    return ws


@pytest.mark.parametrize("name,window,current,now,allowed,caught,expected", CASES, ids=[c[0] for c in CASES])
def test_rule_table_reference(name, window, current, now, allowed, caught, expected):
    got = partition_status(window, current, int(now * 1000), allowed, None if caught is None else int(caught * 1000))
    assert got == expected


@pytest.mark.parametrize("name,window,current,now,allowed,caught,expected", CASES, ids=[c[0] for c in CASES])
def test_rule_table_vectorised(name, window, current, now, allowed, caught, expected):
    ws = _load([(window, current, allowed, caught)])
    ws.allowed_lag = allowed
    assert ws.evaluate(int(now * 1000))[0] == expected


def test_vectorised_matches_reference_on_random_windows():
    rng = random.Random(7)
    rows = []
    for _ in range(3000):
        n = rng.randint(0, W)
        t, off, window = 0, rng.randint(0, 50), []
        for _ in range(n):
            t += rng.choice([0, 1, 1, 2])
            off = max(0, off + rng.choice([-10, 0, 0, 1, 3, 5]))
            window.append(Commit(off, t * 1000, rng.choice([None, 0, 1, 2, 3, 5, 8, 13])))
        current = rng.choice([None, 0, 1, 4, 9])
        caught = rng.choice([None, None, 0, t, t + 1])
        rows.append((window, current, 0, caught))
    ws = _load(rows)
    now = 6000
    got = ws.evaluate(now)
    for row, (window, current, allowed, caught) in enumerate(rows):
        cur = current if current is not None else (window[-1].lag if window else None)
        want = partition_status(window, cur, now, allowed, None if caught is None else caught * 1000)
        assert got[row] == want, (window, current, caught)


# ----------------------------------------------------------------- observe(): what gets stored


def test_alive_consumer_with_same_offset_fills_window_and_stalls():
    ws = WindowSet(1, 3)
    for i in range(4):
        ws.observe(i * 1000, np.array([10]), np.array([15]), alive=True)
    assert ws.count[0] == 3 and ws.current_lag[0] == 5
    assert ws.evaluate(3000)[0] == PartitionStatus.STALL


def test_alive_consumer_sampled_faster_than_it_commits_does_not_stall():
    ws = WindowSet(1, 3, stop_grace_ms=5000)
    for i in range(5):  # sampled every second, commits every 5 s: same offset seen 5 times
        ws.observe(i * 1000, np.array([10]), np.array([15 + i]), alive=True, repeat_after_ms=5000)
    assert ws.count[0] == 1 and ws.evaluate(4000)[0] == PartitionStatus.OK
    ws.observe(5000, np.array([10]), np.array([20]), alive=True, repeat_after_ms=5000)  # a commit interval passed
    assert ws.count[0] == 2 and ws.evaluate(5000)[0] == PartitionStatus.STALL


def test_dead_consumer_stores_nothing_new_and_stops():
    ws = WindowSet(1, 3)
    ws.observe(0, np.array([10]), np.array([12]), alive=True)
    ws.observe(1000, np.array([11]), np.array([14]), alive=True)
    for i in range(2, 6):
        ws.observe(i * 1000, np.array([11]), np.array([14 + i]), alive=False)
    assert ws.count[0] == 2
    assert ws.current_lag[0] == 19 - 11  # lag follows the sampled end offset, not the last commit
    assert ws.evaluate(5000)[0] == PartitionStatus.STOP


def test_quiet_topic_consumer_is_not_stopped_when_data_just_arrived():
    ws = WindowSet(1, 3)
    ws.observe(0, np.array([10]), np.array([12]), alive=False)
    ws.observe(2000, np.array([12]), np.array([12]), alive=False)  # caught up, then the topic goes quiet
    ws.observe(60_000, np.array([12]), np.array([12]), alive=False)
    ws.observe(61_000, np.array([12]), np.array([14]), alive=False)  # data arrives
    # Burrow: 61 s since the newest commit > 2 s span → STOP. Here the clock starts when data arrived.
    assert ws.evaluate(61_000)[0] != PartitionStatus.STOP
    assert ws.evaluate(62_000)[0] != PartitionStatus.STOP
    assert ws.evaluate(62_001)[0] == PartitionStatus.STOP  # and a consumer that really is gone is still caught


def test_stop_grace_is_a_floor_for_the_window_span():
    ws = WindowSet(1, 3, stop_grace_ms=10_000)
    ws.observe(0, np.array([10]), np.array([15]), alive=False)
    assert ws.evaluate(10_000)[0] != PartitionStatus.STOP
    assert ws.evaluate(10_001)[0] == PartitionStatus.STOP
    assert partition_status([Commit(10, 0, 5)], 5, 10_000, stop_grace_ms=10_000) != PartitionStatus.STOP


def window_of(ws: WindowSet, col: int) -> list[Commit]:
    """One partition's stored window as plain values, oldest first."""
    first = ws.window - int(ws.count[col])
    return [
        Commit(int(o), int(t), None if lag < 0 else int(lag))
        for o, t, lag in zip(ws.offsets[first:, col], ws.times[first:, col], ws.lags[first:, col])
    ]


def test_min_distance_overwrites_newest_and_keeps_its_time():
    ws = WindowSet(1, 4, min_distance_ms=5000)
    ws.observe(0, np.array([10]), np.array([20]), alive=True)
    ws.observe(1000, np.array([12]), np.array([20]), alive=True)
    ws.observe(2000, np.array([14]), np.array([20]), alive=True)
    assert window_of(ws, 0) == [Commit(14, 0, 6)]
    ws.observe(6000, np.array([16]), np.array([20]), alive=True)
    assert window_of(ws, 0) == [Commit(14, 0, 6), Commit(16, 6000, 4)]


def test_rewind_then_recovery_through_observe():
    ws = WindowSet(1, 4)
    for i, off in enumerate([100, 110, 50]):
        ws.observe(i * 1000, np.array([off]), np.array([200]), alive=True)
    assert ws.evaluate(2000)[0] == PartitionStatus.REWIND
    ws.observe(3000, np.array([120]), np.array([200]), alive=True)
    assert ws.evaluate(3000)[0] != PartitionStatus.REWIND


def test_no_commit_rows_stay_empty_and_ok():
    ws = WindowSet(2, 3)
    ws.observe(0, np.array([-1, 5]), np.array([10, 10]), alive=True)
    assert list(ws.count) == [0, 1]
    assert ws.evaluate(0)[0] == PartitionStatus.OK


def test_remap_keeps_state_of_surviving_rows():
    ws = WindowSet(2, 3)
    ws.observe(0, np.array([5, 7]), np.array([9, 9]), alive=True)
    moved = ws.remapped([("a", 0), ("a", 1)], [("a", 1), ("b", 0)])
    assert window_of(moved, 0) == [Commit(7, 0, 2)] and moved.count[1] == 0


# ------------------------------------------------------------------------- group


@pytest.mark.parametrize(
    "codes,expected",
    [
        ([], GroupStatus.OK),
        ([PartitionStatus.OK, PartitionStatus.OK], GroupStatus.OK),
        ([PartitionStatus.OK, PartitionStatus.WARN], GroupStatus.WARN),
        ([PartitionStatus.WARN, PartitionStatus.STOP], GroupStatus.ERR),
        ([PartitionStatus.STALL], GroupStatus.ERR),
        ([PartitionStatus.REWIND, PartitionStatus.OK], GroupStatus.ERR),
        ([PartitionStatus.OK, PartitionStatus.UNKNOWN], GroupStatus.UNKNOWN),
        ([PartitionStatus.LOST, PartitionStatus.OK], GroupStatus.ERR),
    ],
)
def test_group_status_worst_of(codes, expected):
    assert group_status_of(codes) == expected
    # production's path: the evaluator's summary of a cycle's status array applies the same rule
    ws = WindowSet(len(codes), 2)
    assert summarize(ws, np.array(codes, np.int8)).status == expected


def test_summary_complete_totallag_maxlag_ties():
    ws = WindowSet(3, 2)
    ws.observe(0, np.array([1, 1, 1]), np.array([5, 5, 2]), alive=True)
    ws.observe(1000, np.array([1, 2, 1]), np.array([5, 6, 2]), alive=False)
    summary = summarize(ws, ws.evaluate(1000))
    assert summary.totallag == 4 + 4 + 1
    assert summary.maxlag_row == 0 and summary.maxlag == 4  # tie between rows 0 and 1: the first wins
    assert summary.complete == pytest.approx(1 / 3)
    # rows 0 and 2 hold one sample each (not alive, no new offset) and time moved on: STOP → group ERR
    assert (
        list(ws.status) == [PartitionStatus.STOP, PartitionStatus.WARN, PartitionStatus.STOP]
        and summary.status == GroupStatus.ERR
    )
