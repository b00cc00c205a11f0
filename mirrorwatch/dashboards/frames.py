"""API answers → the pandas frames the page draws and tabulates. Pure functions (the page and the tests call
them alike); no Streamlit here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pandas as pd

LAG_COLUMNS = ("committed_lag", "read_lag", "true_lag")
RECENT_COLUMNS = ("rpo_seconds", *LAG_COLUMNS, "canary_round_trip_s", "heartbeat_age_s")
# what someone paged needs first, in this order; everything else goes behind an expander
KEY_PARTITION_COLUMNS = ["topic", "partition", "status", "time_lag_s", "true_lag", "committed_lag", "forecast"]
OTHER_PARTITION_COLUMNS = [
    "records_lost",
    "read_lag",
    "target_behind",
    "catch_up_s",
    "source_end",
    "committed",
    "read_position",
    "acked_next",
    "target_end",
]
STATUS_RANK = {"LOST": -1, "STOP": 0, "STALL": 1, "REWIND": 2, "WARN": 3, "UNKNOWN": 4, "OK": 5}
SORTS = {  # label → (column, descending)
    "RPO (time lag) — worst first": ("time_lag_s", True),
    "true lag — largest first": ("true_lag", True),
    "committed lag — largest first": ("committed_lag", True),
    "status — worst first": ("status_rank", False),
    "topic, partition": (None, False),
}


def recent_frame(points: list[dict[str, Any]], minutes: float | None = None, now_ms: int | None = None) -> pd.DataFrame:
    """The recent points as a frame indexed by UTC time (naive), newest last; only the last ``minutes``."""
    rows = [p for p in points if isinstance(p.get("ts_ms"), (int, float))]
    if minutes is not None and rows:
        newest = now_ms if now_ms is not None else max(p["ts_ms"] for p in rows)
        rows = [p for p in rows if p["ts_ms"] >= newest - minutes * 60_000]
    if not rows:
        return pd.DataFrame(columns=list(RECENT_COLUMNS), index=pd.DatetimeIndex([], name="time"), dtype="float64")
    frame = pd.DataFrame(rows)
    for column in RECENT_COLUMNS:
        if column not in frame:
            frame[column] = None
    frame["time"] = pd.to_datetime(frame["ts_ms"], unit="ms")
    return frame.set_index("time")[list(RECENT_COLUMNS)].astype("float64").sort_index()


def status_changes(changes: list[dict[str, Any]], limit: int = 5) -> list[str]:
    """The newest ``limit`` status changes as lines, newest first: "19:03:12 OK → ERR (reason)"."""
    lines = []
    for change in reversed(changes[-limit:]):
        ts = change.get("ts_ms")
        when = datetime.fromtimestamp(ts / 1000, UTC).strftime("%H:%M:%S") if isinstance(ts, (int, float)) else "?"
        before = change.get("from")
        text = f"{when} {before} → {change.get('to')}" if before else f"{when} first seen {change.get('to')}"
        if change.get("reason"):
            text += f" ({change['reason']})"
        lines.append(text)
    return lines


def partition_frame(partitions: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(partitions)
    for column in KEY_PARTITION_COLUMNS + OTHER_PARTITION_COLUMNS:
        if column not in frame:
            frame[column] = None
    frame["status_rank"] = frame["status"].map(STATUS_RANK).fillna(4)
    return frame


def sorted_partitions(frame: pd.DataFrame, sort: str) -> pd.DataFrame:
    column, descending = SORTS.get(sort, (None, False))
    if column is None:
        return frame.sort_values(["topic", "partition"], kind="stable")
    return frame.sort_values(
        [column, "topic", "partition"], ascending=[not descending, True, True], na_position="last", kind="stable"
    )


def topic_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per topic: worst status, partitions, RPO (max time lag), summed lags; worst RPO first."""
    if frame.empty:
        return pd.DataFrame(columns=["topic", "status", "partitions", "time_lag_s", "true_lag", "committed_lag"])
    grouped = frame.groupby("topic", sort=False)
    worst = grouped["status_rank"].min()
    rank_to_status = {v: k for k, v in STATUS_RANK.items()}
    topics = pd.DataFrame(
        {
            "status": worst.map(rank_to_status),
            "partitions": grouped.size(),
            "time_lag_s": pd.to_numeric(grouped["time_lag_s"].max(), errors="coerce"),
            "true_lag": grouped["true_lag"].sum(min_count=1),
            "committed_lag": grouped["committed_lag"].sum(min_count=1),
        }
    ).reset_index()
    return topics.sort_values(["time_lag_s", "topic"], ascending=[False, True], na_position="last")
