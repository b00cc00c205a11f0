"""bench/detection.py's stacks and faults: the demo-like engine stack, the MM2-in-Connect stack, and the watch that
injects one fault, holds it, undoes it and tells what reached the webhook receiver."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import yaml
from confluent_kafka import Producer

from harness.alertmanager import alertmanager_server
from harness.mirror_harness import BIN
from harness.prometheus_server import prometheus_server
from harness.services import Service
from harness.webhooks import WebhookReceiver
from mirrorwatch.demo import Traffic, create_sample_topics, demo_config
from mirrorwatch.grafana_build import promql
from mirrorwatch.localkafka.launcher import free_port

from .common import fresh_clusters
from .detection_floor import duration_s

# retention last: under mirror.on_records_lost: stop (the default) it ends with the mirror stopped for an operator
ENGINE_FAULTS = ["mirror-stop", "mirror-kill", "target-stop", "source-stop", "canary-topic", "retention"]
MM2_FAULTS = ["mm2-kill", "mm2-pause"]
RECEIVERS = ("mirrorwatch-page", "mirrorwatch-ticket", "mirrorwatch-null")
NOTIFYING = ("mirrorwatch-page", "mirrorwatch-ticket")
SYSTEMD_UNIT = Path(__file__).resolve().parents[1] / "deploy" / "systemd" / "mirrorwatch-mirror@.service"


def restart_sec() -> float:
    """RestartSec of the shipped mirror unit: how long systemd waits before it restarts a killed mirror."""
    for line in SYSTEMD_UNIT.read_text().splitlines():
        if line.startswith("RestartSec="):
            return duration_s(line.split("=", 1)[1].strip() + ("s" if line.strip()[-1].isdigit() else ""))
    return 0.1  # systemd's default


def metrics_answer(port: int) -> bool:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).status == 200
    except OSError:
        return False


class _Stack(contextlib.ExitStack):
    """Prometheus (the example's intervals) + Alertmanager (the shipped config) + the webhook receiver."""

    jobs: dict[str, int]
    monitor_s: float
    canary_s: float

    def __init__(self, prometheus_example: dict, alertmanager: Path):
        super().__init__()
        self.example, self.alertmanager = prometheus_example, alertmanager

    def alerting(self, prometheus_example: dict, alertmanager: Path, base: Path) -> None:
        glob = prometheus_example.get("global", {})
        self.hook = WebhookReceiver()
        self.callback(self.hook.close)
        self.am = self.enter_context(
            alertmanager_server(alertmanager, {r: self.hook.url for r in RECEIVERS}, workdir=base / "alertmanager")
        )
        self.am_config = yaml.safe_load(alertmanager.read_text())
        self.evaluation_s = duration_s(glob.get("evaluation_interval", "1m"))
        self.prom = self.enter_context(
            prometheus_server(
                {job: [f"127.0.0.1:{port}"] for job, port in self.jobs.items()},
                [promql.RULES],
                scrape_interval=glob.get("scrape_interval", "1m"),
                evaluation_interval=glob.get("evaluation_interval", "1m"),
                scrape_timeout=glob.get("scrape_timeout"),
                workdir=base / "prometheus",
                alertmanager_url=self.am.url,
            )
        )


class EngineStack(_Stack):
    """Fresh clusters and the demo's stack (our engine), history and Spark off (not what is measured here)."""

    def __enter__(self) -> EngineStack:
        super().__enter__()
        try:
            self.base = Path(tempfile.mkdtemp(prefix="mw-detection-"))
            self.clusters = fresh_clusters()
            self.callback(self.clusters.stop)
            self.east, self.west = self.clusters["east"].bootstrap, self.clusters["west"].bootstrap
            create_sample_topics(self.east)
            ports = {n: free_port() for n in ("mirror", "canary", "monitor", "api", "dashboard")}
            config = demo_config(self.east, self.west, self.base, ports)
            config.pop("dashboard", None)
            for key in ("history_dir", "history_roll_s", "analytics"):
                config["monitor"].pop(key, None)
            config["monitor"]["history"] = False
            self.config, self.config_path = config, self.base / "mirrorwatch.yaml"
            self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
            self.monitor_s, self.canary_s = (
                float(config["monitor"]["interval_s"]),
                float(config["canary"]["interval_s"]),
            )
            self.jobs = {f"mirrorwatch-{n}": ports[n] for n in ("mirror", "canary", "monitor")}
            self.services = {n: self.service(n) for n in ("mirror", "monitor", "canary")}
            self.traffic = Traffic(self.east, 200, 20_000, 90.0)  # the demo's defaults
            self.traffic.start()
            self.callback(self._stop_services)
            self.alerting(self.example, self.alertmanager, self.base)
            return self
        except BaseException:
            self.close()
            raise

    def service(self, name: str, config_path: Path | None = None) -> Service:
        return Service(name, [str(BIN / name), "run", "--config", str(config_path or self.config_path)], self.base)

    def restart_exited(self) -> str:
        """Start again any service that exited during a fault (as systemd would); say which, with its exit code."""
        said = []
        for name, service in list(self.services.items()):
            if not service.alive():
                said.append(f"{name} had exited with {service.proc.returncode}: restarted.")
                service.stop()
                self.services[name] = self.service(name)
        return " ".join(said)

    def _stop_services(self) -> None:
        self.traffic.stop_event.set()
        self.traffic.join(10)
        for service in self.services.values():
            if service.alive():
                os.kill(service.proc.pid, signal.SIGCONT)
            service.stop()

    def broker_pid(self, name: str) -> int:
        return self.clusters[name].proc.pid


class Mm2Stack(_Stack):
    """Fresh clusters, MirrorMaker 2 in a real Connect worker (harness/connect_mm2.py), canary and monitor."""

    def __enter__(self) -> Mm2Stack:
        from harness.connect_mm2 import SOURCE_CONNECTOR, start_connect_mm2

        super().__enter__()
        try:
            self.base = Path(tempfile.mkdtemp(prefix="mw-detection-mm2-"))
            self.clusters = fresh_clusters()
            self.callback(self.clusters.stop)
            pair = [
                SimpleNamespace(bootstrap=c.bootstrap, config=lambda c=c: {"bootstrap.servers": c.bootstrap})
                for c in (self.clusters["east"], self.clusters["west"])
            ]
            self.env = start_connect_mm2(pair[0], pair[1], self.base)
            self.callback(lambda: self.env.worker.kill())
            self.source_connector = SOURCE_CONNECTOR
            config = self.env.config_dict
            ports = {n: free_port() for n in ("canary", "monitor", "api")}
            # the demo's intervals, as for the engine's stack
            config["canary"].update(interval_s=2, warn_latency_s=2, crit_latency_s=10, heartbeat_max_age_s=15)
            config["canary"]["metrics_port"] = ports["canary"]
            config["monitor"].update(interval_s=2, metrics_port=ports["monitor"], http_port=ports["api"])
            self.config_path = self.base / "mirrorwatch.yaml"
            self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
            self.monitor_s, self.canary_s = 2.0, 2.0
            self.jobs = {"mirrorwatch-canary": ports["canary"], "mirrorwatch-monitor": ports["monitor"]}
            self.services = {
                n: Service(n, [str(BIN / n), "run", "--config", str(self.config_path)], self.base)
                for n in ("monitor", "canary")
            }
            self.traffic = SteadyTraffic(pair[0].bootstrap, self.env.lag_topic, 200)
            self.callback(self._stop_services)
            self.alerting(self.example, self.alertmanager, self.base)
            return self
        except BaseException:
            self.close()
            raise

    def _stop_services(self) -> None:
        self.traffic.stop()
        for service in self.services.values():
            service.stop()


class SteadyTraffic(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, rate: int):
        super().__init__(daemon=True)
        self.producer, self.topic, self.rate = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20}), topic, rate
        self.stop_event = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stop_event.wait(0.1):
            for i in range(self.rate // 10):
                with contextlib.suppress(BufferError):
                    self.producer.produce(self.topic, value=b"x" * 100, key=str(i).encode())
            self.producer.poll(0)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(10)
        self.producer.flush(5)
