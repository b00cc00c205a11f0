"""At-least-once: a restarted mirror resumes from the later of its group's commit and the target's newest offset
sync (mirrorwatch/mirror/resume.py), so a kill while the commits lag (a source coordinator away, or simply a long
commit interval) sends again at most one sync interval of records plus what was in flight, not everything since the
last commit. The rule is pure; the kill runs against the real brokers and a real mirror process."""

from __future__ import annotations

import time

import pytest

from harness.helpers import create_topic, end_offsets, read_all
from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from mirrorwatch.core.naming import offset_syncs_topic
from mirrorwatch.core.records import OffsetSync
from mirrorwatch.mirror.resume import Resume, known_progress, resume_position

from .support.exactly_once import PacedWriter, delivery

# (case, committed, sync acked_next, sync downstream, source end, target end) → Resume
CASES = [
    ("the sync is later: resume there", 100, 180, 170, 200, 171, Resume(180, True)),
    ("the commit is later: resume there", 200, 180, 170, 250, 171, Resume(200, False)),
    ("no commit yet, a sync: the sync", -1, 50, 49, 60, 50, Resume(50, True)),
    ("no sync (-1): the commit", 100, -1, -1, 200, 50, Resume(100, False)),
    ("the sync claims past the source's end (source recreated): the commit", 10, 180, 170, 20, 171, Resume(10, False)),
    ("its copy is no longer on the target (target recreated): the commit", 100, 180, 170, 200, 5, Resume(100, False)),
    ("the target end unread (-1): the commit", 100, 180, 170, 200, -1, Resume(100, False)),
    ("the source end unread (-1): the commit", 100, 180, 170, -1, 171, Resume(100, False)),
    ("a sync without a mapping (downstream -1): the commit", 100, 180, -1, 200, 171, Resume(100, False)),
    ("equal: the commit", 180, 180, 170, 200, 171, Resume(180, False)),
]


@pytest.mark.parametrize("case,committed,acked,down,source_end,target_end,expected", CASES, ids=[c[0] for c in CASES])
def test_resume_position(case, committed, acked, down, source_end, target_end, expected):
    assert resume_position(committed, acked, down, source_end, target_end) == expected


def _sync(acked_next, downstream):
    return OffsetSync("t", 0, acked_next - 1, downstream, acked_next, acked_next, 0)


# (case, newest sync as (acked_next, downstream) or None, set aside here or None) → progress
PROGRESS = [
    ("neither: unknown", None, None, None),
    ("a sync only", (180, 170), None, (180, 170)),
    ("set aside only (the syncs unread)", None, (250, 240), (250, 240)),
    ("set aside is later (records in flight when lost): it", (180, 170), (680, 670), (680, 670)),
    ("the sync is later (another owner since): it", (900, 890), (680, 670), (900, 890)),
]


@pytest.mark.parametrize("case,sync,own,expected", PROGRESS, ids=[c[0] for c in PROGRESS])
def test_known_progress(case, sync, own, expected):
    assert known_progress(None if sync is None else _sync(*sync), own) == expected


SYNC_EVERY, PARTS, RATE = 200, 3, 1000


def test_a_kill_between_commits_sends_again_only_since_the_newest_sync(
    source, target, topic_name, mirror_config, tmp_path
):
    """Commits every 25 s (the session is 30 s), syncs every 200 records: killed ~5 s into the flow, before its
    first commit, the mirror used to send everything again (~5,000 records); from the syncs it sends again at most
    200 per partition plus what was in flight (at 1,000 records/s, well under 500). Nothing lost, order kept."""
    group = f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, PARTS)
    mirror_config["flows"]["east-west"].update({"topics": [topic_name], "group": group})
    mirror_config["mirror"] = fast_mirror_settings(
        commit_interval_s=25.0,
        offset_sync_every=SYNC_EVERY,
        offset_sync_interval_s=600.0,
        consumer={"session.timeout.ms": 30_000},
    )
    writer = PacedWriter(source.bootstrap, topic_name, PARTS, RATE)
    mirror = MirrorProcess(mirror_config, tmp_path / "m.yaml").start()
    writer.start()
    try:
        target_topic = f"east.{topic_name}"
        wait_until(
            lambda: sum(end_offsets(target.bootstrap, target_topic).values()) >= 5000,
            90,
            what="mirroring",
            alive=mirror,
        )
        mirror.kill()
        restarted_ms = int(time.time() * 1000)
        on_target_at_kill = sum(end_offsets(target.bootstrap, target_topic).values())
        mirror = MirrorProcess(mirror_config, tmp_path / "m.yaml", log_name="again.log").start()
        produced = writer.finish()
        wait_until(
            lambda: sum(end_offsets(target.bootstrap, target_topic).values()) >= produced,
            120,
            what="catching up",
            alive=mirror,
        )
        assert "from the target's acknowledgements" in mirror.log_text()
    finally:
        writer.finish() if writer.is_alive() else None
        mirror.kill()
    records = read_all(target.bootstrap, target_topic)
    seen = delivery(records, produced, PARTS)
    first_seen: dict[int, list[int]] = {p: [] for p in range(PARTS)}  # at-least-once order: first occurrences
    for m in records:
        first_seen[m.partition()].append(int(m.key()[1:]))
    firsts = [list(dict.fromkeys(numbers)) for numbers in first_seen.values()]
    out_of_order = sum(1 for numbers in firsts for a, b in zip(numbers, numbers[1:]) if b <= a)
    bound = PARTS * SYNC_EVERY + RATE // 2
    print(f"\nkilled with {on_target_at_kill} records on the target: {seen.duplicates} sent again (bound {bound})")
    assert seen.lost == 0 and out_of_order == 0
    assert seen.duplicates <= bound
    # before sending any of it again, the restarted mirror said on the target where each partition resumes, in a
    # sync without a mapping: the monitor's estimate must not count the records sent again as new ones
    # (interval syncs are off here: without that, the first sync after the restart would be the first record's)
    syncs = [OffsetSync.from_value(m.value()) for m in read_all(target.bootstrap, offset_syncs_topic("east"))]
    first_after_restart: dict[int, OffsetSync] = {}
    for sync in syncs:
        if sync.topic == topic_name and sync.ts_ms >= restarted_ms:
            first_after_restart.setdefault(sync.partition, sync)
    assert sorted(first_after_restart) == list(range(PARTS))
    assert all(s.upstream_offset == -1 and s.acked_next > 0 for s in first_after_restart.values()), first_after_restart
