"""The running monitor (``monitor run``) watching the fault suite's flows: its status API read every second from a
thread, each answer kept with the fault under way when it came (tests/support/fault_rig.py)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import requests
import yaml

from harness.mirror_harness import BIN
from harness.prometheus_server import free_port
from harness.services import Service

from .lag_floor import Reported


@dataclass(frozen=True)
class Seen:
    fault: str
    flow: str
    status: str  # the evaluator's flow status, or "no answer"
    reasons: tuple[str, ...]
    ts_ms: int = 0  # the sample's time (the monitor's)
    true_lags: tuple[tuple[int, int], ...] = ()  # (partition, true lag) where the monitor gave one


class MonitorWatch(threading.Thread):
    def __init__(
        self,
        base: Path,
        clusters: dict[str, dict[str, str]],
        flows: dict[str, dict[str, object]],
        metrics_port: int | None = None,
    ) -> None:
        super().__init__(daemon=True, name="monitor-watch")
        self.port = free_port()
        config = {
            "clusters": clusters,
            "flows": flows,
            # the shipped sampling (every 5 s, a window of 10): the evaluator judged as a user's would
            "monitor": {"history": False, "metrics_port": metrics_port, "http_port": self.port},
        }
        self.config_path = base / "monitor.yaml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.flows = list(flows)
        self.fault = "start"
        self.seen: list[Seen] = []
        self.service: Service | None = None
        self._halt = threading.Event()

    def begin(self) -> MonitorWatch:
        # faulthandler: a crash inside librdkafka leaves the Python stacks of every thread in the log
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        argv = [str(BIN / "monitor"), "run", "--config", str(self.config_path)]
        self.service = Service("monitor", argv, self.config_path.parent, env=env)
        self.start()
        return self

    def run(self) -> None:
        while not self._halt.wait(1.0):
            for flow in self.flows:
                self.seen.append(self._ask(flow))

    def _ask(self, flow: str) -> Seen:
        try:
            body = requests.get(f"http://127.0.0.1:{self.port}/v1/flows/{flow}", timeout=2).json()
        except (requests.RequestException, ValueError):
            return Seen(self.fault, flow, "no answer", ())
        view = body.get("flow") or {}
        lags = tuple(
            (int(row["partition"]), int(row["true_lag"]))
            for row in view.get("partitions") or ()
            if row.get("true_lag") is not None
        )
        status, reasons = str(view.get("status", "no answer")), tuple(view.get("reasons") or ())
        return Seen(self.fault, flow, status, reasons, int(view.get("ts_ms") or 0), lags)

    def reported(self, flow: str) -> list[Reported]:
        """Each sample's true lag per partition, once each (the API answers the same sample until the next)."""
        out = {
            (s.ts_ms, partition): Reported(s.ts_ms, partition, lag)
            for s in self.seen
            if s.flow == flow and s.ts_ms
            for partition, lag in s.true_lags
        }
        return sorted(out.values(), key=lambda r: (r.ts_ms, r.partition))

    def during(self, fault: str) -> list[Seen]:
        return [s for s in self.seen if s.fault == fault]

    def finish(self) -> None:
        self._halt.set()
        self.join(10)
        if self.service is not None:
            self.service.stop()

    def alive(self) -> bool:
        return self.service is not None and self.service.alive()

    def exit_said(self) -> str:
        """How the monitor ended, with the end of its log (a crash's thread stacks among it)."""
        if self.service is None:
            return "not started"
        return f"exit code {self.service.proc.returncode}:\n{self.service.log_tail()}"

    def wait_answering(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"monitor exited:\n{self.service.log_tail() if self.service else ''}")
            recent = [s for s in self.seen[-len(self.flows) * 3 :] if s.status != "no answer"]
            if {s.flow for s in recent} == set(self.flows):
                return
            time.sleep(0.5)
        raise AssertionError(f"the monitor did not answer for every flow within {timeout_s:.0f} s")
