"""The History view's pure parts, table-driven: the chart specs (24-hour UTC axes, domains that are never
degenerate, heights that grow with the rows, autosize that keeps the plot's height) and the incident story
(partition incidents merged per flow into episodes, told in words). The rendered page: test_dashboard_live.py."""

from __future__ import annotations

import pandas as pd
import pytest

from mirrorwatch.dashboards.charts import (
    ROW_STEP_PX,
    band_height,
    compliance_chart,
    incidents_chart,
    time_format,
    time_window,
    trend_chart,
    zero_based_domain,
)
from mirrorwatch.dashboards.incident_story import (
    changes_during,
    duration_words,
    episode_label,
    episodes,
    in_episode,
    story,
)

T0 = pd.Timestamp("2026-11-24 18:13:05")  # the evening: a 12-hour clock would say 06:13


@pytest.mark.parametrize(
    "rows, height",
    [(0, 2 * ROW_STEP_PX), (1, 2 * ROW_STEP_PX), (2, 2 * ROW_STEP_PX), (3, 3 * ROW_STEP_PX), (10, 260), (1000, 900)],
)
def test_band_height_grows_with_the_rows_within_bounds(rows, height):
    assert band_height(rows) == height


@pytest.mark.parametrize(
    "span_s, fmt",
    [(60, "%H:%M:%S"), (15 * 60, "%H:%M:%S"), (15 * 60 + 1, "%H:%M"), (86_400, "%H:%M"), (86_401, "%d %b %H:%M")],
)
def test_time_format_is_24_hour_and_says_the_day_past_one(span_s, fmt):
    assert time_format(span_s) == fmt
    assert "%I" not in fmt and "%p" not in fmt  # no 12-hour clock
    assert T0.strftime(fmt).startswith(("18:13", "24 Nov 18:13"))


@pytest.mark.parametrize(
    "values, floor, domain",
    [
        ([238.4445], 1.0, [0.0, 238.4445]),  # one incident: min == max was a 0.001-s wide colour scale
        ([238.4445, 238.4445], 1.0, [0.0, 238.4445]),
        ([0.0], 1.0, [0.0, 1.0]),
        ([], 1.0, [0.0, 1.0]),
        ([None, float("nan")], 1.0, [0.0, 1.0]),
        ([3.0, 12.5], 1.0, [0.0, 12.5]),
    ],
)
def test_zero_based_domain_is_never_degenerate(values, floor, domain):
    got = zero_based_domain(pd.Series(values, dtype="float64"), floor)
    assert got == domain and got[1] > got[0]


@pytest.mark.parametrize(
    "first_s, last_s, pad_s",
    [(0, 0, 15), (0, 60, 15), (0, 240, 19.2), (0, 3600, 288)],  # at least 15 s, else 8 % of the span
)
def test_time_window_pads_both_sides(first_s, last_s, pad_s):
    start = pd.Series([T0 + pd.Timedelta(seconds=first_s)])
    until = pd.Series([T0 + pd.Timedelta(seconds=last_s)])
    lo, hi = time_window(start, until)
    assert (start[0] - lo).total_seconds() == pytest.approx(pad_s)
    assert (hi - until[0]).total_seconds() == pytest.approx(pad_s)


def incident(topic, partition, start_s, until_s, flow="east-west", peak_s=238.4445, lag=390, statuses=("STOP",)):
    start = T0 + pd.Timedelta(seconds=start_s)
    return {
        "flow": flow,
        "mirror": "mirrorwatch",
        "topic": topic,
        "partition": partition,
        "start": start,
        "end": start + pd.Timedelta(seconds=max(0, until_s - start_s - 1)),
        "recovered": T0 + pd.Timedelta(seconds=until_s),
        "open": False,
        "duration_s": float(until_s - start_s),
        "peak_true_lag": lag,
        "peak_time_lag_s": peak_s,
        "statuses": list(statuses),
    }


