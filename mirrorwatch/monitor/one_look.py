"""The status ``monitor lag`` prints: judged from what its few samples can see, never OK by default.

The running monitor rates partitions over a window of samples (``evaluator.WindowSet``): STOP needs the silence to
outlast the window's span and the consumer's commit interval, STALL and WARN need two stored commits. A one-shot
command sees a few samples over a few seconds, so those rules have not had their time, and a partition the window
has not judged comes out OK. A mirror frozen for a minute would read OK. So ``monitor lag`` judges each partition
of a flow from its samples alone ("one look"), in this order:

1. LOST and REWIND stay what the evaluator said (one sample shows them), and so does a hanging transaction's WARN;
2. caught up now (true lag, or a watched group's committed lag, within ``monitor.allowed_lag``): OK;
3. seen moving (the mirror's acknowledged position, or the committed offset, advanced between the first and the
   last sample): OK;
4. not seen moving, and its RPO or the flow's MM2 heartbeat older than :data:`NOT_MOVING_AFTER_S` (the alert rules'
   "not moving" threshold, ``flow:mirrorwatch_flow_stalled:bool``): STOP;
5. anything else (lag, no movement seen, nothing old enough to call it stopped, or one sample only): UNKNOWN, with
   a note saying what could not be told and how to tell it (more samples, or the running monitor's API).

The views it returns carry the judgement in ``notes`` (every surface prints ``GroupView.reasons``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..core.status import NOT_MOVING_AFTER_S, PartitionStatus, group_status_of
from .model import GroupView, Snapshot

_KEPT = (PartitionStatus.LOST, PartitionStatus.REWIND)


def judge_snapshot(first: Snapshot, last: Snapshot, allowed_lag: int) -> Snapshot:
    """``last`` with every sampled view judged by :func:`judge_view` against the same view in ``first``."""
    span_s = max(0.0, (last.ts_ms - first.ts_ms) / 1000)
    views = []
    for view in last.views:
        earlier = first.view(view.cluster, view.group)
        views.append(judge_view(earlier, view, span_s, allowed_lag))
    return dataclasses.replace(last, views=views)


def judge_view(first: GroupView | None, last: GroupView, span_s: float, allowed_lag: int) -> GroupView:
    """One view, judged from its first and last sample (the module's rules). A view the sampler could not read
    (UNKNOWN, NOTFOUND: it says why in ``error``) is returned as it is."""
    if last.error is not None or last.status is None:
        return last
    n = len(last.topics)
    position = _position(last)
    lag = last.true_lag if last.kind == "mirror" else last.committed_lag
    lag = lag if lag is not None else np.full(n, -1, np.int64)
    moved = _moved(first, last, position)
    rpo = last.time_lag_s if last.time_lag_s is not None else np.full(n, np.nan)
    old = np.nan_to_num(rpo, nan=0.0) > NOT_MOVING_AFTER_S
    heartbeat_old = last.heartbeat_age_s is not None and last.heartbeat_age_s > NOT_MOVING_AFTER_S
    caught_up = (lag >= 0) & (lag <= allowed_lag)

    status = np.full(n, PartitionStatus.UNKNOWN, np.int8)
    status[moved] = PartitionStatus.OK
    status[~moved & (old | heartbeat_old)] = PartitionStatus.STOP
    status[caught_up] = PartitionStatus.OK
    hanging_warn = (
        last.transactions.hanging & (last.status == PartitionStatus.WARN)
        if last.transactions is not None
        else np.zeros(n, bool)
    )
    status[hanging_warn] = PartitionStatus.WARN
    for kept in _KEPT:
        status[last.status == kept] = kept
    notes = _notes(status, old, heartbeat_old, last.heartbeat_age_s, span_s)
    return dataclasses.replace(last, status=status, group_status=group_status_of(status), notes=tuple(notes))


def _position(view: GroupView) -> np.ndarray | None:
    """What advances while the mirror (or the group) works: the acknowledged position, else the committed offset."""
    if view.kind == "mirror" and view.acked_next is not None:
        return view.acked_next
    return view.committed


def _moved(first: GroupView | None, last: GroupView, position: np.ndarray | None) -> np.ndarray:
    """Per partition of ``last``: its position advanced since ``first`` (False where either is unknown)."""
    n = len(last.topics)
    moved = np.zeros(n, bool)
    if first is None or position is None:
        return moved
    before = _position(first)
    if before is None:
        return moved
    earlier = {(t, p): i for i, (t, p) in enumerate(zip(first.topics, first.partitions))}
    for i, key in enumerate(zip(last.topics, last.partitions)):
        j = earlier.get(key)
        if j is not None and before[j] >= 0 and position[i] > before[j]:
            moved[i] = True
    return moved


def _notes(
    status: np.ndarray, old: np.ndarray, heartbeat_old: bool, heartbeat_age_s: float | None, span_s: float
) -> list[str]:
    judged = f"one look: {span_s:.1f} s of samples"
    notes = []
    stopped = int(np.count_nonzero((status == PartitionStatus.STOP) & old))
    if stopped:
        notes.append(
            f"{judged}: {stopped} partition(s) not seen moving with RPO over {NOT_MOVING_AFTER_S:g} s "
            "(the alert rules' not-moving threshold)"
        )
    if heartbeat_old and heartbeat_age_s is not None and np.any(status == PartitionStatus.STOP):
        notes.append(
            f"{judged}: the MM2 heartbeats are {heartbeat_age_s:.0f} s old (over {NOT_MOVING_AFTER_S:g} s) "
            "and the lagging partitions were not seen moving"
        )
    unknown = int(np.count_nonzero(status == PartitionStatus.UNKNOWN))
    if unknown:
        seen = "one sample cannot show movement" if span_s == 0 or math.isclose(span_s, 0) else "not seen moving"
        notes.append(
            f"{judged}: {unknown} partition(s) with lag {seen}, and nothing yet {NOT_MOVING_AFTER_S:g} s old: "
            "cannot tell stopped from slow; sample longer (--samples, --every) or ask the running monitor "
            "(/v1/flows), which judges over its window"
        )
    return notes
