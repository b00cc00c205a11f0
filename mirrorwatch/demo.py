"""The demo: two local Kafka clusters (east → west) and every mirrorwatch service, with traffic.

Started by ``scripts/demo`` (which does the set-up first). It writes one config file, then runs the mirror
engine (with heartbeats), the canary service (fast interval), the monitor service (exporter, HTTP API,
history) and the Streamlit page as child processes, plus a traffic generator (steady rate with periodic
bursts) in this process. Ctrl-C stops everything it started; a second run reuses the clusters' data.
"""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
import yaml
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # imported, not re-exported, there

from .core.cli import UserError, run_click
from .core.clients import make_admin, make_producer
from .core.config import ClusterConfig
from .localkafka import LauncherError, LocalClusters, cache_dir
from .localkafka.process import port_in_use

SAMPLE_TOPICS = {"orders": 6, "payments": 3}
BIN = Path(sys.executable).parent


def _cluster(bootstrap: str) -> ClusterConfig:
    return ClusterConfig.model_validate({"bootstrap.servers": bootstrap})


def create_sample_topics(bootstrap: str) -> None:
    admin = make_admin(_cluster(bootstrap), "mirrorwatch-demo")
    existing = admin.list_topics(timeout=10).topics
    wanted = [NewTopic(name, parts, 1) for name, parts in SAMPLE_TOPICS.items() if name not in existing]
    for future in admin.create_topics(wanted).values() if wanted else ():
        future.result(30)


def port(preferred: int) -> int:
    """The usual port when it is free (stable URLs), else any free one."""
    if not port_in_use(preferred):
        return preferred
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free: int = s.getsockname()[1]  # (host, port)
        return free


def demo_config(east: str, west: str, base: Path, ports: dict[str, int]) -> dict[str, Any]:
    config = {
        "clusters": {"east": {"bootstrap.servers": east}, "west": {"bootstrap.servers": west}},
        "flows": {"east-west": {"source": "east", "target": "west", "topics": list(SAMPLE_TOPICS)}},
        "mirror": {"commit_interval_s": 5, "refresh_interval_s": 5, "metrics_port": ports["mirror"]},
        "canary": {
            "interval_s": 2,
            "warn_latency_s": 2,
            "crit_latency_s": 10,
            "heartbeat_max_age_s": 15,
            "metrics_port": ports["canary"],
        },
        # the History view fills itself: a history file closes every minute, the Spark job runs every 2 minutes
        "monitor": {
            "interval_s": 2,
            "window": 10,
            "history_dir": str(base / "history"),
            "history_roll_s": 60,
            "metrics_port": ports["monitor"],
            "http_port": ports["api"],
            "analytics": {
                "every_s": 120,
                "master": "local[1]",
                "out": str(base / "analytics"),
                "slo_lag": 1000,
                "slo_time_s": 5,
            },
        },
    }
    if _has("mirrorwatch.dashboards.settings"):
        config["dashboard"] = {
            "port": ports["dashboard"],
            "analytics_dir": str(base / "analytics"),
            "monitor_url": f"http://127.0.0.1:{ports['api']}",
            "canary_url": f"http://127.0.0.1:{ports['canary']}/metrics",
        }
    return config


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class Traffic(threading.Thread):
    """A steady stream to the sample topics with a burst every ``burst_every_s`` (to watch lag move)."""

    def __init__(self, bootstrap: str, rate: int, burst: int, burst_every_s: float):
        super().__init__(name="traffic", daemon=True)
        # through core.clients: the client library's own log lines stay out of the demo's banner (-v shows them)
        self.producer = make_producer(
            _cluster(bootstrap), "mirrorwatch-demo-traffic", **{"linger.ms": 20, "acks": "all"}
        )
        self.rate, self.burst, self.burst_every_s = rate, burst, burst_every_s
        self.stop_event = threading.Event()
        self.sent = 0

    def run(self) -> None:
        topics = list(SAMPLE_TOPICS)
        next_burst = time.monotonic() + self.burst_every_s
        while not self.stop_event.is_set():
            tick = time.monotonic()
            count = self.rate // 10
            if tick >= next_burst:
                count += self.burst
                next_burst = tick + self.burst_every_s
            for _ in range(count):
                self.sent += 1
                try:
                    self.producer.produce(
                        topics[self.sent % len(topics)],
                        key=f"customer-{self.sent % 997}".encode(),
                        value=f'{{"n": {self.sent}, "ts": {time.time():.3f}}}'.encode(),
                    )
                except BufferError:  # east is away: drop demo traffic rather than block the demo
                    break
            self.producer.poll(0)
            self.stop_event.wait(max(0.0, 0.1 - (time.monotonic() - tick)))
        self.producer.flush(5)


