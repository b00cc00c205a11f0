"""Altair (Vega-Lite) charts for the page. Streamlit's quick charts label a short time axis as ".500" and cannot
draw intervals, so every chart here is Altair; none is hand-drawn."""

from __future__ import annotations

import altair as alt
import pandas as pd

LAG_COLOURS = {"committed_lag": "#4c78a8", "read_lag": "#9ecae9", "true_lag": "#e45756"}
RPO_COLOUR = "#f58518"


def _long(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    present = [c for c in columns if c in frame.columns]
    long = frame[present].reset_index(names="time").melt("time", var_name="series", value_name="value").dropna()
    if getattr(long["time"].dt, "tz", None) is not None:
        long["time"] = long["time"].dt.tz_convert(None)
    return long


def time_series(
    frame: pd.DataFrame,
    columns: list[str],
    value_title: str,
    colours: dict[str, str] | None = None,
    height: int = 260,
    axis_format: str = "%H:%M:%S",
    legend: bool = True,
) -> alt.Chart:
    """A line per column of ``frame`` (indexed by UTC time), clock-time axis, tooltips."""
    long = _long(frame, columns)
    scale = alt.Scale(domain=list(colours), range=list(colours.values())) if colours else alt.Undefined
    colour = alt.Color("series:N", title=None, scale=scale, legend=alt.Legend(orient="bottom") if legend else None)
    return (
        alt.Chart(long, height=height)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time:T", title="UTC", axis=alt.Axis(format=axis_format, labelOverlap=True)),
            y=alt.Y("value:Q", title=value_title, axis=alt.Axis(format=",.3~r"), scale=_zero_based(long["value"], 1.0)),
            color=colour,
            tooltip=[alt.Tooltip("time:T", format="%H:%M:%S"), "series:N", alt.Tooltip("value:Q", format=",.3~f")],
        )
    )


def lag_chart(frame: pd.DataFrame) -> alt.Chart:
    return time_series(frame, list(LAG_COLOURS), "records behind", LAG_COLOURS)


def canary_chart(frame: pd.DataFrame) -> alt.Chart:
    return time_series(frame, ["canary_round_trip_s", "heartbeat_age_s"], "seconds", height=220)


def _zero_based(values: pd.Series, floor: float) -> alt.Scale:
    """From 0 to a little above the largest value, at least ``floor``: a flat zero line sits at the bottom of a
    readable axis instead of in the middle of a "0.000000" one."""
    top = values.max(skipna=True) if len(values) else None
    top = float(top) if top is not None and pd.notna(top) else 0.0
    return alt.Scale(domain=[0, max(floor, top * 1.1)], nice=True)


def overview_chart(frame: pd.DataFrame, height: int = 140) -> alt.Chart:
    """The overview's small chart: RPO seconds (left axis) and true lag (right axis) over the last minutes."""
    data = frame.reset_index(names="time")
    base = alt.Chart(data, height=height).encode(
        x=alt.X("time:T", title=None, axis=alt.Axis(format="%H:%M:%S", labelOverlap=True, tickCount=4))
    )
    tooltip = [
        alt.Tooltip("time:T", format="%H:%M:%S"),
        alt.Tooltip("rpo_seconds:Q", title="RPO s", format=",.2~f"),
        alt.Tooltip("true_lag:Q", title="true lag", format=",d"),
    ]
    rpo = base.mark_area(interpolate="step-after", opacity=0.35, color=RPO_COLOUR, line={"color": RPO_COLOUR}).encode(
        y=alt.Y(
            "rpo_seconds:Q",
            title="RPO (s)",
            scale=_zero_based(data["rpo_seconds"], 1.0),
            axis=alt.Axis(titleColor=RPO_COLOUR, format=",.3~r", tickCount=4),
        ),
        tooltip=tooltip,
    )
    lag = base.mark_line(interpolate="step-after", color=LAG_COLOURS["true_lag"]).encode(
        y=alt.Y(
            "true_lag:Q",
            title="true lag",
            scale=_zero_based(data["true_lag"], 10.0),
            axis=alt.Axis(titleColor=LAG_COLOURS["true_lag"], orient="right", format=",.3~s", tickCount=4),
        ),
        tooltip=tooltip,
    )
    return alt.layer(rpo, lag).resolve_scale(y="independent")


def compliance_chart(frame: pd.DataFrame) -> alt.Chart:
    """Horizontal bars: compliance % per flow/topic, the lower bound as a tick."""
    data = frame.assign(
        series=frame["flow"] + " / " + frame["topic"],
        compliance_pct=frame["compliance"] * 100,
        lower_pct=frame["compliance_lower_bound"] * 100,
    )
    lo = max(0.0, float(data["lower_pct"].min()) - 1) if len(data) else 0.0
    base = alt.Chart(data).encode(y=alt.Y("series:N", title=None, sort="x"))
    bars = base.mark_bar(color="#54a24b").encode(
        x=alt.X("compliance_pct:Q", title="time within SLO (%)", scale=alt.Scale(domain=[min(lo, 99.0), 100])),
        tooltip=[
            "series:N",
            alt.Tooltip("compliance_pct:Q", title="compliance %", format=".3f"),
            alt.Tooltip("lower_pct:Q", title="lower bound %", format=".3f"),
        ],
    )
    ticks = base.mark_tick(color="black", thickness=2).encode(x="lower_pct:Q")
    return alt.layer(bars, ticks).properties(height=max(60, 32 * len(data)))


def incidents_chart(frame: pd.DataFrame) -> alt.Chart:
    """One bar per partition incident, from its start to its recovery (or last breach), coloured by peak lag."""
    data = frame.copy()
    data["until"] = data["recovered"].fillna(data["end"]) if "recovered" in data else data["end"]
    data["series"] = data["topic"] + "[" + data["partition"].astype(str) + "]"
    rows = data["series"].nunique()
    return (
        alt.Chart(data, height=max(80, min(600, 18 * rows)))
        .mark_bar(minBandSize=3)
        .encode(
            x=alt.X("start:T", title="UTC"),
            x2="until:T",
            y=alt.Y("series:N", title=None, sort=alt.SortField("series")),
            color=alt.Color("peak_time_lag_s:Q", title="peak time lag (s)", scale=alt.Scale(scheme="orangered")),
            tooltip=[
                "series:N",
                alt.Tooltip("start:T", format="%Y-%m-%d %H:%M:%S"),
                alt.Tooltip("until:T", format="%Y-%m-%d %H:%M:%S"),
                alt.Tooltip("duration_s:Q", format=",.0f"),
                alt.Tooltip("peak_true_lag:Q", format=",d"),
                alt.Tooltip("peak_time_lag_s:Q", format=",.1f"),
            ],
        )
    )


def trend_chart(frame: pd.DataFrame, value: str, title: str) -> alt.Chart:
    data = frame.assign(series=frame["flow"] + " / " + frame["topic"])
    return (
        alt.Chart(data, height=220)
        .mark_line(point=True)
        .encode(
            x=alt.X("day:T", title="UTC day", axis=alt.Axis(format="%b %d")),
            y=alt.Y(f"{value}:Q", title=title),
            color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom")),
            tooltip=["series:N", alt.Tooltip("day:T", format="%Y-%m-%d"), alt.Tooltip(f"{value}:Q", format=",.2f")],
        )
    )
