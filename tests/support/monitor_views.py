"""Snapshots built from plain values for the monitor's surfaces (API, exporter, history, webhooks) in tests."""

from __future__ import annotations

import math

import numpy as np

from mirrorwatch.core.status import GroupStatus, PartitionStatus
from mirrorwatch.monitor.model import GroupView, Snapshot

A = lambda *v: np.array(v, np.int64)  # noqa: E731


def mirror_view(
    status=GroupStatus.OK, ts=1_700_000_000_000, statuses=(PartitionStatus.OK, PartitionStatus.WARN), **over
) -> GroupView:
    values = dict(
        kind="mirror",
        flow="ew",
        cluster="east",
        target="west",
        group="mirrorwatch-east-west",
        ts_ms=ts,
        group_status=status,
        last_ok_ms=ts,
        topics=["orders", "orders"],
        partitions=[0, 1],
        source_end=A(100, 50),
        committed=A(90, 40),
        read_position=A(98, 50),
        acked_next=A(95, 45),
        target_end=A(95, 45),
        committed_lag=A(10, 10),
        read_lag=A(2, 0),
        true_lag=A(5, 5),
        time_lag_s=np.array([1.5, np.nan]),
        target_behind=np.array([False, False]),
        catch_up_s=np.array([10.0, math.inf]),
        status=np.array(statuses, np.int8),
        window_start=(A(80, 30), A(ts - 9000, ts - 9000)),
        window_end=(A(90, 40), A(ts, ts)),
        window_count=A(10, 3),
        window_size=10,
        complete=0.5,
        totallag=20,
        maxlag_row=0,
        topic_catch_up_s={"orders": math.inf},
    )
    values.update(over)
    return GroupView(**values)


def unknown_view() -> GroupView:
    return GroupView(
        kind="group",
        flow="",
        cluster="far",
        target="",
        group="billing",
        ts_ms=1,
        group_status=GroupStatus.UNKNOWN,
        error="cluster 'far': cannot list topics: timed out",
        topics=["t"],
        partitions=[0],
        status=np.array([PartitionStatus.UNKNOWN], np.int8),
    )


def snapshot(*views, up=None) -> Snapshot:
    return Snapshot(views[0].ts_ms if views else 0, list(views), up or {"east": True, "west": True, "far": False}, 1)
