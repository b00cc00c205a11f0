"""The target-side acked_next estimate, records lost and the keeping-up forecast — pure, table-driven."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mirrorwatch.core.lag import catch_up_seconds, records_lost, target_side_acked_next

# source_end S, committed, sync (u → d, acked_next A), target end T, one_to_one → estimated acked_next
# (-1 = unknown)
TABLE = [
    # the newest sync is stale: 40 more copies landed after d → u + (T − d)
    ("stale sync, no gaps", 200, 90, 99, 99, 100, 140, True, 140),
    ("caught up: target end says everything is there", 200, 90, 99, 99, 100, 200, True, 200),
    ("source end sampled later than the target: capped at S", 150, 90, 99, 99, 100, 200, True, 150),
    ("sync exactly current (T = d + 1)", 200, 90, 99, 99, 100, 100, True, 100),
    ("commit newer than the sync", 200, 120, 99, 99, 100, 110, True, 120),
    ("sync acked_next past u (loop-guard skips)", 200, 90, 99, 99, 130, 120, True, 130),
    ("identity: the target end proves nothing", 200, 90, 99, 99, 100, 190, False, 100),
    ("no sync yet: the commit", 200, 90, -1, -1, -1, 190, True, 90),
    ("target end unknown", 200, 90, 99, 99, 100, -1, True, 100),
    ("target truncated below d (target_behind's case)", 200, 90, 99, 99, 100, 50, True, 100),
    ("offsets shifted: target started later than the source", 1200, 900, 1099, 99, 1100, 140, True, 1140),
    ("nothing known", -1, -1, -1, -1, -1, -1, True, -1),
    ("source end unknown: uncapped estimate", -1, 90, 99, 99, 100, 140, True, 140),
]


@pytest.mark.parametrize("name,end,committed,up,down,acked,tend,one_to_one,expected", TABLE, ids=[r[0] for r in TABLE])
def test_target_side_acked_next_table(name, end, committed, up, down, acked, tend, one_to_one, expected):
    got = target_side_acked_next([end], [committed], [up], [down], [acked], [tend], one_to_one=[one_to_one])
    assert got.tolist() == [expected]


def test_vectorised_matches_row_by_row():
    cols = list(zip(*[r[1:8] for r in TABLE]))
    got = target_side_acked_next(*cols[:6], one_to_one=list(cols[6]))
    assert got.tolist() == [r[8] for r in TABLE]


def test_never_above_the_truth_on_a_source_with_gaps():
    """Random source logs with gaps (markers, compaction) mirrored in order: the estimate never passes the true
    acked_next and is low by at most the gaps between u and the truth (the documented bound)."""
    rng = np.random.default_rng(7)
    for _ in range(2000):
        n = int(rng.integers(1, 300))
        offsets = np.cumsum(rng.integers(1, 4, n)) - 1  # data records' source offsets, gaps of 0-2
        end = int(offsets[-1]) + 1 + int(rng.integers(0, 3))  # maybe a marker after the last record
        on_target = int(rng.integers(0, n + 1))  # the first on_target records are copied (target offsets 0..)
        synced = int(rng.integers(0, on_target)) if on_target else -1  # the sync's record index
        truth = int(offsets[on_target]) if on_target < n else end
        if synced < 0:
            u = d = acked = -1
        else:
            u, d, acked = int(offsets[synced]), synced, int(offsets[synced]) + 1
        est = int(target_side_acked_next([end], [-1], [u], [d], [acked], [on_target])[0])
        if synced >= 0:
            assert est <= truth
            gaps = (truth - u - 1) - (on_target - 1 - synced)  # source offsets after u with no record copied
            assert truth - est <= gaps


# A transactional target: source offsets 0.. copied in order, each transaction followed by its commit marker, some
# transactions aborted (their records stay in the log, invisible to read_committed). Columns as TABLE, plus what the
# old extrapolation u + (T − d) would have said: with markers it overshoots the truth (lag under-reported).
# Target log of "three transactions of 10": records 0-9 @0-9, marker @10, 10-19 @11-20, marker @21, 20-29 @22-31,
# marker @32 → T = 33; the newest sync is source 9 @ 9 (acked_next 10).
TRANSACTIONAL = [
    # name, S, committed, u, d, A, T, expected (truth), the old extrapolation
    ("markers after the sync: no extrapolation", 40, 5, 9, 9, 10, 33, 10, 33),
    ("committed newer than the sync (source group written after each commit)", 40, 30, 9, 9, 10, 33, 30, 33),
    # an aborted transaction of 10 after the sync (target 11-20, its marker @21), the retry 10-19 @22-31, marker @32
    ("aborted records and markers after the sync", 40, 5, 9, 9, 10, 33, 10, 33),
    # MM2 publishes no acked_next: the synced record itself is proven committed (the sync follows the commit)
    ("MM2: no acked_next, the synced record + 1", 40, 5, 9, 9, -1, 33, 10, 33),
    ("MM2: committed (Connect offsets, same transaction) ahead of the sync", 40, 25, 9, 9, -1, 33, 25, 33),
    ("the sync's record is the last one before a marker (T = d + 2)", 40, 5, 9, 9, -1, 11, 10, 11),
    ("target truncated below d: the sync proves nothing", 40, 5, 9, 9, -1, 9, 5, 5),
    ("no sync yet: the commit", 40, 5, -1, -1, -1, 33, 5, 5),
    ("idle and caught up: the commit is the source end", 40, 40, 39, 51, 40, 53, 40, 40),
]


@pytest.mark.parametrize(
    "name,end,committed,up,down,acked,tend,expected,extrapolated", TRANSACTIONAL, ids=[r[0] for r in TRANSACTIONAL]
)
def test_transactional_target_never_extrapolates(name, end, committed, up, down, acked, tend, expected, extrapolated):
    got = target_side_acked_next([end], [committed], [up], [down], [acked], [tend], True, transactional=True)
    assert got.tolist() == [expected]
    # the trap this guards against: the plain-target estimate counts the markers and aborted records as copies
    plain = target_side_acked_next([end], [committed], [up], [down], [acked], [tend], True)
    assert plain.tolist() == [min(max(extrapolated, expected), end)]


def test_never_above_the_truth_on_a_transactional_target():
    """Random transactional targets (transactions of 1-20 records, a commit marker after each, one in four
    aborted and retried), syncs at random committed records: the estimate never passes the true acked_next (the
    next source offset not yet committed on the target), while the plain estimate sometimes does."""
    rng = np.random.default_rng(28)
    overshoots = 0
    for _ in range(2000):
        target: list[int] = []  # per target offset: the source offset of a committed copy, -1 marker/aborted
        next_source = 0
        while len(target) < 300:
            size = int(rng.integers(1, 21))
            if rng.random() < 0.25:  # aborted: its records and its marker, none of them visible
                target += [-1] * (size + 1)
            target += list(range(next_source, next_source + size)) + [-1]
            next_source += size
        cut = int(rng.integers(1, len(target) + 1))  # the target end at sampling (whole transactions or not)
        visible = [s for s in target[:cut] if s >= 0]
        if not visible:
            continue
        # records of a transaction not yet committed at the cut are not acknowledged: the truth ends at the last
        # committed transaction (its marker inside the cut)
        last_marker = max((i for i in range(cut) if target[i] == -1 and i > 0 and target[i - 1] >= 0), default=-1)
        committed_copies = [s for s in target[: last_marker + 1] if s >= 0]
        if not committed_copies:
            continue
        truth = committed_copies[-1] + 1
        synced_at = [i for i in range(last_marker + 1) if target[i] >= 0]
        d = int(rng.choice(synced_at))
        u = target[d]
        est = int(target_side_acked_next([10**6], [-1], [u], [d], [-1], [cut], True, transactional=True)[0])
        assert u + 1 <= est <= truth
        overshoots += int(target_side_acked_next([10**6], [-1], [u], [d], [-1], [cut], True)[0]) > truth
    assert overshoots > 100  # the trap is real: the plain estimate passes the truth on such targets


# log start, committed → records lost
@pytest.mark.parametrize(
    "start,committed,expected",
    [
        (0, 0, 0),
        (1500, 1000, 500),
        (1000, 1500, 0),
        (-1, 1000, -1),
        (1500, -1, -1),
        (500, 500, 0),
    ],
)
def test_records_lost(start, committed, expected):
    assert records_lost([start], [committed]).tolist() == [expected]


# lag, produce rate, mirror rate, keeping-up lag → forecast seconds
@pytest.mark.parametrize(
    "lag,produce,mirror,keeping,expected",
    [
        (40, 200.0, 200.0, 1000.0, 0.2),  # steady traffic, a lag within one interval: keeping up
        (40, 200.0, 190.0, 1000.0, 40 / 190),  # rates measured a little apart: still keeping up
        (4000, 200.0, 200.0, 1000.0, math.inf),  # a lag beyond one interval of production that does not shrink
        (40, 200.0, 0.0, 1000.0, math.inf),  # nothing mirrored at all
        (100, 100.0, 200.0, 0.0, 1.0),  # gaining: lag / gain, as before
        (0, 200.0, 0.0, 0.0, 0.0),  # caught up
    ],
)
def test_keeping_up_forecast(lag, produce, mirror, keeping, expected):
    got = float(catch_up_seconds([lag], [produce], [mirror], [keeping])[0])
    assert got == pytest.approx(expected)


# earlier samples (ts_ms, source end), acked_next, now → seconds the record at acked_next can have been on the source
@pytest.mark.parametrize(
    "samples,acked,now,expected",
    [
        ([(1000, 50), (6000, 90)], 95, 11000, 5.0),  # not there at 6000 (end 90 ≤ 95): at most 5 s on the source
        ([(1000, 50), (6000, 90)], 70, 11000, 10.0),  # there at 6000, not at 1000: at most 10 s
        ([(1000, 50), (6000, 90)], 40, 11000, math.inf),  # there at every sample: no bound
        ([], 40, 11000, math.inf),
        ([(1000, -1)], 40, 11000, math.inf),  # end unknown then
        ([(1000, 50)], -1, 11000, math.inf),  # acked unknown
    ],
)
def test_arrival_age_bound(samples, acked, now, expected):
    from mirrorwatch.monitor.timelag import arrival_age_bound

    got = arrival_age_bound([(ts, [end]) for ts, end in samples], [acked], now)
    assert got.tolist() == [expected]


def test_which_targets_are_transactional():
    """core.delivery: the configuration's answer, the one every target-offset figure asks."""
    from mirrorwatch.core.config_loading import config_from_dict
    from mirrorwatch.core.delivery import transactional_target

    clusters = {"a": {"bootstrap.servers": "a:9092"}, "b": {"bootstrap.servers": "b:9092"}}
    flows = {"ours": {"source": "a", "target": "b"}, "mm2": {"source": "b", "target": "a", "mirror": {"kind": "mm2"}}}

    def answers(body):
        config = config_from_dict({"clusters": clusters, "flows": flows, **body})
        return {name: transactional_target(config, flow) for name, flow in config.flows.items()}

    assert answers({}) == {"ours": False, "mm2": False}
    assert answers({"mirror": {"delivery": "exactly_once"}}) == {"ours": True, "mm2": False}
    flows["mm2"]["mirror"]["exactly_once"] = True
    assert answers({}) == {"ours": False, "mm2": True}
