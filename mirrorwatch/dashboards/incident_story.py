"""The History view's story of each incident: the analytics' partition incidents merged per flow into episodes
(when it started, what it hit, how bad, when it ended, which evaluator statuses were seen), and the lines that
tell them. Pure pandas, no Streamlit."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..core.status import PARTITION_SEVERITY

EPISODE_COLUMNS = [
    "flow",
    "mirror",
    "start",
    "until",
    "open",
    "duration_s",
    "topics",
    "partitions",
    "hit",
    "peak_true_lag",
    "peak_time_lag_s",
    "statuses",
]


def incident_until(frame: pd.DataFrame) -> pd.Series:
    """An incident's end on the timeline: its recovery sample, or its last breach when it is still open."""
    if "recovered" in frame:
        return frame["recovered"].fillna(frame["end"])
    return frame["end"]


def partitions_hit(frame: pd.DataFrame, limit: int = 8) -> str:
    """``orders[0,1,2], payments[1]``: topics by name, partitions in order, at most ``limit`` topics named."""
    parts = frame.groupby("topic")["partition"].apply(lambda p: sorted({int(x) for x in p}))
    named = [f"{topic}[{','.join(str(p) for p in partitions)}]" for topic, partitions in parts.items()]
    more = len(named) - limit
    return ", ".join(named[:limit]) + (f" and {more} more topics" if more > 0 else "")


def _statuses(frame: pd.DataFrame) -> str | None:
    """The evaluator statuses seen during the episode's breaches, worst known first; None: the analytics
    predate the ``statuses`` column (nothing known, which is not the same as none seen)."""
    if "statuses" not in frame:
        return None
    seen = {s for row in frame["statuses"] if row is not None for s in row if s and s != "OK"}
    order = [s.name for s in reversed(PARTITION_SEVERITY)]  # the one severity order (core.status)
    return ", ".join(sorted(seen, key=lambda s: (order.index(s) if s in order else len(order), s)))


def episodes(incidents: pd.DataFrame) -> pd.DataFrame:
    """Partition incidents of one flow merged where their [start, until] windows overlap or touch: one row
    per episode, newest first (columns: ``EPISODE_COLUMNS``). Timestamps keep the input's time zone."""
    if incidents is None or incidents.empty:
        return pd.DataFrame(columns=EPISODE_COLUMNS)
    data = incidents.assign(until=incident_until(incidents)).sort_values(["flow", "start", "topic", "partition"])
    rows = []
    for flow, group in data.groupby("flow", sort=True):
        # a new episode starts where an incident begins after every earlier one of the flow has ended
        reach = group["until"].cummax().shift()
        number = (reach.isna() | (group["start"] > reach)).cumsum()
        for _, episode in group.groupby(number):
            start, until = episode["start"].min(), episode["until"].max()
            mirrors: list[object] = list(episode["mirror"].dropna().unique()) if "mirror" in episode else []
            rows.append(
                {
                    "flow": flow,
                    "mirror": mirrors[0] if len(mirrors) else None,
                    "start": start,
                    "until": until,
                    "open": bool(episode["open"].any()) if "open" in episode else False,
                    "duration_s": (until - start).total_seconds(),
                    "topics": episode["topic"].nunique(),
                    "partitions": len(episode[["topic", "partition"]].drop_duplicates()),
                    "hit": partitions_hit(episode),
                    "peak_true_lag": episode["peak_true_lag"].max(),
                    "peak_time_lag_s": episode["peak_time_lag_s"].max(),
                    "statuses": _statuses(episode),
                }
            )
    frame = pd.DataFrame(rows, columns=EPISODE_COLUMNS)
    ordered: pd.DataFrame = frame.sort_values(["start", "flow"], ascending=[False, True], ignore_index=True)
    return ordered


def in_episode(incidents: pd.DataFrame, episode: pd.Series) -> pd.DataFrame:
    """The partition incidents that make up ``episode`` (same flow, window inside the episode's)."""
    until = incident_until(incidents)
    inside = (incidents["flow"] == episode["flow"]) & (incidents["start"] >= episode["start"])
    rows: pd.DataFrame = incidents[inside & (until <= episode["until"])]
    return rows


def duration_words(seconds: float | None) -> str:
    """``4 min 07 s``, ``1 h 02 min``, ``12 s``."""
    if seconds is None or pd.isna(seconds):
        return "?"
    total = int(round(float(seconds)))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


def clock(ts: pd.Timestamp | None) -> str:
    """24-hour UTC time with the date: ``2026-11-24 18:13:05 UTC`` (a naive timestamp is UTC already)."""
    if ts is None or pd.isna(ts):
        return "?"
    ts = pd.Timestamp(ts)
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC")
    return ts.strftime("%Y-%m-%d %H:%M:%S UTC")


def episode_label(episode: pd.Series) -> str:
    """What the episode picker shows: ``east-west, 2026-11-24 18:13:05 UTC, 4 min 07 s``."""
    return f"{episode['flow']}, {clock(episode['start'])}, {duration_words(episode['duration_s'])}"


def story(episode: pd.Series) -> list[str]:
    """The episode in four Markdown lines: when, what it hit, how bad, what the evaluator said."""
    ended = (
        f"still open at the last sample ({clock(episode['until'])})"
        if episode["open"]
        else f"recovered {clock(episode['until'])}"
    )
    lag = episode["peak_true_lag"]
    lag_words = f"{int(lag):,} records" if lag is not None and pd.notna(lag) else "an unknown number of records"
    peak_s = episode["peak_time_lag_s"]
    peak_words = f"{float(peak_s):,.1f} s" if peak_s is not None and pd.notna(peak_s) else "an unknown time"
    statuses = episode["statuses"]
    if statuses is None:
        said = "not in these analytics (written before the `statuses` column; re-run the analysis)"
    else:
        said = f"**{statuses}**" if statuses else "no status worse than OK during the breach"
    topics = int(episode["topics"])
    partitions = int(episode["partitions"])
    return [
        f"**Started** {clock(episode['start'])}; **{ended}** after {duration_words(episode['duration_s'])}.",
        f"**Hit** flow `{episode['flow']}`: {topics} topic{'s' if topics != 1 else ''}, "
        f"{partitions} partition{'s' if partitions != 1 else ''}: {episode['hit']}.",
        f"**Worst** {lag_words} behind (true lag) and {peak_words} behind (time lag).",
        f"**Evaluator statuses** during the breach: {said}.",
    ]


def _ms(ts: pd.Timestamp) -> int:
    ts = pd.Timestamp(ts)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return int(ts.value // 1_000_000)


def changes_during(recent: dict[str, Any], episode: pd.Series, margin_s: float = 60) -> list[dict[str, Any]] | None:
    """The monitor's status changes of the episode's flow from ``margin_s`` before it started until ``margin_s``
    after it ended, oldest first (the evaluator turning ERR usually comes a few samples before the SLO breach).
    None: the monitor's memory (``/v1/flows/<flow>/recent``) no longer reaches back to the episode's start."""
    points = recent.get("points") or []
    start_ms, until_ms = _ms(episode["start"]), _ms(episode["until"])
    if not points or min(p["ts_ms"] for p in points) > start_ms:
        return None
    lo, hi = start_ms - margin_s * 1000, until_ms + margin_s * 1000
    changes = [c for c in recent.get("status_changes") or [] if isinstance(c.get("ts_ms"), (int, float))]
    return sorted((c for c in changes if lo <= c["ts_ms"] <= hi), key=lambda c: c["ts_ms"])
