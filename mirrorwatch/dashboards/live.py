"""One poll of the live sources: the monitor's flows and recent figures, the canary's readings; problems as text."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..core.canary_metrics import CanaryReading
from .health import Verdict, judge_flow
from .settings import PageSettings
from .sources import SourceError, fetch_canary, fetch_flows, fetch_recent


@dataclass
class Poll:
    flows: list[dict[str, Any]] = field(default_factory=list)
    monitor_problem: str | None = None  # set → banner; ``flows`` is empty then
    canary: dict[str, CanaryReading] = field(default_factory=dict)
    canary_problem: str | None = None
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    # the monitor's last minutes per flow (``/v1/flows/<flow>/recent``): ``points``, ``status_changes``
    recent: dict[str, dict[str, Any]] = field(default_factory=dict)
    recent_problem: str | None = None
    polled_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def flow(self, name: str) -> dict[str, Any] | None:
        return next((f for f in self.flows if f.get("flow") == name), None)


def poll(settings: PageSettings, only_flow: str | None = None) -> Poll:
    """``only_flow``: fetch the recent figures of that flow alone (the detail view shows one)."""
    result = Poll()
    try:
        result.flows = fetch_flows(settings.monitor_url, settings.timeout_s)
    except SourceError as exc:
        result.monitor_problem = str(exc)
    if settings.canary_url:
        try:
            result.canary = fetch_canary(settings.canary_url, settings.timeout_s)
        except SourceError as exc:
            result.canary_problem = str(exc)
    now_ms = int(time.time() * 1000)
    for flow in result.flows:
        name = flow.get("flow", "?")
        result.verdicts[name] = judge_flow(
            flow,
            result.canary.get(name),
            canary_configured=bool(settings.canary_url),
            canary_problem=result.canary_problem,
            heartbeat_max_age_s=settings.heartbeat_max_age_s,
            monitor_interval_s=settings.monitor_interval_s,
            now_ms=now_ms,
            warn_time_lag_s=settings.warn_time_lag_s,
            heartbeats_expected=settings.heartbeats_expected,
        )
        if only_flow is not None and name != only_flow:
            continue
        try:
            result.recent[name] = fetch_recent(settings.monitor_url, name, settings.timeout_s)
        except SourceError as exc:  # an older monitor without /recent: the page still shows "now"
            result.recent_problem = str(exc)
    return result
