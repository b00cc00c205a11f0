"""The history section: the Spark analytics output, the incidents first (each told as a story: when, what it hit,
how bad, when it ended, which evaluator statuses; and its timeline), then SLO compliance per topic and the daily
p99 trend, the tables behind expanders, and the state of the monitor's scheduled analytics run."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import streamlit as st

from .charts import compliance_chart, incidents_chart, time_window, trend_chart
from .frames import status_changes
from .incident_story import changes_during, episode_label, episodes, in_episode, incident_until, story
from .settings import PageSettings
from .sources import SourceError, analytics_stamp, fetch_analytics_status, fetch_recent, read_analytics

if TYPE_CHECKING:
    import pandas as pd

    from .sources import Analytics

KEY = ["flow", "topic"]


@st.cache_data(show_spinner=False, max_entries=4)
def _load(folder: str, stamp: float) -> Analytics | None:
    # cached per (folder, summary.json mtime): a new `monitor analyze` run is picked up, the same one read once
    return read_analytics(folder)


def _when(ms: object) -> str:
    if not isinstance(ms, (int, float)):
        return "?"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def run_status(settings: PageSettings) -> dict[str, Any] | None:
    """The monitor's scheduled run, shown above the results (a failed run says why). None: not known."""
    try:
        status = fetch_analytics_status(settings.monitor_url, settings.timeout_s)
    except SourceError:
        return None  # the monitor is down or older than /v1/analytics: the live views say so already
    state = status.get("state")
    every = status.get("every_s")
    schedule = f"every {every:g} s on `{status.get('master')}`" if isinstance(every, (int, float)) else ""
    if state in ("failed", "timeout"):
        st.error(
            f"**The last scheduled analytics run {'timed out' if state == 'timeout' else 'failed'}** "
            f"({_when(status.get('finished_ms'))}): {status.get('reason')}. Sampling is not affected; "
            f"the results below are from the last good run ({_when(status.get('last_ok_ms'))}).",
            icon=":material/error:",
        )
    elif state == "running":
        st.info(
            f"The monitor is running the Spark job now (started {_when(status.get('started_ms'))}; {schedule}).",
            icon=":material/hourglass_top:",
        )
    elif state == "waiting":
        st.info(f"Scheduled analytics ({schedule}) are waiting: {status.get('reason')}.", icon=":material/schedule:")
    elif state == "ok":
        st.caption(
            f"Scheduled analytics {schedule}: last run {_when(status.get('finished_ms'))} "
            f"in {status.get('duration_s', 0):.0f} s."
        )
    elif state == "never":
        st.caption(f"Scheduled analytics {schedule}: the first run has not happened yet.")
    return status


def history(settings: PageSettings) -> None:
    status = run_status(settings)
    folder = settings.analytics_dir
    try:
        analytics = _load(folder, analytics_stamp(folder))
    except SourceError as exc:
        st.error(f"Analytics unreadable: {exc}")
        return
    if analytics is None:
        scheduled = status is not None and status.get("state") not in (None, "off")
        st.info(
            f"No analytics yet in `{folder}` — "
            + (
                "the monitor runs the Spark job on its schedule; this view fills after its first run."
                if scheduled
                else f"run `monitor analyze --history {settings.history_dir} --out {folder}`, or let the monitor run it "
                "(`monitor.analytics.every_s`)"
            )
            + " (the monitor writes the history; the Spark job summarises it).",
            icon=":material/inbox:",
        )
        return
    summary = analytics.summary
    slo = summary.get("slo") or {}
    st.caption(
        f"From `{folder}`, generated {summary.get('generated_at', '?')} over {summary.get('rows', '?'):,} samples (times in UTC); "
        f"SLO: true lag ≤ {slo.get('true_lag', '?'):,} records and time lag ≤ {slo.get('time_lag_s', '?')} s."
    )
    for problem in analytics.problems:
        st.warning(problem)
    _incidents(analytics, settings)
    _compliance(analytics)
    _trend(analytics)


def _naive_utc(frame: pd.DataFrame) -> pd.DataFrame:
    """Timestamps as naive UTC (the caption says UTC): Arrow serialisation of tz-aware pandas columns warns."""
    frame = frame.copy()
    for column in frame.columns:
        if hasattr(frame[column], "dt") and getattr(frame[column].dt, "tz", None) is not None:
            frame[column] = frame[column].dt.tz_convert(None)
    return frame


# the history's mirror column (analytics outputs from before it have none): what mirrors each flow, in words
MIRROR_NAMES = {"mm2": "MirrorMaker 2", "mirrorwatch": "mirrorwatch", "": "(plain group)"}


