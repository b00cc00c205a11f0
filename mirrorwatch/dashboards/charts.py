"""Altair (Vega-Lite) charts for the page. Streamlit's quick charts label a short time axis as ".500" and cannot
draw intervals, so every chart here is Altair; none is hand-drawn."""

from __future__ import annotations

import altair as alt
import pandas as pd

from .incident_story import clock, incident_until

# what alt.layer gives: a LayerChart (a FacetChart only when every layer has the same facet encodings)
Layered = alt.LayerChart | alt.FacetChart
LAG_COLOURS = {"committed_lag": "#4c78a8", "read_lag": "#9ecae9", "true_lag": "#e45756"}
RPO_COLOUR = "#f58518"
UTC_SCALE = alt.Scale(type="utc")  # labels in UTC whatever the browser's zone (a "time" scale uses the local one)


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
    chart: alt.Chart = (  # altair's mark_* methods are typed to return Self but mypy reads them as Any
        alt.Chart(long, height=height)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time:T", title="UTC", scale=UTC_SCALE, axis=alt.Axis(format=axis_format, labelOverlap=True)),
            y=alt.Y("value:Q", title=value_title, axis=alt.Axis(format=",.3~r"), scale=_zero_based(long["value"], 1.0)),
            color=colour,
            tooltip=[alt.Tooltip("time:T", format="%H:%M:%S"), "series:N", alt.Tooltip("value:Q", format=",.3~f")],
        )
    )
    return chart


def lag_chart(frame: pd.DataFrame) -> alt.Chart:
    return time_series(frame, list(LAG_COLOURS), "records behind", LAG_COLOURS)


def canary_chart(frame: pd.DataFrame) -> alt.Chart:
    return time_series(frame, ["canary_round_trip_s", "heartbeat_age_s"], "seconds", height=220)


def _zero_based(values: pd.Series, floor: float) -> alt.Scale:
    """From 0 to a little above the largest value, at least ``floor``: a flat zero line sits at the bottom of a
    readable axis instead of in the middle of a "0.000000" one."""
    top = zero_based_domain(values, 0.0)[1]
    return alt.Scale(domain=[0, max(floor, top * 1.1)], nice=True)