class Services:
    def __init__(self, logs: Path):
        self.logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "ab")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self.procs[name]

    def check(self) -> list[str]:
        return [
            f"{n} exited with {p.returncode} (log: {self.logs / (n + '.log')})"
            for n, p in self.procs.items()
            if p.poll() is not None
        ]

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


@click.command(help="Run the mirrorwatch demo on two local Kafka clusters (east → west).")
@click.option(
    "--dir", "base_dir", default=None, type=click.Path(file_okay=False), help="demo state (default .cache/demo)"
)
@click.option("--rate", default=200, show_default=True, help="records/s of steady traffic")
@click.option("--burst", default=20_000, show_default=True, help="records in each burst")
@click.option("--burst-every", default=90.0, show_default=True, help="seconds between bursts")
@click.option("--for", "run_for", default=0.0, help="stop by itself after this many seconds (0 = until Ctrl-C)")
def cli(base_dir: str | None, rate: int, burst: int, burst_every: float, run_for: float) -> None:
    base = Path(base_dir) if base_dir else cache_dir() / "demo"
    (base / "logs").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    clusters = LocalClusters(["east", "west"], base / "clusters")
    try:
        clusters.start()
    except LauncherError as exc:
        raise UserError(str(exc), 1) from None
    east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
    create_sample_topics(east)
    ports = {
        "mirror": port(9641),
        "canary": port(9642),
        "monitor": port(9643),
        "api": port(9644),
        "dashboard": port(8501),
    }
    config_path = base / "mirrorwatch.yaml"
    config_path.write_text(yaml.safe_dump(demo_config(east, west, base, ports), sort_keys=False))
    services = Services(base / "logs")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    traffic = Traffic(east, rate, burst, burst_every)
    try:
        mirror = services.start("mirror", [str(BIN / "mirror"), "run", "--config", str(config_path)])
        services.start("monitor", [str(BIN / "monitor"), "run", "--config", str(config_path)])
        if _has("mirrorwatch.canary.cli"):
            services.start("canary", [str(BIN / "canary"), "run", "--config", str(config_path)])
        if _has("mirrorwatch.dashboards.cli"):
            services.start(
                "dashboard",
                [str(BIN / "monitor"), "dashboard", "--config", str(config_path), "--port", str(ports["dashboard"])],
            )
        traffic.start()
        print(f"\nmirrorwatch demo up in {time.monotonic() - started:.1f} s   (config: {config_path})")
        print(f"  Kafka east   bootstrap.servers={east}   (log {clusters['east'].log_path})")
        print(f"  Kafka west   bootstrap.servers={west}   (log {clusters['west'].log_path})")
        print(
            f"  traffic      {rate}/s to {', '.join(SAMPLE_TOPICS)} on east, bursts of {burst} every {burst_every:.0f} s"
        )
        print(f"  mirror       east → west, metrics http://127.0.0.1:{ports['mirror']}/metrics")
        print(
            f"  monitor      status API http://127.0.0.1:{ports['api']}/v1/flows , metrics http://127.0.0.1:{ports['monitor']}/metrics"
        )
        if "canary" in services.procs:
            print(
                f"  canary       every 2 s, metrics http://127.0.0.1:{ports['canary']}/metrics ; "
                f"on-call check: .venv/bin/canary check --config {config_path}"
            )
        if "dashboard" in services.procs:
            print(f"  status page  http://127.0.0.1:{ports['dashboard']}/")
        print(f"  lag table    .venv/bin/monitor lag --config {config_path}")
        print(
            f"  analytics    .venv/bin/monitor analyze --history {base / 'history'} --out {base / 'analytics'}  (the monitor runs it every 2 min)"
        )
        print(f"  logs         {base / 'logs'}")
        print(
            f"Break it on purpose: kill -STOP {mirror.pid}  (freeze the mirror: lag grows, canary goes CRITICAL);"
            f" kill -CONT {mirror.pid} to recover."
        )
        print("Press Ctrl-C to stop everything the demo started.\n", flush=True)
        deadline = time.monotonic() + run_for if run_for else None
        while not stop.wait(2):
            for problem in services.check():
                print(f"demo: {problem}", file=sys.stderr)
                services.procs = {n: p for n, p in services.procs.items() if p.poll() is None}
            if deadline and time.monotonic() >= deadline:
                break
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping ...", file=sys.stderr)
        # our own producer first (it flushes while the brokers are still there), then the services, then the brokers
        traffic.stop_event.set()
        if traffic.is_alive():
            traffic.join(10)
        services.stop()
        clusters.stop()


main = run_click(cli, "demo")

if __name__ == "__main__":
    main()
