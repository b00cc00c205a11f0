"""Liveness and readiness of a service (``/healthz``, ``/readyz``): the state, and the two verdicts. No I/O.

- **alive**: every loop the service watches has ticked within its own ``stale_after_s`` (a wedged loop stops
  ticking; a loop that waits out an unreachable cluster keeps ticking, its calls are bounded).
- **ready**: the config is loaded, every cluster the service uses has answered at least once, the service's
  first cycle is done, and it is alive.

Every readiness condition but liveness only ever goes from false to true, so a service once ready stays ready
while it is alive: a cluster that stops answering later does not take the service out of its Service (its
metrics, which explain the outage, must still be scraped); only a wedged loop fails, both probes.

Ticks are on hot paths (the mirror's data loop): ``tick`` is one dict store, atomic under the GIL, no lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

LIVENESS_FLOOR_S = 30.0  # no loop is called wedged sooner: a cycle slowed by bounded timeouts is not a wedge


def stale_after_s(interval_s: float) -> float:
    """How long a loop that runs every ``interval_s`` may go without a tick before it counts as wedged: three of
    its intervals (a late or coalesced run is not a wedge), never less than ``LIVENESS_FLOOR_S``."""
    return max(3.0 * interval_s, LIVENESS_FLOOR_S)


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str


@dataclass(frozen=True)
class Verdict:
    checks: dict[str, Check]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks.values())

    def body(self) -> dict[str, Any]:
        """The probes' JSON answer: ``{"status": "ok"|"failing", "checks": {name: {"ok", "detail"}}}``."""
        return {
            "status": "ok" if self.ok else "failing",
            "checks": {name: {"ok": c.ok, "detail": c.detail} for name, c in self.checks.items()},
        }


def judge_liveness(loops: Mapping[str, tuple[float, float]], now: float) -> Verdict:
    """``loops``: name → (last tick, stale after s). Alive when each ticked within its own bound."""
    checks = {}
    for name, (last, bound) in loops.items():
        age = max(0.0, now - last)
        ok = age <= bound
        detail = f"ticked {age:.1f} s ago" + ("" if ok else f", more than {bound:g} s: wedged")
        checks[f"loop {name}"] = Check(ok, detail)
    return Verdict(checks)


def judge_readiness(
    config_loaded: bool,
    clusters: Mapping[str, tuple[bool, bool]],
    cycles: Mapping[str, bool],
    alive: Verdict,
) -> Verdict:
    """``clusters``: alias → (answered at least once, answered last time); ``cycles``: name → first one done."""
    checks = {"config": Check(config_loaded, "loaded" if config_loaded else "not loaded yet")}
    for alias, (once, now) in clusters.items():
        if not once:
            detail = "has not answered yet"
        elif now:
            detail = "answered"
        else:
            detail = "answered before, not answering now (still ready: the metrics say what is wrong)"
        checks[f"cluster {alias}"] = Check(once, detail)
    for name, done in cycles.items():
        checks[name] = Check(done, "done" if done else "not done yet")
    checks.update(alive.checks)
    return Verdict(checks)


class ProbeState:
    """What a service has done so far, written by its threads and read by the probe endpoints.

    ``clusters``: the aliases the service uses; ``cycles``: the names of its first cycles (one per loop that
    has one, e.g. one per canary flow); ``clock``: monotonic seconds (injected by tests).
    """

    def __init__(
        self,
        clusters: Iterable[str],
        cycles: Iterable[str] = ("first cycle",),
        clock: Callable[[], float] = time.monotonic,
    ):
        self._clock = clock
        self._lock = threading.Lock()
        self._config_loaded = False
        self._clusters: dict[str, tuple[bool, bool]] = {alias: (False, False) for alias in clusters}
        self._cycles: dict[str, bool] = {name: False for name in cycles}
        self._ticks: dict[str, float] = {}
        self._bounds: dict[str, float] = {}

    # ------------------------------------------------------------------ written by the service
    def config_loaded(self) -> None:
        self._config_loaded = True

    def answered(self, alias: str, ok: bool = True) -> None:
        """A request to the cluster succeeded (or, ``ok=False``, failed); unknown aliases are ignored."""
        with self._lock:
            if alias in self._clusters:
                once, _ = self._clusters[alias]
                self._clusters[alias] = (once or ok, ok)

    def cycle_done(self, name: str = "first cycle") -> None:
        with self._lock:
            if name in self._cycles:
                self._cycles[name] = True

    def watch(self, loop: str, stale_after: float) -> None:
        """From now on ``loop`` must tick at least every ``stale_after`` seconds (it counts as ticked now)."""
        with self._lock:
            self._bounds[loop] = stale_after
            self._ticks[loop] = self._clock()

    def unwatch(self, loop: str) -> None:
        """``loop`` is over (e.g. start-up steps handed over to the data loop): no longer judged."""
        with self._lock:
            self._bounds.pop(loop, None)
            self._ticks.pop(loop, None)

    def tick(self, loop: str, now: float | None = None) -> None:
        self._ticks[loop] = self._clock() if now is None else now

    # ------------------------------------------------------------------ read by the endpoints
    def liveness(self) -> Verdict:
        with self._lock:
            loops = {name: (self._ticks[name], bound) for name, bound in self._bounds.items()}
        return judge_liveness(loops, self._clock())

    def readiness(self) -> Verdict:
        alive = self.liveness()
        with self._lock:
            return judge_readiness(self._config_loaded, dict(self._clusters), dict(self._cycles), alive)
