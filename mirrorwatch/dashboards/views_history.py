"""The history section: the Spark analytics output (SLO compliance per topic, incidents, daily p99 trend)."""

from __future__ import annotations

import streamlit as st

from .settings import PageSettings
from .sources import SourceError, analytics_stamp, read_analytics

KEY = ["flow", "topic"]


@st.cache_data(show_spinner=False, max_entries=4)
def _load(folder: str, stamp: float):
    # cached per (folder, summary.json mtime): a new `monitor analyze` run is picked up, the same one read once
    return read_analytics(folder)


def history(settings: PageSettings) -> None:
    folder = settings.analytics_dir
    try:
        analytics = _load(folder, analytics_stamp(folder))
    except SourceError as exc:
        st.error(f"Analytics unreadable: {exc}")
        return
    if analytics is None:
        st.info(f"No analytics yet in `{folder}` — run `monitor analyze --history {settings.history_dir} "
                f"--out {folder}` (the monitor writes the history; the Spark job summarises it).", icon=":material/inbox:")
        return
    summary = analytics.summary
    slo = summary.get("slo") or {}
    st.caption(f"From `{folder}`, generated {summary.get('generated_at', '?')} over {summary.get('rows', '?'):,} samples (times in UTC); "
               f"SLO: true lag ≤ {slo.get('true_lag', '?'):,} records and time lag ≤ {slo.get('time_lag_s', '?')} s.")
    for problem in analytics.problems:
        st.warning(problem)
    _compliance(analytics)
    _incidents(analytics)
    _trend(analytics)


def _naive_utc(frame):
    """Timestamps as naive UTC (the caption says UTC): Arrow serialisation of tz-aware pandas columns warns."""
    frame = frame.copy()
    for column in frame.columns:
        if hasattr(frame[column], "dt") and getattr(frame[column].dt, "tz", None) is not None:
            frame[column] = frame[column].dt.tz_convert(None)
    return frame


def _compliance(analytics) -> None:
    st.subheader("SLO compliance per topic")
    frame = analytics.tables.get("slo_by_topic")
    if frame is None or frame.empty:
        st.info("No compliance rows.")
        return
    shown = _naive_utc(frame)[["flow", "topic", "compliance", "compliance_lower_bound", "samples", "breach_ms", "first_sample",
                   "last_sample"]].copy()
    shown["compliance"] = shown["compliance"] * 100
    shown["compliance_lower_bound"] = shown["compliance_lower_bound"] * 100
    shown["breach_min"] = shown.pop("breach_ms") / 60_000
    st.dataframe(shown.sort_values(KEY), hide_index=True, width="stretch", column_config={
        "compliance": st.column_config.ProgressColumn("compliance %", format="%.2f", min_value=0, max_value=100),
        "compliance_lower_bound": st.column_config.NumberColumn("lower bound %", format="%.2f"),
        "breach_min": st.column_config.NumberColumn("breach (min)", format="%.1f")})


def _incidents(analytics) -> None:
    st.subheader("Incidents")
    frame = analytics.tables.get("incidents")
    counts = analytics.summary.get("incidents") or {}
    if frame is None or frame.empty:
        st.success("No incidents in the analysed period.")
        return
    st.caption(f"{counts.get('count', len(frame))} partition incidents, {counts.get('open', 0)} open; "
               f"per partition, a run of samples breaching the SLO.")
    columns = ["flow", "topic", "partition", "start", "end", "recovered", "open", "duration_s", "peak_true_lag",
               "peak_time_lag_s", "catch_up_rate_per_s"]
    st.dataframe(_naive_utc(frame)[[c for c in columns if c in frame.columns]].sort_values("start", ascending=False),
                 hide_index=True, width="stretch")


def _trend(analytics) -> None:
    st.subheader("Daily p99 trend")
    frame = analytics.tables.get("trend_daily")
    if frame is None or frame.empty:
        st.info("No daily trend rows.")
        return
    frame = frame.assign(series=frame["flow"] + " / " + frame["topic"])
    left, right = st.columns(2)
    left.caption("true lag p99 (records)")
    left.line_chart(frame.pivot_table(index="day", columns="series", values="true_lag_p99"), height=240)
    right.caption("time lag p99 (s)")
    right.line_chart(frame.pivot_table(index="day", columns="series", values="time_lag_s_p99"), height=240)
