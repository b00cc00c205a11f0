"""The real stack for grafana/'s live tests: `mirror run`, `canary run` and `monitor run` as processes on the two
real local clusters, with steady traffic, for a real Prometheus to scrape (tests/test_alerting_live.py runs it
with the shipped rules and a real Alertmanager, and checks there, on the same stack:

``promtool check metrics`` on each live exporter, and every PromQL expression of grafana/ parsing and returning
series, except those in ``NO_SERIES_WHEN_HEALTHY`` with the reason and what checks them instead).
"""

from __future__ import annotations

import subprocess
import threading
import uuid
from pathlib import Path

from harness.helpers import create_topic, produce_numbered
from harness.mirror_harness import BIN, MirrorProcess, fast_mirror_settings
from harness.prometheus_server import free_port
from harness.services import Service
from mirrorwatch.grafana_build import promql

from .mirror_flows import consume_and_commit

FLOW = "east-west"
PARTITIONS = 3
RATE = 50  # records/s produced to the flow's topic for the whole module
TRUE_LAG_THRESHOLD = 500  # records, ~10 s of traffic: healthy() wants the true lag below half of it
JOBS = ("mirrorwatch-mirror", "mirrorwatch-canary", "mirrorwatch-monitor")

# Alert expressions are `<query> <op> <number>`: they return series only while the condition holds, which on a
# healthy stack it does not (that is the point). For these the query part (split_condition) must return
# series. Listed by name, not derived, so a new alert is a conscious addition here.
ALERT_RULES = {
    "MirrorwatchTrueLagHigh",
    "MirrorwatchEvaluatorError",
    "MirrorwatchCanaryCritical",
    "MirrorwatchCanaryUnknown",
    "MirrorwatchCanaryLostEvents",
    "MirrorwatchHeartbeatStale",
    "MirrorwatchMonitorSampleStale",
    "MirrorwatchClusterUnreachable",
    "MirrorwatchExporterDown",
    "MirrorwatchExporterReplicaDown",
    "MirrorwatchRpoHigh",
    "MirrorwatchRecordsLost",
    "MirrorwatchMirrorRecordsLost",
    "MirrorwatchTranslationCoverageLow",
    "MirrorwatchHangingTransaction",
    "MirrorwatchMm2ConnectorFailed",
    "MirrorwatchMm2ConnectorPaused",
    "MirrorwatchMm2ConnectUnreachable",
    "MirrorwatchFlowInTrouble",
    "MirrorwatchFlowClusterUnreachable",
    "MirrorwatchServiceWedged",
}
# where -> (exporter, metric family it must declare instead, reason): healthy-state exceptions to "returns series".
# (The mirror exports its produce-error counters as 0 for every mirrored topic from the start, so the 'Produce
# errors/s' panel that used to need an exception returns series like every other expression.)
_CONNECT_ONLY = "only an MM2 flow with mirror.connect exports it; this stack runs mirrorwatch's engine. "
_CONNECT_CHECKED = "tests/test_mm2_connect_state.py fires it on a real Prometheus against a real Connect worker"
NO_SERIES_WHEN_HEALTHY: dict[str, tuple[str, str, str]] = {
    where.format(alert): ("monitor", family, _CONNECT_ONLY + _CONNECT_CHECKED)
    for alert, family in (
        ("MirrorwatchMm2ConnectorFailed", "mirrorwatch_mm2_task_state"),
        ("MirrorwatchMm2ConnectorPaused", "mirrorwatch_mm2_connector_state"),
        ("MirrorwatchMm2ConnectUnreachable", "mirrorwatch_mm2_connect_up"),
    )
    for where in ("rule {}", "grafana alert {} A")  # the rule file's and the Grafana-managed rule's query
}
# only a transactional flow's target is watched for hanging transactions; this stack's flow is at-least-once
NO_SERIES_WHEN_HEALTHY.update(
    {
        where.format("MirrorwatchHangingTransaction"): (
            "monitor",
            "mirrorwatch_hanging_transactions",
            "only a flow whose target is transactional exports it; this stack's flow is at-least-once. "
            "tests/test_transactional_target.py checks it on the real brokers, "
            "grafana/prometheus/tests/transactions.yml the rule with promtool",
        )
        for where in ("rule {}", "grafana alert {} A")
    }
)
NO_SERIES_WHEN_HEALTHY[
    "mirrorwatch-flows.json: panel 'Oldest open transaction on the target (transactional flows)' A"
] = (
    "monitor",
    "mirrorwatch_open_transaction_seconds",
    "only a flow whose target is transactional exports it; this stack's flow is at-least-once. "
    "tests/test_transactional_target.py checks its value on the real brokers",
)
# FlowInTrouble's MM2 signal: 0 or 1 per MM2 flow from the same connector series, none on this stack
NO_SERIES_WHEN_HEALTHY["rule flow:mirrorwatch_mm2_source_failed:bool"] = (
    "monitor",
    "mirrorwatch_mm2_task_state",
    _CONNECT_ONLY + "grafana/prometheus/tests/incidents.yml checks it with promtool",
)


