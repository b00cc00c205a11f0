"""The live sections: overview (one row per flow) and flow detail (partitions, lag and canary charts)."""

from __future__ import annotations

import streamlit as st

from .charts import canary_chart, lag_chart
from .health import GREY, SYMBOL, WORD
from .live import Poll
from .settings import PageSettings
from .timeline import Timeline

PARTITION_COLUMNS = ["topic", "partition", "status", "committed_lag", "read_lag", "true_lag", "rpo_seconds",
                     "records_lost", "forecast", "source_end", "committed", "read_position", "acked_next", "target_end"]


def _number(value, unit: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}{unit}"
    return f"{int(value):,}{unit}"


def _seconds(value) -> str:
    # RPO is milliseconds on a healthy mirror: one decimal would show 0.0 s for the canary's 8 ms
    return "–" if value is None else f"{value:,.3f} s" if value < 10 else f"{value:,.1f} s"


def monitor_banner(settings: PageSettings, poll: Poll) -> None:
    st.error(f"**Monitor unreachable** at `{settings.monitor_url}` — {poll.monitor_problem}. "
             f"Is `monitor run` running with this config? The page retries on every refresh.", icon=":material/cloud_off:")


def overview(settings: PageSettings, poll: Poll) -> None:
    if poll.monitor_problem:
        monitor_banner(settings, poll)
    if poll.canary_problem:
        st.warning(f"Canary metrics unavailable: {poll.canary_problem}", icon=":material/warning:")
    reported = {f.get("flow") for f in poll.flows}
    if not poll.monitor_problem and not poll.flows:
        st.info("The monitor reports no flows yet — it answers, but has not sampled a flow (first cycle pending, "
                "or no `flows:` in its config).")
    for flow in poll.flows:
        _flow_row(flow, poll)
    for info in settings.flows:
        if info.name not in reported and not poll.monitor_problem:
            st.markdown(f"#### {SYMBOL[GREY]} {info.name} &nbsp; `{info.source} → {info.target}`")
            st.caption("Status: UNKNOWN — the monitor does not report this flow (is it in the monitor's config?)")


def _flow_row(flow: dict, poll: Poll) -> None:
    name = flow.get("flow", "?")
    verdict = poll.verdicts[name]
    canary = poll.canary.get(name)
    totals = flow.get("totals") or {}
    with st.container(border=True):
        st.markdown(f"#### {verdict.symbol} {name} &nbsp; `{flow.get('source')} → {flow.get('target')}`")
        st.markdown(f"{verdict.badge} {verdict.why()}")
        cols = st.columns(7)
        cols[0].metric("Evaluator", flow.get("status", "UNKNOWN"))
        cols[1].metric("Canary", (canary.status or "–") if canary else "–")
        cols[2].metric("Heartbeat age", _number(canary.heartbeat_age_s, " s") if canary else "–")
        cols[3].metric("True lag", _number(totals.get("true_lag")))
        cols[4].metric("Committed lag", _number(totals.get("committed_lag")))
        cols[5].metric("RPO", _seconds(totals.get("rpo_seconds", totals.get("max_time_lag_s"))))
        cols[6].metric("Records lost", _number(totals.get("records_lost")))


def flow_detail(settings: PageSettings, poll: Poll, timeline: Timeline, name: str | None) -> None:
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
    st.markdown(f"### {verdict.symbol} {name} &nbsp; `{flow.get('source')} → {flow.get('target')}` "
                f"&nbsp; group `{flow.get('group')}`")
    st.markdown(f"{verdict.badge} {verdict.why()}")
    if flow.get("reason"):
        st.warning(f"Monitor: {flow['reason']}")
    _partition_table(flow)
    _lag_chart(timeline, name)
    _canary_section(settings, poll, timeline, name)


def _partition_table(flow: dict) -> None:
    import pandas as pd

    st.subheader("Partitions")
    rows = flow.get("partitions") or []
    if not rows:
        st.info("No partitions sampled yet.")
        return
    frame = pd.DataFrame(rows)
    if "rpo_seconds" not in frame.columns and "time_lag_s" in frame.columns:
        frame["rpo_seconds"] = frame["time_lag_s"]  # a monitor from before RPO had its own name: same figure
    frame = frame[[c for c in PARTITION_COLUMNS if c in frame.columns]]
    st.dataframe(frame, hide_index=True, width="stretch")
    forecasts = flow.get("catch_up_s") or {}
    if flow.get("not_catching_up"):
        # a caption, not a warning: a mirror keeping pace at a small steady lag is "not catching up" too
        st.caption("Forecast: not catching up on " + ", ".join(flow["not_catching_up"])
                   + " (the lag did not shrink between the last samples).")
    elif forecasts:
        st.caption("Catch-up forecast per topic: " + ", ".join(
            f"{t}: {'caught up' if s == 0 else ('unknown' if s is None else f'~{s:.0f} s')}" for t, s in sorted(forecasts.items())))


def _lag_chart(timeline: Timeline, name: str) -> None:
    st.subheader("Lag over time (records, all partitions)")
    frame = timeline.lag_frame(name)
    if len(frame) < 2:
        st.caption("Collecting: the chart fills from successive polls while this page is open.")
    if len(frame):
        st.altair_chart(lag_chart(frame), width="stretch")
    st.caption("committed = what kafka-consumer-groups shows (saw-tooth with the commit interval); "
               "read = the engine's fetch position (under-reports); true = not yet on the target (the one to alert on).")


def _canary_section(settings: PageSettings, poll: Poll, timeline: Timeline, name: str) -> None:
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
    cols = st.columns(6)
    cols[0].metric("Canary status", reading.status or "–")
    cols[1].metric("Heartbeat age", _number(reading.heartbeat_age_s, " s"))
    cols[2].metric("Lost", _number(reading.lost))
    cols[3].metric("Duplicates", _number(reading.duplicates))
    cols[4].metric("Reordered", _number(reading.reordered))
    mean = reading.mean_round_trip_s()
    cols[5].metric("Mean round trip", "–" if mean is None else f"{mean * 1000:,.0f} ms")
    frame = timeline.canary_frame(name)
    if len(frame):
        st.altair_chart(canary_chart(frame), width="stretch")
        st.caption("round_trip_s = mean canary round trip of the probes since the previous poll; "
                   "heartbeat_age_s = age of the newest mirrored heartbeat.")


def legend() -> str:
    return "  \n".join(f"{SYMBOL[k]} {WORD[k]}" for k in SYMBOL)
