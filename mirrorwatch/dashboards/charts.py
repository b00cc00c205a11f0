"""Altair charts for the in-session timelines (Streamlit's quick charts label a short time axis as ".500")."""

from __future__ import annotations

import altair as alt

LAG_COLOURS = {"committed_lag": "#4c78a8", "read_lag": "#9ecae9", "true_lag": "#e45756"}


def time_series(frame, value_title: str, colours: dict[str, str] | None = None, height: int = 260) -> alt.Chart:
    """A line per column of ``frame`` (indexed by UTC time), clock-time axis, tooltips."""
    long = frame.reset_index(names="time").melt("time", var_name="series", value_name="value").dropna()
    long["time"] = long["time"].dt.tz_localize(None) if getattr(long["time"].dt, "tz", None) else long["time"]
    colour = alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom"))
    if colours:
        colour = alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom"),
                           scale=alt.Scale(domain=list(colours), range=list(colours.values())))
    return (alt.Chart(long, height=height)
            .mark_line(interpolate="step-after", point=alt.OverlayMarkDef(size=12))
            .encode(x=alt.X("time:T", title="UTC", axis=alt.Axis(format="%H:%M:%S")),
                    y=alt.Y("value:Q", title=value_title),
                    color=colour,
                    tooltip=[alt.Tooltip("time:T", format="%H:%M:%S"), "series:N", alt.Tooltip("value:Q", format=",.3~f")]))


def lag_chart(frame) -> alt.Chart:
    return time_series(frame, "records behind", LAG_COLOURS)


def canary_chart(frame) -> alt.Chart:
    return time_series(frame, "seconds", height=220)