FREEZE = pd.DataFrame(
    [
        incident("orders", 0, 0, 240),
        incident("orders", 1, 1, 241, statuses=("OK", "STALL", "STOP")),
        incident("payments", 2, 2, 239, lag=120, peak_s=200.0),
        incident("orders", 0, 900, 930, statuses=("WARN",)),  # later, alone: a second episode
        incident("orders", 0, 5, 60, flow="north-south", statuses=()),  # another flow: its own episode
    ]
)


def spec(chart) -> dict:
    return chart.to_dict()


def y_step_free(s: dict) -> None:
    # the plot keeps its own height: Streamlit's default "fit" would take the axes out of it
    assert s["autosize"] == {"type": "fit-x", "contains": "padding"}
    assert s["usermeta"]["embedOptions"]["renderer"] == "svg"


@pytest.mark.parametrize("rows", [1, 2, 3, 12])
def test_incidents_chart_24_hour_utc_axis_sized_domain_and_height(rows):
    frame = pd.DataFrame([incident(f"topic-{i}", i, i, 240 + i) for i in range(rows)])
    s = spec(incidents_chart(frame))
    y_step_free(s)
    assert s["height"] == band_height(rows)
    x = s["encoding"]["x"]
    assert x["scale"]["type"] == "utc" and x["axis"]["format"] == "%H:%M:%S" and x["title"] == "time (UTC)"
    lo, hi = x["scale"]["domain"]
    assert lo < T0.tz_localize("UTC").value // 1_000_000 and hi - lo > 240_000  # padded around the bars
    assert s["encoding"]["color"]["scale"]["domain"] == [0.0, 238.4445]
    assert s["encoding"]["y"]["axis"]["labelLimit"] >= 300


def test_incidents_chart_names_the_flow_on_each_row_only_when_several():
    one = pd.DataFrame(spec(incidents_chart(FREEZE[FREEZE["flow"] == "east-west"]))["datasets"].popitem()[1])
    two = pd.DataFrame(spec(incidents_chart(FREEZE))["datasets"].popitem()[1])
    assert set(one["series"]) == {"orders[0]", "orders[1]", "payments[2]"}
    assert "north-south · orders[0]" in set(two["series"]) and "east-west · orders[0]" in set(two["series"])
    assert set(one["from_utc"]) >= {"2026-11-24 18:13:05 UTC"}  # tooltips: 24-hour UTC text, not browser-local


@pytest.mark.parametrize(
    "compliance, lower, x_from",
    [([1.0, 1.0], [1.0, 1.0], 99.0), ([0.97, 0.99], [0.95, 0.98], 94.0), ([0.2, 0.5], [0.0, 0.4], 0.0)],
)
def test_compliance_chart_one_row_per_topic_and_a_readable_x_domain(compliance, lower, x_from):
    frame = pd.DataFrame(
        {
            "flow": "east-west",
            "topic": ["orders", "payments"],
            "compliance": compliance,
            "compliance_lower_bound": lower,
        }
    )
    s = spec(compliance_chart(frame))
    y_step_free(s)
    assert s["height"] == band_height(2)
    bars = s["layer"][0]
    assert bars["mark"]["clip"] is True
    assert bars["encoding"]["x"]["scale"]["domain"] == [pytest.approx(x_from), 100]
    assert bars["encoding"]["y"]["axis"]["labelLimit"] >= 300


def test_trend_chart_days_in_utc_one_tick_a_day_and_the_title_kept():
    frame = pd.DataFrame(
        {
            "flow": "east-west",
            "topic": ["orders", "orders"],
            "day": pd.to_datetime(["2026-11-23", "2026-11-24"]),
            "true_lag_p99": [0.0, 0.0],
        }
    )
    s = spec(trend_chart(frame, "true_lag_p99", "true lag p99 (records)"))
    y_step_free(s)
    x, y = s["encoding"]["x"], s["encoding"]["y"]
    assert x["scale"]["type"] == "utc" and x["axis"]["tickCount"] == {"interval": "day", "step": 1}
    assert y["scale"]["domain"] == [0, 1.0]  # all zero: a readable axis from 0, not a degenerate one


# ------------------------------------------------------------------ the story


