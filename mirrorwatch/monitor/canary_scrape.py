"""The canary's round trip and heartbeat age, read from the canary's own Prometheus endpoint, for the recent
figures (``recent``). The monitor does not import the canary: it reads what the canary publishes, like any
Prometheus server would, through the one parser of those series (``core.canary_metrics``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import requests

from ..core.canary_metrics import CanaryReading, parse_canary_metrics
from .recent import CanaryFigures

log = logging.getLogger("mirrorwatch.monitor.canary_scrape")


class CanaryScraper:
    """Keeps the newest :class:`CanaryFigures` per flow; the round trip is the mean of the probes seen since the
    previous scrape that saw new probes (difference of the histogram's sum and count). It is held for
    ``hold_s`` (about two canary intervals: scrapes are more frequent than probes), then None: no probe came back."""

    def __init__(self, url: str, hold_s: float, timeout_s: float = 2.0, clock: Callable[[], float] = time.time):
        self.url, self.hold_ms, self.timeout_s, self._clock = url, int(hold_s * 1000), timeout_s, clock
        self._previous: dict[str, CanaryReading] = {}
        self._round_trip: dict[str, tuple[int, float]] = {}  # flow → (when, mean round trip)
        self.latest: dict[str, CanaryFigures] = {}
        self._warned = False

    def scrape(self) -> None:
        try:
            response = requests.get(self.url, timeout=self.timeout_s)
            response.raise_for_status()
            readings = parse_canary_metrics(response.text)
        except (requests.RequestException, ValueError) as exc:
            if not self._warned:  # the canary may simply not run; say so once, not every cycle
                log.info(
                    "canary metrics at %s not readable (%s); recent figures carry no canary latency",
                    self.url,
                    type(exc).__name__,
                )
                self._warned = True
            return
        self._warned = False
        self.update(readings, int(self._clock() * 1000))

    def update(self, readings: dict[str, CanaryReading], now_ms: int) -> None:
        for flow, now in readings.items():
            before = self._previous.get(flow)
            # a previous reading without the histogram (no probe back yet: the series does not exist) counts as 0
            if before is not None and now.round_trip_count > before.round_trip_count:
                mean = (now.round_trip_sum_s - before.round_trip_sum_s) / (
                    now.round_trip_count - before.round_trip_count
                )
                self._round_trip[flow] = (now_ms, mean)
            self._previous[flow] = now
            held = self._round_trip.get(flow)  # (when, mean round trip) of the newest probes back
            round_trip = held[1] if held is not None and now_ms - held[0] <= self.hold_ms else None
            self.latest[flow] = CanaryFigures(
                ts_ms=now_ms, round_trip_s=round_trip, heartbeat_age_s=now.heartbeat_age_s, status=now.status
            )
