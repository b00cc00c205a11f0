"""The monitor's offset-sync follower keeps the newest sync per partition and, apart, the newest one that maps an
offset (``OffsetSync.mapped``): translation coverage compares a group's commit with the latter, and a
position report (the engine's announcement of where a partition resumes, or its positions before its first
acknowledgement: upstream -1) must not read as "the last sync is at -1". Pure: records are fed to the follower
as they would be read, no broker."""

from __future__ import annotations

import pytest

from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.records import OffsetSync
from mirrorwatch.monitor.followers import TopicFollower, our_sync


class _Record:
    def __init__(self, sync: OffsetSync) -> None:
        self._value = sync.to_value()

    def value(self) -> bytes:
        return self._value


def _sync(upstream: int, acked_next: int) -> OffsetSync:
    return OffsetSync("t", 0, upstream, -1 if upstream < 0 else upstream + 10, acked_next, acked_next, 0)


# (case, upstream offsets of the syncs in log order) → (newest upstream, newest mapped upstream or None)
CASES = [
    ("mapped syncs only: the newest", [10, 20, 30], (30, 30)),
    ("a resume announcement after them: the newest is unmapped, the mapped one stays", [10, 20, -1], (-1, 20)),
    ("mapped again after the announcement", [10, -1, 40], (40, 40)),
    ("only position reports: nothing mapped", [-1, -1], (-1, None)),
]


@pytest.mark.parametrize("case,upstreams,expected", CASES, ids=[c[0] for c in CASES])
def test_newest_and_newest_mapped(case, upstreams, expected):
    cluster = config_from_dict({"clusters": {"c": {"bootstrap.servers": "127.0.0.1:1"}}}).clusters["c"]
    follower = TopicFollower(cluster, "syncs", "test", our_sync, keep=lambda sync: sync.mapped)
    for i, upstream in enumerate(upstreams):
        follower._apply(_Record(_sync(upstream, 100 + i)))
    kept = follower.kept().get(("t", 0))
    assert (follower.latest()[("t", 0)].upstream_offset, kept.upstream_offset if kept else None) == expected
