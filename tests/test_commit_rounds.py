"""When the data loop commits (mirror/commit_rounds.py): exactly-once as soon as the reader has caught up, once the
shortest interval has passed, and at the latest at the longest; at-least-once on its timer only. Pure: plain values."""

from __future__ import annotations

import pytest

from mirrorwatch.mirror.commit_rounds import CommitRounds

EXACTLY_ONCE = CommitRounds(longest_s=0.1, shortest_s=0.01, when_caught_up=True)
AT_LEAST_ONCE = CommitRounds(longest_s=5.0, shortest_s=5.0, when_caught_up=False)
BATCH = 5000
CASES = [
    # (case, rule, seconds since the last commit ended, records in the open round, records read, source backlog)
    # → due
    ("caught up, past the shortest: commit", EXACTLY_ONCE, 0.02, True, 40, 0, True),
    ("caught up, nothing read this time: commit", EXACTLY_ONCE, 0.02, True, 0, 0, True),
    ("caught up at exactly the shortest: commit", EXACTLY_ONCE, 0.01, True, 40, 0, True),
    ("caught up, a little more on the source: commit", EXACTLY_ONCE, 0.02, True, 40, BATCH - 1, True),
    ("caught up, before the shortest: wait", EXACTLY_ONCE, 0.005, True, 40, 0, False),
    ("a full batch read (a backlog): wait for the longest", EXACTLY_ONCE, 0.05, True, BATCH, 0, False),
    ("a short read, a batch more on the source (still fetching): wait", EXACTLY_ONCE, 0.05, True, 40, BATCH, False),
    ("a full batch read, at the longest: commit", EXACTLY_ONCE, 0.1, True, BATCH, BATCH, True),
    ("no read (waiting for acknowledgements): wait for the longest", EXACTLY_ONCE, 0.05, True, None, 0, False),
    ("no read, past the longest: commit", EXACTLY_ONCE, 0.2, True, None, 0, True),
    ("caught up, no records in the round: nothing to commit early", EXACTLY_ONCE, 0.05, False, 0, 0, False),
    ("no records, at the longest: commit (trailing syncs, idle positions)", EXACTLY_ONCE, 0.1, False, 0, 0, True),
    ("at-least-once, caught up: its timer only", AT_LEAST_ONCE, 1.0, True, 40, 0, False),
    ("at-least-once, at its interval: commit", AT_LEAST_ONCE, 5.0, True, BATCH, BATCH, True),
]


@pytest.mark.parametrize("case,rule,since_s,records_open,read,backlog,expected", CASES, ids=[c[0] for c in CASES])
def test_commit_due(case, rule, since_s, records_open, read, backlog, expected):
    assert rule.due(since_s, records_open, read, BATCH, lambda: backlog) is expected


def test_the_backlog_is_asked_only_when_the_rest_says_commit():
    asked: list[int] = []

    def backlog() -> int:
        asked.append(1)
        return 0

    EXACTLY_ONCE.due(0.005, True, 40, BATCH, backlog)  # before the shortest
    EXACTLY_ONCE.due(0.05, True, BATCH, BATCH, backlog)  # a full read
    EXACTLY_ONCE.due(0.2, True, 40, BATCH, backlog)  # the longest: due whatever the backlog
    assert asked == []
    assert EXACTLY_ONCE.due(0.05, True, 40, BATCH, backlog) and asked == [1]


HOLDS = [
    # (case, exactly_once, seconds since the last commit, expected hold)
    ("a caught-up round holds", True, 0.03, 0.003),
    ("a backlog's longest round does not", True, 0.1, 0.0),
    ("past the longest, neither", True, 0.5, 0.0),
    ("at-least-once never holds", False, 0.03, 0.0),
]


@pytest.mark.parametrize("case,exactly_once,since_s,expected", HOLDS, ids=[h[0] for h in HOLDS])
def test_transaction_hold(case, exactly_once, since_s, expected):
    from types import SimpleNamespace

    from mirrorwatch.core.config import MirrorSettings
    from mirrorwatch.mirror.transactions import ExactlyOnce

    engine = SimpleNamespace(exactly_once=exactly_once, settings=MirrorSettings())
    assert ExactlyOnce._transaction_hold(engine, since_s, EXACTLY_ONCE) == expected  # type: ignore[arg-type]
