"""The last ``monitor.recent_minutes`` of per-flow figures, in memory, for ``/v1/flows/<flow>/recent``.

One point per sampling cycle and flow: the three lags (sums over the flow's partitions), the flow's RPO in
seconds, the canary's round trip and heartbeat age when the canary's metrics can be read, and the status; plus
the flow's status changes. The status page draws its charts from this, so a reload keeps the picture (it
used to build them in the browser session). A restart of the monitor starts it empty: the Parquet history
is the long-term record.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from .model import GroupView, Snapshot

MAX_CHANGES = 50  # status changes kept per flow, besides the time limit


@dataclass(frozen=True)
class CanaryFigures:
    """What the monitor read from the canary's metrics for one flow at one time."""

    ts_ms: int
    round_trip_s: float | None  # mean of the probes since the previous reading
    heartbeat_age_s: float | None
    status: str | None


class RecentStore:
    def __init__(self, minutes: float):
        self.span_ms = int(minutes * 60_000)
        self._points: dict[str, deque[dict[str, Any]]] = {}
        self._changes: dict[str, deque[dict[str, Any]]] = {}
        self._last_status: dict[str, str] = {}
        self._lock = threading.Lock()

    def record(self, snap: Snapshot, canary: dict[str, CanaryFigures] | None = None, canary_fresh_ms: int = 0) -> None:
        """Add one point per flow view of ``snap``; canary figures older than ``canary_fresh_ms`` are left out."""
        canary = canary or {}
        with self._lock:
            for view in snap.flow_views():
                own = view.figures
                point: dict[str, Any] = {
                    "ts_ms": int(view.ts_ms),
                    "status": view.status_name,
                    "rpo_seconds": own.rpo_seconds,
                    "committed_lag": own.committed_lag,
                    "read_lag": own.read_lag,
                    "true_lag": own.true_lag,
                }
                figures = canary.get(view.flow)
                fresh = figures if figures is not None and view.ts_ms - figures.ts_ms <= canary_fresh_ms else None
                point["canary_round_trip_s"] = fresh.round_trip_s if fresh is not None else None
                point["heartbeat_age_s"] = fresh.heartbeat_age_s if fresh is not None else None
                points = self._points.setdefault(view.flow, deque())
                if points and points[-1]["ts_ms"] >= point["ts_ms"]:
                    continue
                points.append(point)
                before = self._last_status.get(view.flow)
                if before != view.status_name:
                    changes = self._changes.setdefault(view.flow, deque(maxlen=MAX_CHANGES))
                    changes.append(
                        # what explains the new status, as every surface says it (GroupView.reasons)
                        {"ts_ms": point["ts_ms"], "from": before, "to": view.status_name, "reason": why(view)}
                    )
                    self._last_status[view.flow] = view.status_name
                self._prune(view.flow, int(view.ts_ms))

    def _prune(self, flow: str, now_ms: int) -> None:
        oldest = now_ms - self.span_ms
        points = self._points.get(flow)
        while points and points[0]["ts_ms"] < oldest:
            points.popleft()
        changes = self._changes.get(flow)
        while changes and changes[0]["ts_ms"] < oldest:
            changes.popleft()

    def flows(self) -> list[str]:
        return sorted(self._points)

    def body(self, flow: str, since_ms: int | None = None) -> dict[str, Any] | None:
        """The API answer for one flow (None: the flow was never sampled)."""
        with self._lock:
            if flow not in self._points:
                return None
            points = [p for p in self._points[flow] if since_ms is None or p["ts_ms"] >= since_ms]
            changes = list(self._changes.get(flow, ()))
        return {
            "flow": flow,
            "span_s": self.span_ms / 1000,
            "points": [_clean(p) for p in points],
            "status_changes": changes,
        }


def why(view: GroupView) -> str | None:
    """The reasons of a status, one line: None for OK (nothing to explain)."""
    return "; ".join(view.reasons) or None


def _clean(point: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in point.items()}
