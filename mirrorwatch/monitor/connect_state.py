"""The state of an MM2 flow's connectors and tasks, polled from its Connect REST API off the sampling path.

A thread per flow with ``flows.X.mirror.connect`` asks ``GET /connectors/{name}/status`` for the source,
checkpoint and heartbeat connectors every ``monitor.interval_s`` (at least 1 s), each request bounded by
``connect.timeout_s``. The sampler only reads the newest answer (:meth:`ConnectStateWatch.latest`), so a slow or
dead REST API never delays lag sampling: its figures simply age, and an answer older than ``STALE_AFTER`` polls
(plus the timeouts) counts as UNKNOWN ("no answer for N s").
"""

from __future__ import annotations

import logging
import threading
import time

from ..core.config import Config, FlowConfig
from ..core.connect_rest import ConnectorState, ConnectRestClient, ConnectStates, unknown

log = logging.getLogger("mirrorwatch.monitor.connect")
STALE_AFTER = 3  # polls


def connector_names(flow: FlowConfig) -> list[tuple[str, str]]:
    """(role, name) of the flow's three MM2 connectors, as configured."""
    m = flow.mirror
    assert m is not None
    return [("source", m.connector), ("checkpoint", m.checkpoint_connector), ("heartbeat", m.heartbeat_connector)]


class ConnectStateWatch:
    def __init__(self, name: str, flow: FlowConfig, interval_s: float):
        assert flow.mirror is not None and flow.mirror.connect is not None
        self.flow_name = name
        self.settings = flow.mirror.connect
        self.names = connector_names(flow)
        self.interval_s = max(1.0, interval_s)
        self.client = ConnectRestClient(self.settings)
        self._latest: ConnectStates | None = None
        self._said: tuple[str, ...] = ()
        self.first = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"connect-state-{self.flow_name}", daemon=True)
            self._thread.start()

    def poll(self) -> ConnectStates:
        states = tuple(self.client.status(name, role) for role, name in self.names)
        result = ConnectStates(int(time.time() * 1000), states)
        self._latest = result
        said = tuple(c.error for c in states if c.error)
        if said != self._said:  # one log line per change, not per poll
            if said:
                log.warning("flow %s: Connect REST API: %s", self.flow_name, said[0])
            else:
                log.info("flow %s: Connect REST API answers again", self.flow_name)
            self._said = said
        return result

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll()
            except Exception as exc:  # never lose the thread to a surprise
                log.warning("flow %s: Connect state poll failed: %s", self.flow_name, type(exc).__name__)
            self.first.set()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))

    def latest(self, now_ms: int | None = None) -> ConnectStates:
        """The newest poll; UNKNOWN for every connector before the first or when the newest is stale."""
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        got = self._latest
        limit_ms = int(1000 * STALE_AFTER * (self.interval_s + len(self.names) * self.settings.timeout_s))
        if got is None:
            return ConnectStates(now_ms, self._unknown("not polled yet"))
        if now_ms - got.ts_ms > limit_ms:
            return ConnectStates(got.ts_ms, self._unknown(f"no answer for {(now_ms - got.ts_ms) / 1000:.0f} s"))
        return got

    def _unknown(self, reason: str) -> tuple[ConnectorState, ...]:
        return tuple(unknown(name, role, reason) for role, name in self.names)

    def close(self) -> None:
        self._stop.set()
        self.client.close()


def connect_watches(config: Config) -> dict[str, ConnectStateWatch]:
    return {
        name: ConnectStateWatch(name, flow, config.monitor.interval_s)
        for name, flow in config.flows.items()
        if flow.mirror is not None and flow.mirror.connect is not None
    }