def test_episodes_merge_overlapping_partitions_per_flow_newest_first():
    told = episodes(FREEZE)
    assert list(zip(told["flow"], told["partitions"], told["topics"])) == [
        ("east-west", 1, 1),  # 900 s: the later one, first
        ("north-south", 1, 1),  # 5 s
        ("east-west", 3, 2),  # 0 s, the freeze: three partitions of two topics
    ]
    freeze = told.iloc[2]
    assert freeze["start"] == T0 and freeze["until"] == T0 + pd.Timedelta(seconds=241)
    assert freeze["duration_s"] == 241 and freeze["peak_true_lag"] == 390 and freeze["peak_time_lag_s"] == 238.4445
    assert freeze["hit"] == "orders[0,1], payments[2]"
    assert freeze["statuses"] == "STALL, STOP"  # worst first (core.status.PARTITION_SEVERITY), OK left out
    assert told.iloc[1]["statuses"] == ""  # known: none worse than OK
    assert len(in_episode(FREEZE, freeze)) == 3


def test_episodes_without_a_statuses_column_say_unknown_not_none():
    told = episodes(FREEZE.drop(columns="statuses"))
    assert told["statuses"].isna().all()
    assert "written before the `statuses` column" in story(told.iloc[0])[3]


def test_episodes_of_nothing_is_empty():
    assert episodes(FREEZE.iloc[0:0]).empty


@pytest.mark.parametrize(
    "seconds, words", [(0, "0 s"), (12.4, "12 s"), (241, "4 min 01 s"), (3720, "1 h 02 min"), (None, "?")]
)
def test_duration_words(seconds, words):
    assert duration_words(seconds) == words


def test_story_says_when_what_how_bad_and_which_statuses():
    freeze = episodes(FREEZE).iloc[2]
    lines = story(freeze)
    assert lines[0] == ("**Started** 2026-11-24 18:13:05 UTC; **recovered 2026-11-24 18:17:06 UTC** after 4 min 01 s.")
    assert lines[1] == "**Hit** flow `east-west`: 2 topics, 3 partitions: orders[0,1], payments[2]."
    assert lines[2] == "**Worst** 390 records behind (true lag) and 238.4 s behind (time lag)."
    assert lines[3] == "**Evaluator statuses** during the breach: **STALL, STOP**."
    assert episode_label(freeze) == "east-west, 2026-11-24 18:13:05 UTC, 4 min 01 s"
    still = story(freeze.copy().replace({False: True}))  # open: said so, with its last sample
    assert "still open at the last sample (2026-11-24 18:17:06 UTC)" in still[0]


def ms(seconds: float) -> int:
    return int((T0.tz_localize("UTC") + pd.Timedelta(seconds=seconds)).value // 1_000_000)


CHANGES = [
    {"ts_ms": ms(-600), "from": None, "to": "OK", "reason": None},  # long before: left out
    {"ts_ms": ms(-20), "from": "OK", "to": "ERR", "reason": "STOP"},  # the evaluator often says so first
    {"ts_ms": ms(250), "from": "ERR", "to": "OK", "reason": None},
    {"ts_ms": ms(400), "from": "OK", "to": "WARN", "reason": None},  # after the margin: left out
]


@pytest.mark.parametrize(
    "oldest_point_s, changes, expected",
    [
        (-3600, CHANGES, ["ERR", "OK"]),  # oldest first, within 60 s of the episode
        (-3600, list(reversed(CHANGES)), ["ERR", "OK"]),
        (-3600, [], []),  # known: none
        (10, CHANGES, None),  # the monitor's memory starts after the episode did: not known
        (None, CHANGES, None),  # no points at all
    ],
)
def test_changes_during_an_episode_from_the_monitors_memory(oldest_point_s, changes, expected):
    freeze = episodes(FREEZE).iloc[2]  # 18:13:05 to 18:17:06
    points = [] if oldest_point_s is None else [{"ts_ms": ms(oldest_point_s)}, {"ts_ms": ms(900)}]
    got = changes_during({"points": points, "status_changes": changes}, freeze)
    assert (None if got is None else [c["to"] for c in got]) == expected