class Traffic:
    """About RATE records/s to the flow's topic from a thread, until stopped."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.sent = topic, 0
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop_event.wait(0.1):
            for _ in range(RATE // 10):
                self.producer.produce(
                    self.topic, key=f"k{self.sent}".encode(), value=b"x" * 100, partition=self.sent % PARTITIONS
                )
                self.sent += 1
            self.producer.poll(0)
        self.producer.flush(30)

    def start(self) -> Traffic:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(40)
        self.producer = None  # let librdkafka's client go now, not when the clusters are already down


class Stack:
    def __init__(self, source, target, base: Path):
        self.base, self.source = base, source
        self.topic = f"t-grafana-{uuid.uuid4().hex[:8]}"
        self.ports = {"mirror": free_port(), "canary": free_port(), "monitor": free_port()}
        self.config = {
            "clusters": {"east": source.config(), "west": target.config()},
            "flows": {
                FLOW: {
                    "source": "east",
                    "target": "west",
                    "topics": [self.topic],
                    "group": f"mw-{self.topic}",
                    # one application group, so the engine checkpoints it and the monitor exports translation
                    # coverage and checkpoint age (their panels must return series too)
                    "checkpoint_groups": [f"app-{self.topic}"],
                }
            },
            "mirror": fast_mirror_settings(
                metrics_port=self.ports["mirror"], heartbeats_topic=f"hb.{self.topic}", offset_sync_every=50
            ),
            "canary": {
                "topic": f"mw.canary.{self.topic}",
                "interval_s": 1,
                "warn_latency_s": 2,
                "crit_latency_s": 5,
                "heartbeat_max_age_s": 10,
                "metrics_port": self.ports["canary"],
            },
            "monitor": {
                "interval_s": 1,
                "window": 5,
                "history": False,
                "metrics_port": self.ports["monitor"],
                "http_port": free_port(),
            },
        }
        self.config_path = base / "mirrorwatch.yaml"
        self.mirror: MirrorProcess | None = None
        self.services: list[Service] = []
        self.traffic: Traffic | None = None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}/metrics"

    def targets(self) -> dict[str, list[str]]:
        return {f"mirrorwatch-{name}": [f"127.0.0.1:{port}"] for name, port in self.ports.items()}

    def start(self) -> Stack:
        create_topic(self.source.bootstrap, self.topic, PARTITIONS)
        produce_numbered(self.source.bootstrap, self.topic, 600, PARTITIONS)
        app = f"app-{self.topic}"  # an application group that committed on the source: the engine checkpoints it
        # committed by a consumer: a group that only AlterConsumerGroupOffsets created is not listed by
        # ListGroups on these 4.4 brokers, so no tool would find it
        for p in range(PARTITIONS):
            consume_and_commit(self.source.bootstrap, self.topic, app, p, 10)
        self.mirror = MirrorProcess(self.config, self.config_path).start()  # also writes the config file
        for name in ("monitor", "canary"):
            self.services.append(Service(name, [str(BIN / name), "run", "--config", str(self.config_path)], self.base))
        self.traffic = Traffic(self.source.bootstrap, self.topic).start()
        return self

    def check_alive(self, mirror_too: bool = True) -> None:
        for service in self.services:
            assert service.alive(), f"{service.name} exited:\n{service.log_tail()}"
        if mirror_too:
            assert self.mirror.running(), f"mirror exited:\n{self.mirror.log_text()[-3000:]}"

    def stop(self) -> None:
        if self.traffic:
            self.traffic.stop()
        for service in reversed(self.services):
            service.stop()
        if self.mirror:
            try:
                self.mirror.terminate(20)
            except subprocess.TimeoutExpired:
                self.mirror.kill()


def values(prom, expr: str) -> dict[str, float]:
    """{flow or job: value} of an instant query."""
    return {r["metric"].get("flow", r["metric"].get("job", "")): float(r["value"][1]) for r in prom.query(expr)}


def firing_names(prom) -> set[str]:
    return {a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"}


def healthy(prom) -> bool:
    up = values(prom, 'up{job=~"mirrorwatch-.*"}')
    return (
        all(up.get(job) == 1 for job in JOBS)
        and values(prom, "mirrorwatch_canary_status").get(FLOW) == 0
        and values(prom, "flow_group:mirrorwatch_group_status:max").get(FLOW) == 0
        and values(prom, "flow:mirrorwatch_true_lag_records:sum").get(FLOW, float("inf")) < TRUE_LAG_THRESHOLD / 2
        and not {"MirrorwatchTrueLagHigh", "MirrorwatchCanaryCritical"} & firing_names(prom)
    )


def checked_expression(where: str, expr: str) -> str | None:
    """The expression whose result must be non-empty on a healthy stack; None for NO_SERIES_WHEN_HEALTHY."""
    if where in NO_SERIES_WHEN_HEALTHY:
        return None
    if where.startswith("rule ") and where.removeprefix("rule ") in ALERT_RULES:
        return promql.split_condition(expr)[0]
    return expr
