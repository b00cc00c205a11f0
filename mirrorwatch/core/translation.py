"""Offset translation and its coverage, for both engines (ours and MirrorMaker 2): where a source offset sits on
the target from the offset-sync history, what resuming at a checkpoint re-delivers, and which source groups have a
usable checkpoint (and why not). Pure; the monitor's coverage watch and ``mirror failover check`` both call it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------------------- checkpoints and translation


def downstream_of(syncs: list[tuple[int, int]], upstream: int) -> int | None:
    """Where source offset ``upstream`` sits on the target, from (upstream, downstream) syncs sorted by upstream:
    the newest sync at or below it plus the distance (exact when the source has no gap in between); None below
    the oldest sync."""
    best = None
    for u, d in syncs:
        if u > upstream:
            break
        best = (u, d)
    return None if best is None else best[1] + (upstream - best[0])


def checkpoint_redelivery(
    syncs: list[tuple[int, int]], cp_upstream: int, cp_downstream: int, transactional: bool = False
) -> int | None:
    """Records a consumer resuming at a checkpoint's downstream offset reads again before reaching the record
    the group had not consumed yet (MM2 translates to the newest sync it kept, plus one).

    On a plain target, target offsets past a sync are copies one-to-one, so the commit's own target offset is
    extrapolated (:func:`downstream_of`) and the re-delivery is the distance in target offsets (exact on a source
    without gaps). On a ``transactional`` target that distance would count commit markers and aborted records,
    which a read_committed consumer skips, and extrapolating from an older sync would put the commit too early
    (too few re-deliveries). There it is counted in SOURCE offsets from the newest sync ``(u, d)`` at or below the
    checkpoint's downstream offset: the first record read is ``u`` itself (``d`` = the checkpoint's offset) or a
    later one, so at most ``cp_upstream − u`` (or ``− u − 1``) records come again: never fewer than the truth, exact
    when MM2 resumed one past that sync (its translation) on a source without gaps. None without such a sync."""
    if not transactional:
        exact = downstream_of(syncs, cp_upstream)
        return None if exact is None else max(0, exact - cp_downstream)
    below = [(u, d) for u, d in syncs if d <= cp_downstream]  # syncs sorted by upstream are sorted by downstream
    if not below:
        return None
    u, d = below[-1]
    return max(0, cp_upstream - u - (0 if d == cp_downstream else 1))


@dataclass(frozen=True)
class GroupDiscovery:
    """Which source groups MM2's checkpoint connector has found (its tasks' ``task.assigned.groups``, read from the
    Connect config topic), and how often it looks for new ones (``refresh.groups.interval.seconds``).

    ``first_seen_ms``: when a group was first seen with commits (the monitor keeps this; a one-shot check does
    not, and then counts a whole interval from now)."""

    found: frozenset[str]
    refresh_s: float
    first_seen_ms: dict[str, int] = field(default_factory=dict)
    # MM2 reconfigures its tasks after a refresh finds a group: allow for that before calling a refresh overdue
    grace_s: float = 30.0

    def reason(self, group: str, now_ms: int) -> str:
        seen = self.first_seen_ms.get(group)
        waited = 0.0 if seen is None else max(0.0, (now_ms - seen) / 1000)
        left = self.refresh_s - waited
        if left > 0:
            return f"not yet discovered by MM2 (next refresh within {math.ceil(left)} s)"
        if left > -self.grace_s:
            return "not yet discovered by MM2 (its next refresh is due now)"
        return (
            f"not discovered by MM2 {waited:.0f} s after it first committed, though MM2 looks for new groups every "
            f"{self.refresh_s:g} s: check the checkpoint connector's groups and groups.exclude, and its task"
        )


def translation_coverage(
    commits: dict[str, dict[tuple[str, int], int]],
    checkpoints: dict[str, dict[Any, Any]],
    last_sync_upstream: dict[tuple[str, int], int],
    now_ms: int,
    max_age_s: float,
    redelivery: dict[tuple[str, str, int], int] | None = None,
    discovery: GroupDiscovery | None = None,
) -> dict[str, Any]:
    """Of the groups with commits on mirrored partitions, which have a usable checkpoint for every one of them.

    ``checkpoints[group][(topic, partition)]`` has ``upstream_offset`` and ``ts_ms`` (source topic names).
    Untranslated, with the reasons of the group's first such partition: no checkpoint; checkpoint older than
    ``max_age_s`` and behind the commit; commit beyond the last sync (MM2 can then only translate it to the last
    sync + 1). A stopped mirror makes the last two true at once, and both are said.
    Translated but approximate: ``redelivery[(group, topic, partition)] > 0`` records are read again on resuming
    (MM2 translated the commit through an older sync than the commit's own position).
    With ``discovery`` (MM2 only), a group without any checkpoint that MM2's checkpoint connector has not found yet
    is "not yet discovered by MM2", with when its next refresh is due: MM2 finds new groups only every
    ``refresh.groups.interval.seconds`` (10 min by default), which is not a broken checkpoint connector.
    """
    untranslated, approximate = [], []
    redelivery = redelivery or {}
    for group in sorted(commits):
        reason, again = None, 0
        if discovery is not None and group not in discovery.found and not checkpoints.get(group):
            untranslated.append({"group": group, "reason": discovery.reason(group, now_ms)})
            continue
        for (topic, partition), committed in sorted(commits[group].items()):
            cp = checkpoints.get(group, {}).get((topic, partition))
            where = f"{topic}[{partition}]"
            reasons = []
            if cp is None:
                reasons.append(f"no checkpoint for {where}")
            elif cp.upstream_offset != committed and (now_ms - cp.ts_ms) / 1000 > max_age_s:
                reasons.append(
                    f"checkpoint for {where} is {(now_ms - cp.ts_ms) / 1000:.0f} s old (limit {max_age_s:.0f} s) "
                    f"and behind the commit"
                )
            if cp is not None and committed > last_sync_upstream.get((topic, partition), committed) + 1:
                reasons.append(
                    f"commit {committed} on {where} is beyond the last offset sync "
                    f"({last_sync_upstream[(topic, partition)]}): translated approximately"
                )
            if reasons:
                reason = "; ".join(reasons)
                break
            again += redelivery.get((group, topic, partition)) or 0
        if reason:
            untranslated.append({"group": group, "reason": reason})
        elif again > 0:
            approximate.append(
                {
                    "group": group,
                    "redelivered": again,
                    "reason": f"translated through an older offset sync: resuming re-delivers {again} records",
                }
            )
    count = len(commits)
    translated = count - len(untranslated)
    return {
        "groups": count,
        "translated": translated,
        "ratio": None if count == 0 else round(translated / count, 4),
        "untranslated": untranslated,
        "approximate": approximate,
    }
