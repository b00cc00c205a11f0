"""A rolling in-session history of successive polls, so the page can chart lags and canary latency over time
(the API only answers "now"). One :class:`Timeline` lives in the Streamlit session state; it holds at most
``max_points`` points per flow."""

from __future__ import annotations

from collections import deque
from datetime import datetime, timezone

from .sources import CanaryReading

LAG_COLUMNS = ("committed_lag", "read_lag", "true_lag")


class Timeline:
    def __init__(self, max_points: int):
        self.max_points = max_points
        self.lags: dict[str, deque] = {}
        self.canary: dict[str, deque] = {}
        self._last_canary: dict[str, CanaryReading] = {}

    def add_flow(self, flow: dict) -> None:
        """One point per monitor sample: polling faster than the monitor samples adds nothing."""
        name, ts = flow.get("flow"), flow.get("ts_ms")
        if not name or not isinstance(ts, (int, float)) or ts <= 0:
            return
        points = self.lags.setdefault(name, deque(maxlen=self.max_points))
        if points and points[-1]["ts_ms"] >= ts:
            return
        totals = flow.get("totals") or {}
        point = {"ts_ms": int(ts), "time": datetime.fromtimestamp(ts / 1000, timezone.utc)}
        point.update({c: totals.get(c) for c in LAG_COLUMNS})
        point["max_time_lag_s"] = totals.get("max_time_lag_s")
        points.append(point)

    def add_canary(self, flow: str, reading: CanaryReading, now: datetime) -> None:
        """Latency point = mean round trip of the probes seen since the previous scrape (from the histogram's
        sum and count), so each point is what happened in that interval, not since the canary started."""
        before = self._last_canary.get(flow)
        self._last_canary[flow] = reading
        mean = None
        if before is not None and reading.round_trip_count > before.round_trip_count:
            mean = (reading.round_trip_sum_s - before.round_trip_sum_s) / (reading.round_trip_count - before.round_trip_count)
        elif before is None:
            mean = reading.mean_round_trip_s()
        points = self.canary.setdefault(flow, deque(maxlen=self.max_points))
        points.append({"time": now, "round_trip_s": mean, "lost": reading.lost, "duplicates": reading.duplicates,
                       "heartbeat_age_s": reading.heartbeat_age_s})

    def lag_frame(self, flow: str):
        import pandas as pd

        rows = list(self.lags.get(flow, ()))
        if not rows:
            return pd.DataFrame(columns=["time", *LAG_COLUMNS]).set_index("time")
        return pd.DataFrame(rows).set_index("time")[list(LAG_COLUMNS)].astype("float64")

    def canary_frame(self, flow: str):
        import pandas as pd

        rows = list(self.canary.get(flow, ()))
        if not rows:
            return pd.DataFrame(columns=["time", "round_trip_s", "heartbeat_age_s"]).set_index("time")
        return pd.DataFrame(rows).set_index("time")[["round_trip_s", "heartbeat_age_s"]].astype("float64")
