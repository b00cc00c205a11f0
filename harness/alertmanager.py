"""A real Alertmanager (the Debian ``prometheus-alertmanager`` binary) for tests and benches: load a config (the
shipped grafana/alertmanager/alertmanager.yml or a dict) with its receivers pointed at local webhooks, and answer
its v2 API.

    hook = WebhookReceiver()
    with alertmanager_server(SHIPPED, receivers={"mirrorwatch-page": hook.url}) as am:
        with prometheus_server(targets, rule_files=[rules], alertmanager_url=am.url) as prom:
            ...
            am.alerts()

Only the receivers' URLs (and, when asked, the route tree's group timings) are changed; routes and inhibit rules
stay as written, so a test exercises the file that ships. Clustering is off (``--cluster.listen-address=``):
a single Alertmanager needs no gossip, and it would otherwise hold a fixed port (9094) and wait to settle.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import requests
import yaml

from .prometheus_server import free_port, wait_on_server
from .services import die_with_test

ALERTMANAGER = (
    shutil.which("prometheus-alertmanager") or shutil.which("alertmanager") or "/usr/bin/prometheus-alertmanager"
)
AMTOOL = shutil.which("amtool") or "/usr/bin/amtool"
TIMING_KEYS = ("group_wait", "group_interval", "repeat_interval")


def point_receivers(config: dict, receivers: Mapping[str, str]) -> dict:
    """A copy of ``config`` whose named receivers send to the given webhook URLs. A receiver's existing webhook
    settings (send_resolved, max_alerts, ...) are kept and only its URL changes; a receiver with no webhook (a
    null receiver) gets one, so a test can see what would have been dropped. Unknown names are an error: a
    typo would otherwise silently test nothing."""
    doc = copy.deepcopy(config)
    by_name = {r["name"]: r for r in doc.get("receivers", [])}
    unknown = sorted(set(receivers) - set(by_name))
    if unknown:
        raise ValueError(f"no receiver named {', '.join(unknown)} in the config (it has: {', '.join(sorted(by_name))})")
    for name, url in receivers.items():
        hooks = by_name[name].setdefault("webhook_configs", [])
        if not hooks:
            hooks.append({"send_resolved": True})
        for hook in hooks:
            hook.pop("url_file", None)
            hook["url"] = url
    return doc


def set_route_timings(config: dict, timings: Mapping[str, str]) -> dict:
    """A copy of ``config`` with group_wait/group_interval/repeat_interval set on the top route and on every
    child route that sets its own (children that inherit keep inheriting)."""
    bad = sorted(set(timings) - set(TIMING_KEYS))
    if bad:
        raise ValueError(f"not a route timing: {', '.join(bad)} (known: {', '.join(TIMING_KEYS)})")
    doc = copy.deepcopy(config)

    def visit(route: dict, top: bool) -> None:
        for key, value in timings.items():
            if top or key in route:
                route[key] = value
        for child in route.get("routes", []) or []:
            visit(child, False)

    visit(doc.setdefault("route", {}), True)
    return doc


def check_config(path: Path) -> str:
    """``amtool check-config`` on a file: its findings ("" when the file is valid)."""
    proc = subprocess.run([AMTOOL, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    return "" if proc.returncode == 0 else (proc.stdout + proc.stderr).strip()


class AlertmanagerServer:
    def __init__(self, url: str, process: subprocess.Popen, log: Path, config: dict):
        self.url, self.process, self.log, self.config = url, process, log, config

    def alerts(self, **filters) -> list[dict]:
        """GET /api/v2/alerts: the alerts it holds, each with ``labels``, ``annotations``, ``status`` (``state``:
        active, suppressed or unprocessed; ``inhibitedBy``, ``silencedBy``). Filters as the API's query parameters,
        e.g. ``active=False``, ``inhibited=True``, ``filter=['alertname="X"']``."""
        params = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in filters.items()}
        resp = requests.get(self.url + "/api/v2/alerts", params=params, timeout=10)
        resp.raise_for_status()
        return resp.json()

    def post_alerts(self, alerts: list[dict]) -> None:
        """POST /api/v2/alerts: ``[{"labels": {...}, "annotations": {...}, "startsAt": ..., "endsAt": ...}]``
        (as Prometheus sends them; timestamps RFC 3339, endsAt in the past resolves)."""
        resp = requests.post(self.url + "/api/v2/alerts", json=alerts, timeout=10)
        if resp.status_code != 200:
            raise AssertionError(f"alertmanager refused the alerts ({resp.status_code}): {resp.text}")

    def status(self) -> dict:
        return requests.get(self.url + "/api/v2/status", timeout=10).json()

    def wait_for(self, predicate: Callable[[], object], timeout_s: float = 30, what: str = "condition"):
        return wait_on_server(self, "alertmanager", predicate, timeout_s, what)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def alertmanager_server(
    config: Path | str | dict,
    receivers: Mapping[str, str] | None = None,
    timings: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    ready_timeout_s: float = 60,
) -> Iterator[AlertmanagerServer]:
    """Start Alertmanager on a free 127.0.0.1 port with ``config`` (a file or a dict), its ``receivers``
    ({name: webhook URL}) repointed and, when given, the route ``timings`` overridden; yield an
    AlertmanagerServer; stop it on exit. Config, notification log and silences live in ``workdir`` (a temporary
    directory, removed afterwards, when not given)."""
    doc = config if isinstance(config, dict) else yaml.safe_load(Path(config).read_text())
    doc = point_receivers(doc, receivers or {})
    if timings:
        doc = set_route_timings(doc, timings)
    tmp = None if workdir else tempfile.TemporaryDirectory(prefix="mw-alertmanager-")
    work = Path(workdir or tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    config_path = work / "alertmanager.yml"
    config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    log = work / "alertmanager.log"
    port = free_port()  # a small race with other processes; a taken port shows up as a failed start
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                ALERTMANAGER,
                f"--config.file={config_path}",
                f"--storage.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                f"--web.external-url={url}",
                "--cluster.listen-address=",
                "--log.level=info",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=die_with_test,
        )
    server = AlertmanagerServer(url, process, log, doc)
    try:

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"alertmanager exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                return requests.get(url + "/-/ready", timeout=2).status_code == 200
            except requests.RequestException:
                return False

        server.wait_for(ready, ready_timeout_s, "alertmanager ready")
        yield server
    finally:
        server.stop()
        if tmp:
            tmp.cleanup()


PAGE_RECEIVER = "mirrorwatch-page"  # the shipped config's paging receiver (issue 27's seams)


def notification_line(body: dict) -> str:
    """One webhook body in a line: receiver, status and each alert ("name{flow/cluster} status")."""

    def where(labels: dict) -> str:  # what the alert is about: a flow, a cluster, else a job's service
        return (
            labels.get("flow")
            or labels.get("cluster")
            or "/".join(filter(None, (labels.get("job"), labels.get("service"))))
        )

    alerts = ", ".join(
        f"{a['labels'].get('alertname')}{{{where(a['labels'])}}} {a['status']}" for a in body.get("alerts", [])
    )
    return f"{body.get('receiver')} {body.get('status')}: {alerts}"


def pages(bodies: list[dict], receiver: str = PAGE_RECEIVER) -> list[dict]:
    """The notifications that page someone: those sent to the paging receiver with status firing."""
    return [b for b in bodies if b.get("receiver") == receiver and b.get("status") == "firing"]


def paged_alerts(body: dict) -> list[dict]:
    """The firing alerts a notification carries (a group's notification may carry resolved ones beside them)."""
    return [a for a in body.get("alerts", []) if a.get("status") == "firing"]