def _mirror_named(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    if "mirror" in frame.columns:
        frame["mirror"] = frame["mirror"].map(lambda m: MIRROR_NAMES.get(m or "", m))
    return frame


def _compliance(analytics: Analytics) -> None:
    st.subheader("SLO compliance per topic")
    frame = analytics.tables.get("slo_by_topic")
    if frame is None or frame.empty:
        st.info("No compliance rows.")
        return
    frame = _naive_utc(frame)
    st.altair_chart(compliance_chart(frame), width="stretch")
    st.caption(
        "Bar: share of observed time within the SLO; tick: the lower bound (unknown and unobserved time "
        "counted as breached)."
    )
    columns = ["flow", "mirror", "topic", "compliance", "compliance_lower_bound", "samples", "breach_ms"]
    shown = _mirror_named(frame[[c for c in columns + ["first_sample", "last_sample"] if c in frame.columns]])
    shown["compliance"] = shown["compliance"] * 100
    shown["compliance_lower_bound"] = shown["compliance_lower_bound"] * 100
    shown["breach_min"] = shown.pop("breach_ms") / 60_000
    with st.expander("Compliance table"):
        st.dataframe(
            shown.sort_values(KEY),
            hide_index=True,
            width="stretch",
            column_config={
                "compliance": st.column_config.ProgressColumn(
                    "compliance %", format="%.2f", min_value=0, max_value=100
                ),
                "compliance_lower_bound": st.column_config.NumberColumn("lower bound %", format="%.2f"),
                "breach_min": st.column_config.NumberColumn("breach (min)", format="%.1f"),
            },
        )


def _status_changes(settings: PageSettings, episode: pd.Series[Any]) -> list[str]:
    """The monitor's own status changes around the episode, while its memory still holds them (the alert rules
    read the same statuses); nothing when the monitor cannot be asked."""
    try:
        recent = fetch_recent(settings.monitor_url, episode["flow"], settings.timeout_s)
    except SourceError:
        return []
    changes = changes_during(recent, episode)
    if changes is None:
        return [
            "**Monitor status changes**: no longer in the monitor's memory (`monitor.recent_minutes`, 60 by default)."
        ]
    if not changes:
        return ["**Monitor status changes** around it: none."]
    lines = list(reversed(status_changes(changes, limit=len(changes))))  # the same words as the overview's
    return ["**Monitor status changes** around it (UTC): " + "; ".join(lines) + "."]


def _incidents(analytics: Analytics, settings: PageSettings) -> None:
    st.subheader("Incidents")
    frame = analytics.tables.get("incidents")
    counts = analytics.summary.get("incidents") or {}
    if frame is None or frame.empty:
        st.success("No incidents in the analysed period.")
        return
    frame = _naive_utc(frame)
    told = episodes(frame)
    st.caption(
        f"{len(told)} incident{'s' if len(told) != 1 else ''} ({counts.get('count', len(frame))} partition "
        f"incidents, {counts.get('open', 0)} open): partitions of one flow breaching the SLO at overlapping times "
        "make one incident. Times in UTC, 24-hour clock."
    )
    labels = [episode_label(row) for _, row in told.iterrows()]
    chosen = 0
    if len(told) > 1:
        chosen = st.selectbox(
            "Incident (newest first)", range(len(told)), format_func=lambda i: labels[i], key="history_incident"
        )
    episode = told.iloc[chosen]
    st.markdown("  \n".join(story(episode) + _status_changes(settings, episode)))
    parts = in_episode(frame, episode)
    st.altair_chart(incidents_chart(parts, time_window(parts["start"], incident_until(parts))), width="stretch")
    st.caption("A bar per partition: from its first breaching sample to recovery; colour: its peak time lag.")
    with st.expander(f"All {len(told)} incidents"):
        st.dataframe(
            _mirror_named(told),
            hide_index=True,
            width="stretch",
            column_config={
                "duration_s": st.column_config.NumberColumn("duration (s)", format="%.0f"),
                "peak_time_lag_s": st.column_config.NumberColumn("peak time lag (s)", format="%.1f"),
                "statuses": "evaluator statuses",
            },
        )
    columns = [
        "flow",
        "mirror",
        "topic",
        "partition",
        "start",
        "end",
        "recovered",
        "open",
        "duration_s",
        "peak_true_lag",
        "peak_time_lag_s",
        "catch_up_rate_per_s",
        "statuses",
    ]
    with st.expander("Partition incidents table (newest first)"):
        st.dataframe(
            _mirror_named(frame[[c for c in columns if c in frame.columns]]).sort_values("start", ascending=False),
            hide_index=True,
            width="stretch",
        )


def _trend(analytics: Analytics) -> None:
    st.subheader("Daily p99 trend")
    frame = analytics.tables.get("trend_daily")
    if frame is None or frame.empty:
        st.info("No daily trend rows.")
        return
    left, right = st.columns(2)
    left.altair_chart(trend_chart(frame, "true_lag_p99", "true lag p99 (records)"), width="stretch")
    right.altair_chart(trend_chart(frame, "time_lag_s_p99", "time lag p99 (s)"), width="stretch")
