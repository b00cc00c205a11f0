"""The live sections: the overview (one card per flow, made for someone just woken up) and the flow detail
(topics and partitions worst first, charts of the monitor's recent figures, the canary)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from .charts import canary_chart, lag_chart, overview_chart, time_series
from .frames import (
    KEY_PARTITION_COLUMNS,
    OTHER_PARTITION_COLUMNS,
    SORTS,
    partition_frame,
    recent_frame,
    sorted_partitions,
    status_changes,
    topic_frame,
)
from .health import GREY, SYMBOL, WORD
from .live import Poll
from .settings import PageSettings

COLUMN_LABELS = {
    "time_lag_s": st.column_config.NumberColumn(
        "RPO (s)", help="age of the oldest record not yet on the target", format="%.1f"
    ),
    "true_lag": st.column_config.NumberColumn("true lag", help="records not yet acknowledged by the target"),
    "committed_lag": st.column_config.NumberColumn("committed lag", help="what kafka-consumer-groups shows"),
    "read_lag": st.column_config.NumberColumn("read lag", help="behind the engine's fetch position (under-reports)"),
    "catch_up_s": st.column_config.NumberColumn("catch-up (s)", format="%.0f"),
}


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}{unit}"
    return f"{int(value):,}{unit}"


def _rpo(seconds: float | None) -> str:
    """As `monitor lag` shows it: a healthy mirror's RPO is milliseconds, and "0.0 s" would hide 0 from 40 ms."""
    if seconds is None:
        return "–"
    return f"{seconds * 1000:,.0f} ms" if seconds < 1 else f"{seconds:,.1f} s"


def _seconds(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value * 1000:,.0f} ms" if value < 1 else f"{value:,.1f} s"


def monitor_banner(settings: PageSettings, poll: Poll) -> None:
    st.error(
        f"**Monitor unreachable** at `{settings.monitor_url}` — {poll.monitor_problem}. "
        f"Is `monitor run` running with this config? The page retries on every refresh.",
        icon=":material/cloud_off:",
    )


def overview(settings: PageSettings, poll: Poll) -> None:
    if poll.monitor_problem:
        monitor_banner(settings, poll)
    if poll.canary_problem:
        st.warning(f"Canary metrics unavailable: {poll.canary_problem}", icon=":material/warning:")
    reported = {f.get("flow") for f in poll.flows}
    if not poll.monitor_problem and not poll.flows:
        st.info(
            "The monitor reports no flows yet — it answers, but has not sampled a flow (first cycle pending, "
            "or no `flows:` in its config)."
        )
    for flow in poll.flows:
        _flow_card(settings, flow, poll)
    for info in settings.flows:
        if info.name not in reported and not poll.monitor_problem:
            st.markdown(f"#### {SYMBOL[GREY]} {info.name} &nbsp; `{info.source} → {info.target}`")
            st.caption("Status: UNKNOWN — the monitor does not report this flow (is it in the monitor's config?)")


def _newest(frame: pd.DataFrame, column: str) -> float | None:
    """The newest point's value; None when it is unknown (an older known value would hide a stopped canary)."""
    if column not in frame or not len(frame):
        return None
    value = frame[column].iloc[-1]
    return None if value != value else float(value)  # NaN → None


