"""Failover readiness, as pure rules (no I/O): what failing a consumer group over would cost right now.

Inputs per group: the group's committed offsets on the source, the latest checkpoint per partition, the
true lag of each partition (records that would be lost if the source vanished now), and whether the group is
active on the target. Verdicts:
- NOT READY: the group has no commits on mirrored topics, a committed partition has no checkpoint or no offset
  sync at all (the mirror has acknowledged none of its records), a checkpoint is ahead of the group's commit
  (resuming there would skip records), or the group is active on the target (applying offsets would be unsafe);
- DEGRADED: it would work, at a stated cost: records lost (true lag > 0), stale checkpoints, or a stale
  heartbeat (the mirror may not be running);
- READY otherwise. Duplicates (re-delivered records) are a cost that is always stated, never a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

READY, DEGRADED, NOT_READY = "READY", "DEGRADED", "NOT READY"
EXIT_CODES = {READY: 0, DEGRADED: 1, NOT_READY: 2}


@dataclass(frozen=True)
class PartitionFacts:
    topic: str
    partition: int
    committed: int  # the group's offset on the source
    checkpoint_upstream: int | None  # the checkpoint's source offset (None: no checkpoint)
    checkpoint_downstream: int | None
    checkpoint_duplicates: int | None  # re-delivery already in the checkpoint's translation
    checkpoint_age_s: float | None
    true_lag: int  # records of this partition not yet on the target
    approximate: str | None = None  # why the checkpoint is only an approximate translation (stated, not judged)


@dataclass
class GroupVerdict:
    group: str
    verdict: str
    reasons: list[str] = field(default_factory=list)
    lost: int = 0  # records the group has not consumed and the target does not have
    duplicates: int = 0  # records re-delivered after resuming at the checkpoints
    partitions: int = 0
    missing_checkpoints: int = 0
    oldest_checkpoint_s: float | None = None


def judge_group(
    group: str,
    facts: list[PartitionFacts],
    active_on_target: bool,
    checkpoint_max_age_s: float,
    heartbeat_age_s: float | None,
    heartbeat_max_age_s: float,
    unsynced: tuple[tuple[str, int, int], ...] = (),
    commits_elsewhere: bool = False,
    undiscovered: str | None = None,
) -> GroupVerdict:
    """``unsynced``: (topic, partition, committed) the group committed past 0 on a mirrored topic that has no
    offset sync on the target; ``commits_elsewhere``: the group has commits, none on a mirrored topic;
    ``undiscovered``: why the group has no checkpoint yet when MM2 has not found it (core.translation.GroupDiscovery)."""
    v = GroupVerdict(group, READY, partitions=len(facts) + len(unsynced))
    blocking, costly, notes = [], [], []
    for topic, partition, committed in unsynced:
        # nothing of it is known to be on the target, so there is nothing to translate the commit to
        blocking.append(
            f"{topic}[{partition}]: committed at {committed}, but the target has no offset sync for it "
            "(the mirror has acknowledged none of its records yet)"
        )
    for f in facts:
        if f.checkpoint_upstream is None:
            v.missing_checkpoints += 1
            continue
        if f.checkpoint_upstream > f.committed:
            blocking.append(
                f"{f.topic}[{f.partition}]: checkpoint at {f.checkpoint_upstream} is ahead of the commit "
                f"{f.committed} (would skip {f.checkpoint_upstream - f.committed} records)"
            )
            continue
        # the group has consumed (committed − checkpoint) more since the checkpoint: those re-deliver too
        v.duplicates += (f.committed - f.checkpoint_upstream) + (f.checkpoint_duplicates or 0)
        v.lost += f.true_lag
        if f.approximate:
            notes.append(f.approximate)  # re-delivery is a stated cost, never a failure
        if f.checkpoint_age_s is not None:
            v.oldest_checkpoint_s = max(v.oldest_checkpoint_s or 0.0, f.checkpoint_age_s)
    if not facts and not unsynced:
        blocking.append(
            "the group has no committed offsets on mirrored topics"
            if commits_elsewhere
            else "the group has no committed offsets on the source"
        )
    if v.missing_checkpoints:
        missing = f"no checkpoint for {v.missing_checkpoints} of {len(facts)} partitions"
        blocking.append(f"{missing}: {undiscovered}" if undiscovered else missing)
    if active_on_target:
        blocking.append("the group is active on the target: stop its consumers there first")
    if v.lost:
        costly.append(f"{v.lost} records not yet on the target would be lost")
    if v.oldest_checkpoint_s is not None and v.oldest_checkpoint_s > checkpoint_max_age_s:
        costly.append(f"oldest checkpoint is {v.oldest_checkpoint_s:.0f} s old (limit {checkpoint_max_age_s:.0f} s)")
    if heartbeat_age_s is None or heartbeat_age_s > heartbeat_max_age_s:
        costly.append(
            "no recent heartbeat: the mirror may not be running"
            if heartbeat_age_s is None
            else f"last heartbeat {heartbeat_age_s:.0f} s ago (limit {heartbeat_max_age_s:.0f} s)"
        )
    v.verdict = NOT_READY if blocking else DEGRADED if costly else READY
    v.reasons = blocking + costly + notes
    return v


def overall_exit(verdicts: list[GroupVerdict]) -> int:
    return max((EXIT_CODES[v.verdict] for v in verdicts), default=0)
