"""What would have paged during the fault suite (tests/test_faults.py): a real Prometheus evaluating the SHIPPED rules
unchanged (every ``for:`` as shipped) and a real Alertmanager with the SHIPPED configuration and timings, whose
receivers all point at one local webhook, over the fault rig's exporters: both engines, the canary and the monitor.

A thread asks Prometheus every second for the alerts pending or firing and for the canary's status, and keeps each
answer with the fault under way, as MonitorWatch keeps the evaluator's."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import requests

from harness.alertmanager import alertmanager_server, notification_line
from harness.prometheus_server import PrometheusServer, prometheus_server
from harness.webhooks import WebhookReceiver
from mirrorwatch.grafana_build import promql

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_AM = ROOT / "grafana" / "alertmanager" / "alertmanager.yml"
RECEIVERS = ("mirrorwatch-page", "mirrorwatch-ticket", "mirrorwatch-null")
CANARY_CRITICAL = 2  # mirrorwatch_canary_status: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN


@dataclass(frozen=True)
class Look:
    fault: str
    alerts: tuple[str, ...]  # "<alertname> <pending|firing>" per series
    canary_status: float | None  # the worst over the canary's flows; None: no answer


class PagingWatch(threading.Thread):
    def __init__(self, base: Path, targets: dict[str, list[str]]) -> None:
        super().__init__(daemon=True, name="paging-watch")
        self.base, self.targets = base, targets
        self.fault = "start"
        self.looks: list[Look] = []
        self.hook = WebhookReceiver()
        self.prom: PrometheusServer | None = None
        self._stack = ExitStack()
        self._halt = threading.Event()
        self.notified_at: dict[str, int] = {}  # fault → notifications received by its end
        self.pages: dict[str, list[str]] = {}  # fault → the pages (critical, firing) received during it

    def begin(self) -> PagingWatch:
        receivers = dict.fromkeys(RECEIVERS, self.hook.url)
        am = self._stack.enter_context(alertmanager_server(SHIPPED_AM, receivers, workdir=self.base / "alertmanager"))
        self.prom = self._stack.enter_context(
            prometheus_server(self.targets, [promql.RULES], workdir=self.base / "prometheus", alertmanager_url=am.url)
        )
        self.start()
        return self

    def run(self) -> None:
        while not self._halt.wait(1.0):
            self.looks.append(self._look())

    def _look(self) -> Look:
        assert self.prom is not None
        try:
            alerts = tuple(
                sorted(f"{r['metric']['alertname']} {r['metric']['alertstate']}" for r in self.prom.query("ALERTS"))
            )
            canary = [float(r["value"][1]) for r in self.prom.query("mirrorwatch_canary_status")]
        except (requests.RequestException, AssertionError, ValueError):
            return Look(self.fault, (), None)
        return Look(self.fault, alerts, max(canary) if canary else None)

    def ended(self, fault: str) -> None:
        """The fault is over (the clusters in sync, every contestant caught up): what was notified by then."""
        since = max(self.notified_at.values(), default=0)
        self.notified_at[fault] = len(self.hook.bodies)
        self.pages[fault] = [
            notification_line(body) for body in self.hook.bodies[since : self.notified_at[fault]] if is_page(body)
        ]

    def during(self, fault: str) -> list[Look]:
        return [look for look in self.looks if look.fault == fault]

    def notifications(self, upto: int | None = None) -> list[str]:
        return [notification_line(body) for body in self.hook.bodies[:upto]]

    def finish(self) -> None:
        self._halt.set()
        self.join(10)
        self._stack.close()
        self.hook.close()


def is_page(body: dict) -> bool:
    """A notification that wakes someone: a critical alert firing (warnings are tickets)."""
    return any(a["status"] == "firing" and a["labels"].get("severity") == "critical" for a in body.get("alerts", []))