def overview_chart(frame: pd.DataFrame, height: int = 140) -> Layered:
    """The overview's small chart: RPO seconds (left axis) and true lag (right axis) over the last minutes."""
    data = frame.reset_index(names="time")
    base = alt.Chart(data, height=height).encode(
        x=alt.X("time:T", title=None, scale=UTC_SCALE, axis=alt.Axis(format="%H:%M:%S", labelOverlap=True, tickCount=4))
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
    layered: Layered = alt.layer(rpo, lag).resolve_scale(y="independent")
    return layered


# The history charts. Streamlit sizes a chart it is given with autosize "fit": the height then includes the
# axes and legend, and a 64-px chart of two topics had no room left for its bars (its labels drawn over each
# other, its axis title cut). With "fit-x" the width still follows the page and the height is the plot's own,
# axes added around it. SVG (these charts are small): the rendered labels are DOM text the browser test measures.
HISTORY_CHART = {
    "autosize": {"type": "fit-x", "contains": "padding"},
    "usermeta": {"embedOptions": {"renderer": "svg"}},
}
ROW_STEP_PX = 26  # per topic or partition row: a label of 11-px text and some air
ROW_LABEL_LIMIT_PX = 320  # topic labels are cut only beyond this (Vega-Lite's default cuts at 180)


def band_height(rows: int, step: int = ROW_STEP_PX, minimum: int = 2 * ROW_STEP_PX, maximum: int = 900) -> int:
    """The plot height of a chart with one band per row: ``step`` px per row, between ``minimum`` and ``maximum``
    (past it the rows get thinner and the axis drops labels rather than draw them over each other)."""
    return max(minimum, min(maximum, step * max(0, rows)))


def time_format(span_s: float) -> str:
    """A 24-hour format for a time axis spanning ``span_s``: seconds when ticks may be closer than a minute, the
    day when the span is longer than one. (Vega's own multi-format labels hours on a 12-hour clock, "06 PM" or
    "06:13" with no AM/PM, and minutes as ":47".)"""
    if span_s <= 15 * 60:
        return "%H:%M:%S"
    if span_s <= 24 * 3600:
        return "%H:%M"
    return "%d %b %H:%M"


def zero_based_domain(values: pd.Series, floor: float) -> list[float]:
    """[0, the largest value] and at least [0, floor]: never a degenerate domain (one incident's peak of 238.444 s
    made a colour scale from 238.4440 to 238.4450), and a lag's colour reads from nothing to the worst."""
    top = pd.to_numeric(values, errors="coerce").max(skipna=True) if len(values) else None
    top = float(top) if top is not None and pd.notna(top) else 0.0
    return [0.0, max(floor, top)]


def time_window(
    start: pd.Series, until: pd.Series, pad_share: float = 0.08, min_pad_s: float = 15
) -> list[pd.Timestamp]:
    """The x domain of a timeline: from the first start to the last end, padded on both sides so that a bar at
    the edge is not cut; at least ``min_pad_s`` of padding (a single short incident gets a readable axis)."""
    first, last = pd.Timestamp(start.min()), pd.Timestamp(until.max())
    pad = max(pd.Timedelta(seconds=min_pad_s), (last - first) * pad_share)
    return [first - pad, last + pad]


def _epoch_ms(ts: pd.Timestamp) -> int:
    """A timestamp as epoch milliseconds (naive = UTC): how a utc scale's domain is given without a zone guess."""
    ts = pd.Timestamp(ts)
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    return int(ts.value // 1_000_000)


def _hhmmss(column: pd.Series) -> pd.Series:
    """Tooltip text in 24-hour UTC, computed here: Vega formats a tooltip's time in the browser's zone."""
    return column.map(lambda ts: clock(ts) if pd.notna(ts) else "open")


def compliance_chart(frame: pd.DataFrame) -> Layered:
    """Horizontal bars: compliance % per flow/topic, the lower bound as a tick; one row per topic."""
    data = frame.assign(
        series=frame["flow"] + " / " + frame["topic"],
        compliance_pct=frame["compliance"] * 100,
        lower_pct=frame["compliance_lower_bound"] * 100,
    )
    lo = max(0.0, float(data["lower_pct"].min()) - 1) if len(data) else 0.0
    base = alt.Chart(data).encode(
        y=alt.Y(
            "series:N",
            title=None,
            sort=alt.EncodingSortField("compliance_pct", order="ascending"),  # worst first
            axis=alt.Axis(labelLimit=ROW_LABEL_LIMIT_PX, labelOverlap=True),
        )
    )
    bars = base.mark_bar(color="#54a24b", clip=True).encode(  # clip: the x axis starts near the lowest value
        x=alt.X(
            "compliance_pct:Q",
            title="time within SLO (%)",
            scale=alt.Scale(domain=[min(lo, 99.0), 100], nice=False),
            axis=alt.Axis(format=".3~f", labelOverlap=True),
        ),
        tooltip=[
            "series:N",
            alt.Tooltip("compliance_pct:Q", title="compliance %", format=".3f"),
            alt.Tooltip("lower_pct:Q", title="lower bound %", format=".3f"),
        ],
    )
    ticks = base.mark_tick(color="black", thickness=2).encode(x="lower_pct:Q")
    rows = data["series"].nunique()
    return alt.layer(bars, ticks).properties(height=band_height(rows), **HISTORY_CHART)


def incident_rows(frame: pd.DataFrame) -> pd.Series:
    """A timeline row's label: ``topic[partition]``, prefixed with the flow when several flows are shown."""
    label = frame["topic"] + "[" + frame["partition"].astype(str) + "]"
    return frame["flow"] + " · " + label if frame["flow"].nunique() > 1 else label


def incidents_chart(frame: pd.DataFrame, window: list[pd.Timestamp] | None = None) -> alt.Chart:
    """One bar per partition incident, from its start to its recovery (or last breach), one row per partition,
    coloured by peak time lag from 0 s; the x axis is 24-hour UTC over ``window`` (default: the incidents)."""
    data = frame.copy()
    data["until"] = incident_until(data)
    data["series"] = incident_rows(data)
    data["from_utc"] = _hhmmss(data["start"])
    data["until_utc"] = _hhmmss(data["recovered"]) if "recovered" in data else _hhmmss(data["end"])
    window = window or time_window(data["start"], data["until"])
    span_s = (pd.Timestamp(window[1]) - pd.Timestamp(window[0])).total_seconds()
    rows = data["series"].nunique()
    chart: alt.Chart = (  # (mark_* read as Any: see time_series)
        alt.Chart(data)
        .mark_bar(minBandSize=3)
        .encode(
            x=alt.X(
                "start:T",
                title="time (UTC)",
                scale=alt.Scale(type="utc", domain=[_epoch_ms(w) for w in window]),
                axis=alt.Axis(format=time_format(span_s), labelOverlap=True, labelFlush=True, tickCount=8),
            ),
            x2="until:T",
            y=alt.Y(
                "series:N",
                title=None,
                sort=alt.SortField("series"),
                axis=alt.Axis(labelLimit=ROW_LABEL_LIMIT_PX, labelOverlap=True),
            ),
            color=alt.Color(
                "peak_time_lag_s:Q",
                title="peak time lag (s)",
                scale=alt.Scale(scheme="orangered", domain=zero_based_domain(data["peak_time_lag_s"], 1.0)),
                legend=alt.Legend(format=",.3~r"),
            ),
            tooltip=[
                alt.Tooltip("series:N", title="partition"),
                alt.Tooltip("from_utc:N", title="start"),
                alt.Tooltip("until_utc:N", title="recovered"),
                alt.Tooltip("duration_s:Q", format=",.0f"),
                alt.Tooltip("peak_true_lag:Q", format=",d"),
                alt.Tooltip("peak_time_lag_s:Q", format=",.1f"),
            ],
        )
        .properties(height=band_height(rows), **HISTORY_CHART)
    )
    return chart


def trend_chart(frame: pd.DataFrame, value: str, title: str) -> alt.Chart:
    """One line per flow/topic over UTC days, one tick per day (Vega's own ticks repeated a day's label)."""
    data = frame.assign(series=frame["flow"] + " / " + frame["topic"])
    chart: alt.Chart = (  # (mark_* read as Any: see time_series)
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "day:T",
                title="day (UTC)",
                scale=UTC_SCALE,
                axis=alt.Axis(format="%b %d", tickCount={"interval": "day", "step": 1}, labelOverlap=True),
            ),
            y=alt.Y(f"{value}:Q", title=title, scale=_zero_based(data[value], 1.0), axis=alt.Axis(format=",.3~s")),
            color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=ROW_LABEL_LIMIT_PX)),
            tooltip=["series:N", alt.Tooltip("day:T", format="%Y-%m-%d"), alt.Tooltip(f"{value}:Q", format=",.2f")],
        )
        .properties(height=220, **HISTORY_CHART)
    )
    return chart