def _flow_card(settings: PageSettings, flow: dict[str, Any], poll: Poll) -> None:
    name = flow.get("flow", "?")
    verdict = poll.verdicts[name]
    canary = poll.canary.get(name)
    totals = flow.get("totals") or {}
    recent = poll.recent.get(name) or {}
    frame = recent_frame(recent.get("points", []), settings.overview_minutes)
    with st.container(border=True):
        st.markdown(f"#### {verdict.symbol} {name} &nbsp; `{flow.get('source')} → {flow.get('target')}`")
        st.markdown(f"{verdict.badge} {verdict.why()}")
        rpo = totals.get("rpo_seconds")
        round_trip = _newest(frame, "canary_round_trip_s")
        label, why = "Canary round trip", "mean of the probes seen in the last seconds; – when none came back"
        if not len(frame) and canary is not None:  # a monitor without recent figures: the mean since the start
            round_trip = canary.mean_round_trip_s()
            label, why = "Canary round trip (mean since start)", "the monitor keeps no recent figures for this flow"
        cols = st.columns(6)
        cols[0].metric("RPO now", _rpo(rpo), help="age of the oldest source record not yet on the target")
        cols[1].metric("True lag", _number(totals.get("true_lag")), help="records not yet on the target")
        cols[2].metric(label, _seconds(round_trip), help=why)
        cols[3].metric("Heartbeat age", _number(canary.heartbeat_age_s, " s") if canary else "–")
        cols[4].metric("Evaluator", flow.get("status", "UNKNOWN"))
        cols[5].metric("Canary", (canary.status or "–") if canary else "–")
        _connect_caption(flow)
        if totals.get("records_lost"):
            st.error(
                f"{_number(totals.get('records_lost'))} source records were removed before they were mirrored "
                "(retention or DeleteRecords): they are not on the target. See Flow detail."
            )
        chart, changes = st.columns([3, 2])
        with chart:
            if len(frame) >= 2:
                chart.caption(f"Last {settings.overview_minutes:g} min: RPO (s, area) and true lag (records, line)")
                st.altair_chart(overview_chart(frame), width="stretch")
            else:
                chart.caption("The chart fills from the monitor's samples (a point per sample).")
        with changes:
            changes.caption("Status changes (UTC, newest first)")
            lines = status_changes(recent.get("status_changes", []))
            changes.markdown("\n".join(f"- {line}" for line in lines) if lines else "none in the monitor's memory")


def _connect_caption(flow: dict[str, Any]) -> None:
    """One line on the card: the MM2 connectors' states from the Connect REST API (the problems are in the why)."""
    connect = flow.get("connect")
    if not isinstance(connect, dict):
        return
    states = ", ".join(
        f"{c.get('role')} {c.get('state')}" for c in connect.get("connectors") or [] if isinstance(c, dict)
    )
    st.caption(f"Connectors (Connect REST API): {states}")


def _connectors_table(flow: dict[str, Any]) -> None:
    connect = flow.get("connect")
    if not isinstance(connect, dict):
        return
    st.subheader("Connectors and tasks")
    rows = []
    for c in connect.get("connectors") or []:
        if not isinstance(c, dict):
            continue
        rows.append(
            {
                "connector": c.get("name"),
                "role": c.get("role"),
                "task": "",
                "state": c.get("state"),
                "worker": c.get("worker_id"),
                "trace (first line) / reason": c.get("trace") or c.get("error") or "",
            }
        )
        for t in c.get("tasks") or []:
            if isinstance(t, dict):
                rows.append(
                    {
                        "connector": c.get("name"),
                        "role": c.get("role"),
                        "task": str(t.get("id")),
                        "state": t.get("state"),
                        "worker": t.get("worker_id"),
                        "trace (first line) / reason": t.get("trace") or "",
                    }
                )
    st.dataframe(rows, hide_index=True, width="stretch")


def flow_detail(settings: PageSettings, poll: Poll, name: str | None) -> None:
    if poll.monitor_problem:
        monitor_banner(settings, poll)
        return
    if name is None:
        st.info("No flow to show: the config defines none and the monitor reports none.")
        return
    flow = poll.flow(name)
    if flow is None:
        st.info(f"The monitor does not report flow `{name}` (yet).")
        return
    verdict = poll.verdicts[name]
    mirror = "MirrorMaker 2 " if flow.get("mirror") == "mm2" else ""  # MM2's "group" is its source connector
    st.markdown(
        f"### {verdict.symbol} {name} &nbsp; `{flow.get('source')} → {flow.get('target')}` "
        f"&nbsp; {mirror}{'connector' if mirror else 'group'} `{flow.get('group')}`"
    )
    st.markdown(f"{verdict.badge} {verdict.why()}")
    if flow.get("reason"):
        st.warning(f"Monitor: {flow['reason']}")
    _connectors_table(flow)
    _partition_tables(flow)
    frame = recent_frame((poll.recent.get(name) or {}).get("points", []))
    _lag_charts(frame, poll)
    _canary_section(settings, poll, frame, name)


