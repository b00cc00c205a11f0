"""The overview's traffic light: one verdict per flow from the evaluator's status, the canary's status and the
heartbeat age, with the reasons in words. Pure functions (the page and the tests call them alike)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.canary_metrics import CanaryReading
from ..core.status import PARTITION_MEANING, CanaryStatus, GroupStatus, PartitionStatus, partition_meaning

GREEN, AMBER, RED, GREY = "green", "amber", "red", "grey"
_RANK = {GREEN: 0, GREY: 1, AMBER: 2, RED: 3}
# Streamlit colour markup, not emoji: a browser without an emoji font (Debian chromium) would draw boxes
SYMBOL = {GREEN: ":green[●]", AMBER: ":orange[●]", RED: ":red[●]", GREY: ":gray[●]"}
BADGE = {GREEN: "green", AMBER: "orange", RED: "red", GREY: "gray"}
WORD = {GREEN: "OK", AMBER: "DEGRADED", RED: "DOWN", GREY: "UNKNOWN"}

# The partition statuses the overview explains, in the words every surface uses (core.status.PARTITION_MEANING)
_EXPLAINED = {s.name: s for s in PARTITION_MEANING}


@dataclass
class Verdict:
    light: str = GREEN
    reasons: list[str] = field(default_factory=list)

    def worsen(self, light: str, reason: str) -> None:
        if _RANK[light] > _RANK[self.light]:
            self.light = light
        self.reasons.append(reason)

    @property
    def word(self) -> str:
        return WORD[self.light]

    @property
    def symbol(self) -> str:
        return SYMBOL[self.light]

    @property
    def badge(self) -> str:
        return f":{BADGE[self.light]}-badge[Status: {self.word}]"

    def why(self) -> str:
        return "; ".join(self.reasons) if self.reasons else "evaluator OK, canary OK, heartbeats fresh"


def _count_statuses(partitions: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for p in partitions if isinstance(partitions, list) else ():
        status = p.get("status", "UNKNOWN") if isinstance(p, dict) else "UNKNOWN"
        counts[status] = counts.get(status, 0) + 1
    return counts


def _judge_evaluator(flow: dict[str, Any], verdict: Verdict) -> None:
    status = flow.get("status", GroupStatus.UNKNOWN.name)
    if status == GroupStatus.OK.name:
        return
    if status == GroupStatus.UNKNOWN.name:
        reason = flow.get("reason") or "the monitor could not sample this flow"
        verdict.worsen(GREY, f"evaluator UNKNOWN: {reason}")
        return
    if status == GroupStatus.NOTFOUND.name:
        verdict.worsen(AMBER, "evaluator NOTFOUND: the mirror group has committed no offsets yet (not started?)")
        return
    counts = _count_statuses(flow.get("partitions") or [])
    hanging = flow.get("hanging_transactions") or []
    if hanging and isinstance(hanging, list):
        # a hanging transaction is what made those partitions WARN (monitor/transactions.py), not their lag
        counts[PartitionStatus.WARN.name] = counts.get(PartitionStatus.WARN.name, 0) - len(hanging)
        if counts[PartitionStatus.WARN.name] <= 0:
            del counts[PartitionStatus.WARN.name]
        first = (flow.get("reasons") or [""])[0]
        verdict.worsen(
            AMBER,
            f"{len(hanging)} target partition{'s' if len(hanging) > 1 else ''} with a hanging transaction: "
            f"read_committed readers there see nothing past it{f' ({first})' if first else ''}",
        )
    parts = [
        f"{n} partition{'s' if n > 1 else ''} {s} ({partition_meaning(_EXPLAINED[s])})"
        for s, n in sorted(counts.items())
        if s in _EXPLAINED
    ]
    detail = ": " + ", ".join(parts) if parts else ""
    if hanging and not parts:
        return  # the hanging transactions alone, said above
    verdict.worsen(AMBER if status == GroupStatus.WARN.name else RED, f"evaluator {status}{detail}")


def _judge_lag(flow: dict[str, Any], warn_time_lag_s: float, verdict: Verdict) -> None:
    # A mirror keeping pace under steady traffic holds a small constant lag, which the forecast calls "not
    # catching up"; that is only worth a colour once records wait longer than the canary's warning latency.
    max_time_lag = (flow.get("totals") or {}).get("rpo_seconds")
    if (
        flow.get("not_catching_up")
        and flow.get("status") == GroupStatus.OK.name
        and (max_time_lag or 0) > warn_time_lag_s
    ):
        verdict.worsen(
            AMBER,
            f"not catching up on {', '.join(flow['not_catching_up'])} (oldest record waiting {max_time_lag:.0f} s)",
        )


def _judge_canary(
    canary: CanaryReading | None,
    canary_problem: str | None,
    heartbeat_max_age_s: float,
    heartbeats_expected: bool,
    verdict: Verdict,
) -> None:
    if canary_problem:
        verdict.worsen(AMBER, f"canary metrics unavailable: {canary_problem}")
        return
    if canary is None:
        verdict.worsen(AMBER, "the canary reports nothing for this flow (is `canary run` running for it?)")
        return
    if canary.status == CanaryStatus.CRITICAL.name:
        if canary.overdue:  # overdue is not lost: the events are still expected
            overdue = (
                f"{canary.overdue:.0f} probe event(s) overdue, still expected (oldest {canary.oldest_overdue_s:.0f} s)"
            )
            verdict.worsen(RED, f"canary CRITICAL: {overdue}")
        else:
            verdict.worsen(RED, "canary CRITICAL: probe events lost (a later one arrived first) or heartbeat old")
    elif canary.status == CanaryStatus.WARNING.name:
        verdict.worsen(AMBER, "canary WARNING: probe round trips are slow")
    elif canary.status in (CanaryStatus.UNKNOWN.name, None):
        verdict.worsen(AMBER, "canary UNKNOWN: it cannot reach a cluster or has not probed yet")
    age = canary.heartbeat_age_s
    if not heartbeats_expected:
        return
    if age is None:
        verdict.worsen(AMBER, "no mirrored heartbeat seen yet")
    elif age > heartbeat_max_age_s:
        verdict.worsen(
            RED,
            f"heartbeat {age:.1f} s old (limit {heartbeat_max_age_s:g} s)"
            if age < 10
            else f"heartbeat {age:.0f} s old (limit {heartbeat_max_age_s:g} s)",
        )


def _judge_connect(flow: dict[str, Any], verdict: Verdict) -> None:
    # an MM2 flow with mirror.connect: the monitor's lines for each connector or task not RUNNING (api.connect_body)
    connect = flow.get("connect")
    if not isinstance(connect, dict):
        return
    for line in connect.get("problems") or []:
        line = str(line)
        verdict.worsen(RED if " FAILED" in line else AMBER, line)


def _judge_freshness(flow: dict[str, Any], now_ms: int, interval_s: float, verdict: Verdict) -> None:
    ts = flow.get("ts_ms")
    if isinstance(ts, (int, float)) and ts > 0:
        age_s = (now_ms - ts) / 1000
        if age_s > max(3 * interval_s, 15):
            verdict.worsen(AMBER, f"the monitor's last sample is {age_s:.0f} s old")


def judge_flow(
    flow: dict[str, Any],
    canary: CanaryReading | None,
    *,
    canary_configured: bool,
    canary_problem: str | None,
    heartbeat_max_age_s: float,
    monitor_interval_s: float,
    now_ms: int,
    warn_time_lag_s: float = 5.0,
    heartbeats_expected: bool = True,
) -> Verdict:
    verdict = Verdict()
    _judge_evaluator(flow, verdict)
    _judge_lag(flow, warn_time_lag_s, verdict)
    _judge_connect(flow, verdict)
    if canary_configured:
        _judge_canary(canary, canary_problem, heartbeat_max_age_s, heartbeats_expected, verdict)
    _judge_freshness(flow, now_ms, monitor_interval_s, verdict)
    return verdict
