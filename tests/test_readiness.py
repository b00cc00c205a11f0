"""Failover verdict rules, table-driven (pure)."""

import pytest

from mirrorwatch.mirror.failover.readiness import DEGRADED, NOT_READY, READY, PartitionFacts, judge_group, overall_exit


def facts(committed=100, cp_up=100, cp_down=100, cp_dup=0, age=5.0, lag=0, partition=0):
    return PartitionFacts("t", partition, committed, cp_up, cp_down, cp_dup, age, lag)


@pytest.mark.parametrize(
    "partitions,active,heartbeat,expected,lost,dups,reason",
    [
        ([facts()], False, 1.0, READY, 0, 0, None),
        (
            [facts(committed=150, cp_up=100, cp_dup=3)],
            False,
            1.0,
            READY,
            0,
            53,
            None,
        ),  # re-delivery is a cost, not a failure
        ([facts(lag=7)], False, 1.0, DEGRADED, 7, 0, "7 records not yet on the target would be lost"),
        ([facts(age=500)], False, 1.0, DEGRADED, 0, 0, "oldest checkpoint is 500 s old"),
        ([facts()], False, 120.0, DEGRADED, 0, 0, "last heartbeat 120 s ago"),
        ([facts()], False, None, DEGRADED, 0, 0, "no recent heartbeat"),
        (
            [facts(cp_up=None, cp_down=None, cp_dup=None, age=None)],
            False,
            1.0,
            NOT_READY,
            0,
            0,
            "no checkpoint for 1 of 1",
        ),
        ([facts(), facts(partition=1, cp_up=None, age=None)], False, 1.0, NOT_READY, 0, 0, "no checkpoint for 1 of 2"),
        (
            [facts(committed=90, cp_up=100)],
            False,
            1.0,
            NOT_READY,
            0,
            0,
            "would skip 10 records",
        ),  # never a negative count
        ([facts()], True, 1.0, NOT_READY, 0, 0, "active on the target"),
        ([], False, 1.0, NOT_READY, 0, 0, "no committed offsets on the source"),
        ([facts(lag=3), facts(partition=1, cp_up=None, age=None)], False, 1.0, NOT_READY, 3, 0, "no checkpoint"),
    ],
)
def test_verdicts(partitions, active, heartbeat, expected, lost, dups, reason):
    v = judge_group("g", partitions, active, checkpoint_max_age_s=60, heartbeat_age_s=heartbeat, heartbeat_max_age_s=60)
    assert (v.verdict, v.lost, v.duplicates) == (expected, lost, dups)
    assert v.duplicates >= 0
    if reason:
        assert any(reason in r for r in v.reasons), v.reasons
    else:
        assert v.reasons == []


@pytest.mark.parametrize(
    "partitions,unsynced,elsewhere,expected,reason",
    [
        ([], (), True, NOT_READY, "no committed offsets on mirrored topics"),
        ([], (("t", 2, 40),), False, NOT_READY, "t[2]: committed at 40, but the target has no offset sync"),
        ([facts()], (("t", 2, 40),), False, NOT_READY, "has no offset sync"),
        ([facts()], (), True, READY, None),  # commits on other topics do not matter once mirrored ones exist
    ],
)
def test_commits_the_mirror_has_not_synced(partitions, unsynced, elsewhere, expected, reason):
    v = judge_group("g", partitions, False, 60, 1.0, 60, unsynced=unsynced, commits_elsewhere=elsewhere)
    assert v.verdict == expected
    assert v.partitions == len(partitions) + len(unsynced)
    if reason:
        assert any(reason in r for r in v.reasons), v.reasons
    else:
        assert v.reasons == []


def test_exit_code_is_the_worst():
    ok = judge_group("a", [facts()], False, 60, 1.0, 60)
    bad = judge_group("b", [], False, 60, 1.0, 60)
    assert overall_exit([ok]) == 0 and overall_exit([ok, bad]) == 2 and overall_exit([]) == 0
