"""A real Prometheus (the Debian ``prometheus`` binary) for tests: scrape given targets, load rule files,
answer PromQL and report alerts (and send them to a real Alertmanager: harness/alertmanager.py).

    with prometheus_server({"mirrorwatch-monitor": ["127.0.0.1:9643"]}, rule_files=[rules]) as prom:
        prom.wait_for(lambda: prom.query("up") != [])
        prom.alerts()

Job names are the ones the alert rules know (docs/alerts.md). Scrape and evaluation intervals default to
1 s so alerts with a short ``for:`` (see ``write_rules_copy``) fire within seconds.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import requests
import yaml

from mirrorwatch.grafana_build import promql
from mirrorwatch.localkafka.process import free_port as free_port  # the one picker, re-exported for the rigs

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


class PromQLError(AssertionError):
    """Prometheus refused a query (e.g. a parse error); the message is Prometheus's own."""


def wait_on_server(server, name: str, predicate: Callable[[], object], timeout_s: float, what: str):
    """Poll until predicate() is truthy and return its value; stop early if the server's process (``.process``)
    exited. Raises with the last value and the end of the server's log (``.log``)."""
    deadline, value = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if server.process.poll() is not None:
            break
        time.sleep(0.25)
    raise AssertionError(
        f"{what} not reached within {timeout_s}s (last: {value!r})\n{name} log tail:\n{server.log.read_text()[-3000:]}"
    )


def write_rules_copy(
    dst: Path, for_: str | None = "5s", thresholds: dict[str, float] | None = None, src: Path = promql.RULES
) -> Path:
    """Copy the rule file with every alert's ``for:`` set to ``for_`` (a live test cannot wait 5 minutes)
    and, optionally, the trailing threshold of named alerts replaced: ``{"MirrorwatchTrueLagHigh": 10}``."""
    doc = promql.load_rules(src)
    for rule in promql.rules_of(doc, "alert"):
        if for_ is not None:
            rule["for"] = for_
        if thresholds and rule["alert"] in thresholds:
            query, ops = promql.split_condition(rule["expr"])
            if len(ops) != 1:
                raise ValueError(f"{rule['alert']} has a range condition; edit it by hand")
            rule["expr"] = f"{query} {ops[0][0]} {thresholds[rule['alert']]:g}"
    dst.write_text(yaml.safe_dump(doc, sort_keys=False))
    return dst


_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_s(text: str | int | float) -> float:
    """Seconds in a Prometheus/Alertmanager duration ("1m30s", "500ms", "0m"); a bare number is seconds."""
    if isinstance(text, int | float):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def as_duration(seconds: float) -> str:
    """A duration Prometheus accepts (integers only: "1500ms", not "1.5s")."""
    return f"{round(seconds * 1000)}ms"


def write_rules_scaled(dst: Path, factor: float, src: Path = promql.RULES) -> dict[str, float]:
    """Copy the rule file with every alert's ``for:`` (and ``keep_firing_for:``) divided by ``factor`` (their order
    kept: which alert fires first, and which stops last, decides what Alertmanager inhibits); return
    {alert: scaled for, in seconds}."""
    doc = promql.load_rules(src)
    scaled: dict[str, float] = {}
    for rule in promql.rules_of(doc, "alert"):
        scaled[rule["alert"]] = duration_s(rule.get("for", "0s")) / factor
        rule["for"] = as_duration(scaled[rule["alert"]])
        if "keep_firing_for" in rule:
            rule["keep_firing_for"] = as_duration(duration_s(rule["keep_firing_for"]) / factor)
    dst.write_text(yaml.safe_dump(doc, sort_keys=False))
    return scaled


def check_metrics(url: str) -> str:
    """``promtool check metrics`` on an exporter's live output (``http://host:port/metrics``). Returns the
    lint findings ("" when clean); the caller asserts on them, so a failure shows promtool's words."""
    text = requests.get(url, timeout=10).text
    proc = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    return (proc.stdout + proc.stderr).strip() if proc.returncode else ""


class PrometheusServer:
    def __init__(self, url: str, process: subprocess.Popen, log: Path):
        self.url, self.process, self.log = url, process, log

    def _get(self, path: str, **params) -> dict:
        body = requests.get(self.url + path, params=params, timeout=10).json()
        if body.get("status") != "success":
            raise PromQLError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """Instant query; the result list (``[{"metric": {...}, "value": [t, "v"]}, ...]``)."""
        data = self._get("/api/v1/query", query=expr)
        return data["result"] if data["resultType"] in ("vector", "matrix") else [data["result"]]

    def alerts(self) -> list[dict]:
        """Pending and firing alerts: ``[{"labels": {...}, "state": "firing", "value": ...}, ...]``."""
        return self._get("/api/v1/alerts")["alerts"]

    def firing(self, alertname: str) -> list[dict]:
        return [a for a in self.alerts() if a["labels"].get("alertname") == alertname and a["state"] == "firing"]

    def targets(self) -> list[dict]:
        return self._get("/api/v1/targets")["activeTargets"]

    def rule_groups(self) -> list[dict]:
        return self._get("/api/v1/rules")["groups"]

    def wait_for(self, predicate: Callable[[], object], timeout_s: float = 30, what: str = "condition"):
        return wait_on_server(self, "prometheus", predicate, timeout_s, what)


def _config(
    targets: dict[str, list[str]],
    rule_files,
    scrape_interval: str,
    evaluation_interval: str,
    alertmanager_url: str | None = None,
    scrape_timeout: str | None = None,
) -> dict:
    config = {
        "global": {
            "scrape_interval": scrape_interval,
            "evaluation_interval": evaluation_interval,
            "scrape_timeout": scrape_timeout or scrape_interval,
        },
        "rule_files": [str(Path(p).resolve()) for p in rule_files],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": list(hosts)}]} for job, hosts in targets.items()
        ],
    }
    if alertmanager_url:
        am = urlsplit(alertmanager_url)
        config["alerting"] = {
            "alertmanagers": [
                {
                    "api_version": "v2",
                    "scheme": am.scheme or "http",
                    "path_prefix": am.path or "/",
                    "static_configs": [{"targets": [am.netloc]}],
                }
            ]
        }
    return config


@contextmanager
def prometheus_server(
    targets: dict[str, list[str]],
    rule_files=(),
    scrape_interval: str = "1s",
    evaluation_interval: str = "1s",
    workdir: Path | None = None,
    ready_timeout_s: float = 60,
    alertmanager_url: str | None = None,
    scrape_timeout: str | None = None,
) -> Iterator[PrometheusServer]:
    """Start Prometheus on a free 127.0.0.1 port; yield a PrometheusServer; stop it on exit. The config, the
    TSDB and the log live in ``workdir`` (a temporary directory, removed afterwards, when not given). With
    ``alertmanager_url`` (e.g. ``alertmanager_server(...).url``) it sends its alerts there."""
    tmp = None if workdir else tempfile.TemporaryDirectory(prefix="mw-prometheus-")
    work = Path(workdir or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    config = work / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            _config(targets, rule_files, scrape_interval, evaluation_interval, alertmanager_url, scrape_timeout)
        )
    )
    log = work / "prometheus.log"
    port = free_port()  # a small race with other processes; a taken port shows up as a failed start
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=info",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", process, log)
    try:

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"prometheus exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                return requests.get(server.url + "/-/ready", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        server.wait_for(ready, ready_timeout_s, "prometheus ready")
        yield server
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if tmp:
            tmp.cleanup()
