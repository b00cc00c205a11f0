"""Offset translation through syncs: conservative (never past the truth), exact when a sync is adjacent."""

import pytest

from mirrorwatch.core.records import OffsetSync
from mirrorwatch.mirror.offset_store import OffsetSyncStore


def store_with(*pairs, limit=2000):
    store = OffsetSyncStore(per_partition=limit)
    for up, down in pairs:
        store.add(OffsetSync("t", 0, up, down, up + 1, up + 1, 0))
    return store


@pytest.mark.parametrize(
    "pairs,committed,expected",
    [
        ([], 5, None),  # no syncs: no safe answer
        ([(10, 110)], 10, None),  # only a sync at/after the commit
        ([(10, 110)], 11, (111, 0)),  # exact: the sync is the record just before
        ([(10, 110)], 15, (111, 4)),  # 11..14 re-delivered at most
        ([(10, 110), (20, 120)], 20, (111, 9)),  # newest sync strictly below the commit
        ([(10, 110), (20, 120)], 21, (121, 0)),
        ([(10, 110), (20, 120)], 1000, (121, 979)),
        ([(0, 0)], 1, (1, 0)),
        ([(10, 110), (20, 120), (15, 200)], 21, (201, 5)),  # a re-sent mapping replaces what came after it
        ([(10, 110), (20, 120), (15, 200)], 16, (201, 0)),
    ],
)
def test_translate(pairs, committed, expected):
    result = store_with(*pairs).translate("t", 0, committed)
    assert (None if result is None else (result.downstream_offset, result.duplicates)) == expected


def test_never_overshoots_on_a_dense_one_to_one_map():
    # target offset = source offset + 7 for every record; syncs every 10th; any commit translates to ≤ truth
    store = store_with(*[(u, u + 7) for u in range(0, 1000, 10)])
    for committed in range(1, 1001):
        t = store.translate("t", 0, committed)
        assert t is not None and t.downstream_offset <= committed + 7
        assert t.duplicates == committed + 7 - t.downstream_offset >= 0


def test_bounded_memory_keeps_old_syncs_thinned():
    store = store_with(*[(u, u) for u in range(0, 10_000)], limit=100)
    assert len(store._upstream[("t", 0)]) <= 100
    assert store.translate("t", 0, 5).downstream_offset <= 5  # old commits still translate, conservatively
    assert store.translate("t", 0, 10_000).duplicates == 0  # the newest stay exact


def test_position_reports_without_mapping_are_kept_as_latest_only():
    store = OffsetSyncStore()
    store.add(OffsetSync("t", 1, -1, -1, 0, 0, 0))
    assert store.latest[("t", 1)].acked_next == 0 and store.translate("t", 1, 0) is None