def _partition_tables(flow: dict[str, Any]) -> None:
    rows = flow.get("partitions") or []
    st.subheader(f"Topics and partitions ({len(rows):,} partitions)")
    if not rows:
        st.info("No partitions sampled yet.")
        return
    frame = partition_frame(rows)
    topics = topic_frame(frame)
    st.dataframe(
        topics, hide_index=True, width="stretch", height=min(38 + 35 * len(topics), 250), column_config=COLUMN_LABELS
    )
    sort = st.selectbox("Partitions sorted by", list(SORTS), key="partition_sort")
    shown = sorted_partitions(frame, sort)
    st.dataframe(
        shown[KEY_PARTITION_COLUMNS],
        hide_index=True,
        width="stretch",
        column_config=COLUMN_LABELS,
        height=min(38 + 35 * len(shown), 420),
    )
    with st.expander("All columns: read lag, catch-up forecast and the offsets behind the lags"):
        st.dataframe(
            shown[["topic", "partition"] + OTHER_PARTITION_COLUMNS],
            hide_index=True,
            width="stretch",
            column_config=COLUMN_LABELS,
        )
    forecasts = flow.get("catch_up_s") or {}
    if flow.get("not_catching_up"):
        # a caption, not a warning: a mirror keeping pace at a small steady lag is "not catching up" too
        st.caption(
            "Forecast: not catching up on "
            + ", ".join(flow["not_catching_up"])
            + " (the lag did not shrink between the last samples)."
        )
    elif forecasts:
        st.caption(
            "Catch-up forecast per topic: "
            + ", ".join(
                f"{t}: {'caught up' if s == 0 else ('unknown' if s is None else f'~{s:.0f} s')}"
                for t, s in sorted(forecasts.items())
            )
        )


def _lag_charts(frame: pd.DataFrame, poll: Poll) -> None:
    st.subheader("Lag over time (all partitions)")
    if poll.recent_problem:
        st.caption(f"No recent figures from the monitor: {poll.recent_problem}")
    if len(frame) < 2:
        st.caption("Collecting: the monitor adds a point per sample.")
    if len(frame):
        left, right = st.columns(2)
        left.altair_chart(lag_chart(frame), width="stretch")
        right.altair_chart(time_series(frame, ["rpo_seconds"], "RPO (s)", {"rpo_seconds": "#f58518"}), width="stretch")
    st.caption(
        "committed = what kafka-consumer-groups shows (saw-tooth with the commit interval); "
        "read = the engine's fetch position (under-reports); true = not yet on the target (the one to alert on); "
        "RPO = age of the oldest record not yet on the target. Kept by the monitor, so a reload keeps them."
    )


def _canary_section(settings: PageSettings, poll: Poll, frame: pd.DataFrame, name: str) -> None:
    st.subheader("Canary")
    if not settings.canary_url:
        st.info("No canary configured (`canary.metrics_port` is off and `dashboard.canary_url` is unset).")
        return
    if poll.canary_problem:
        st.warning(f"Canary metrics unavailable: {poll.canary_problem}")
        return
    reading = poll.canary.get(name)
    if reading is None:
        st.info(f"The canary at `{settings.canary_url}` reports nothing for flow `{name}`.")
        return
    cols = st.columns(7)
    cols[0].metric("Canary status", reading.status or "–")
    cols[1].metric("Heartbeat age", _number(reading.heartbeat_age_s, " s"))
    # overdue: not arrived, still expected (a frozen mirror); lost: a later event of the partition arrived without it
    overdue_for = f"oldest {reading.oldest_overdue_s:,.0f} s" if reading.overdue else None
    cols[2].metric("Overdue now", _number(reading.overdue), overdue_for, delta_color="off")
    cols[3].metric("Lost", _number(reading.lost))
    cols[4].metric("Duplicates", _number(reading.duplicates))
    cols[5].metric("Reordered", _number(reading.reordered))
    mean = reading.mean_round_trip_s()
    cols[6].metric("Mean round trip since start", "–" if mean is None else f"{mean * 1000:,.0f} ms")
    if len(frame) and frame[["canary_round_trip_s", "heartbeat_age_s"]].notna().any().any():
        st.altair_chart(canary_chart(frame), width="stretch")
        st.caption(
            "canary_round_trip_s = mean canary round trip of the probes between the monitor's reads of the "
            "canary's metrics; heartbeat_age_s = age of the newest mirrored heartbeat."
        )


def legend() -> str:
    return "  \n".join(f"{SYMBOL[k]} {WORD[k]}" for k in SYMBOL)
