"""Checkpoint translation onto a transactional target (issue 28): commit markers and aborted records between the
copies. Pure and table-driven: a target log is a list of what each target offset holds (a source offset's
committed copy, or -1 for a marker or an aborted record), a read_committed consumer resuming at an offset is
simulated by skipping the -1s, and every translation must skip nothing and re-deliver no more than it says."""

from __future__ import annotations

import numpy as np
import pytest

from mirrorwatch.core.records import OffsetSync
from mirrorwatch.core.translation import checkpoint_redelivery
from mirrorwatch.mirror.offset_store import OffsetSyncStore

M = -1  # a commit/abort marker, or a record of an aborted transaction: invisible to read_committed

# records 0-4 in one transaction, its marker, an aborted try of 5-7 (3 records + abort marker), the retry of 5-7
# and its marker, 8-9 and its marker
TARGET = [0, 1, 2, 3, 4, M, M, M, M, M, 5, 6, 7, M, 8, 9, M]


def read_committed_from(target: list[int], offset: int) -> list[int]:
    return [s for s in target[offset:] if s != M]


def syncs_of(target: list[int], synced: list[int]) -> list[tuple[int, int]]:
    """(upstream, downstream) syncs for the given source offsets, where their committed copies sit."""
    return [(s, target.index(s)) for s in synced]


# synced source offsets, the group's commit → (target offset to resume at, records re-delivered there)
TABLE = [
    ("commit right after a synced record: exact, the markers skipped", [0, 4], 5, 5, 0),
    ("commit after the aborted try: resume past the sync, the aborted records unseen", [0, 4], 7, 5, 2),
    ("a sync after the retried records: exact", [0, 4, 7], 8, 13, 0),
    ("commit between two syncs with markers in between", [0, 7], 6, 1, 5),
    ("commit at the end", [4, 9], 10, 16, 0),
]


@pytest.mark.parametrize("name,synced,commit,resume,again", TABLE, ids=[r[0] for r in TABLE])
def test_engine_translation_skips_nothing_with_markers(name, synced, commit, resume, again):
    store = OffsetSyncStore()
    for u, d in syncs_of(TARGET, synced):
        store.add(OffsetSync("t", 0, u, d, u + 1, u + 1, 0))
    t = store.translate("t", 0, commit)
    assert t is not None and t.downstream_offset == resume
    read = read_committed_from(TARGET, t.downstream_offset)
    assert read == list(range(commit - again, 10))  # every record from the commit on, once, after `again` others
    assert again <= t.duplicates


@pytest.mark.parametrize("name,synced,commit,resume,again", TABLE, ids=[r[0] for r in TABLE])
def test_redelivery_counts_records_not_offsets(name, synced, commit, resume, again):
    """MM2's checkpoint (the newest sync below the commit, + 1) read back: the re-delivery the failover check reports
    on a transactional target is what a read_committed consumer really reads again."""
    syncs = syncs_of(TARGET, synced)
    assert checkpoint_redelivery(syncs, commit, resume, transactional=True) == again


def test_redelivery_through_an_older_sync_than_the_newest():
    """MM2 kept only the sync of source 0 and checkpointed commit 6 at 1; the failover check also has the sync
    of 5 (@ 10). Records 1-5 come again (5), but the target-offset distance to the commit's copy (11 − 1 = 10)
    counts the markers and the aborted try: the plain formula over-reports by 5, the transactional count is exact."""
    syncs = syncs_of(TARGET, [0, 5])
    assert read_committed_from(TARGET, 1)[:6] == [1, 2, 3, 4, 5, 6]
    assert checkpoint_redelivery(syncs, 6, 1, transactional=True) == 5
    assert checkpoint_redelivery(syncs, 6, 1) == 10


def test_redelivery_never_below_the_truth_on_random_transactional_targets():
    rng = np.random.default_rng(2028)
    for _ in range(1000):
        target, source = [], 0
        while source < 200:
            size = int(rng.integers(1, 15))
            if rng.random() < 0.25:
                target += [M] * (size + 1)  # an aborted try: records and abort marker
            target += list(range(source, source + size)) + [M]
            source += size
        synced = sorted(int(s) for s in rng.choice(source, int(rng.integers(1, 10)), replace=False))
        syncs = syncs_of(target, synced)
        commit = int(rng.integers(synced[0] + 1, source + 1))
        u, d = max((s for s in syncs if s[0] < commit), key=lambda s: s[0])
        cp_downstream = d + 1  # MM2's translation: the newest sync below the commit, + 1
        read = read_committed_from(target, cp_downstream)
        truth = sum(1 for s in read if s < commit)
        assert read[truth:] == list(range(commit, source))  # nothing skipped
        got = checkpoint_redelivery(syncs, commit, cp_downstream, transactional=True)
        assert got == truth  # exact on a source without gaps
