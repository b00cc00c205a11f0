"""The status page against the real stack: real clusters, `mirror run`, `monitor run`, `canary run` and the page
served by the dashboard command, driven in headless Debian Chromium through Playwright (system executable, no
browser download).

- the recorded API answers under tests/fixtures/dashboard/ still have the live API's shape (keys), so the
  AppTest stub does not rot; ``MIRRORWATCH_RECORD_DASHBOARD=1`` re-records them from this run instead;
- end to end: the overview shows the flow OK; after the mirror is stopped (and records produced meanwhile)
  the status text turns non-OK; screenshots land in test-artifacts/ (git-ignored).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

from mirrorwatch.localkafka.launcher import free_port

from .support.helpers import create_topic, produce_numbered
from .support.mirror_harness import BIN, MirrorProcess, fast_mirror_settings, wait_until
from .support.services import Service

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "dashboard"
ARTIFACTS = ROOT / "test-artifacts"
RECORD = os.environ.get("MIRRORWATCH_RECORD_DASHBOARD") == "1"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FLOW = "east-west"


def shape(value):
    """Keys, recursively (a list by its first element); leaves by JSON kind, with null matching any kind."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return None


def same_keys(recorded, live, where="") -> list[str]:
    """Differences in keys only (values, and so numbers and statuses, change from run to run)."""
    problems = []
    if isinstance(recorded, dict) and isinstance(live, dict):
        for key in sorted(set(recorded) | set(live)):
            if key == "reason" or key in ("catch_up_s",):  # reason: only when there is one; catch_up_s: topic names
                continue
            if key not in live:
                problems.append(f"{where}.{key}: recorded but no longer served")
            elif key not in recorded:
                problems.append(f"{where}.{key}: served but not in the recording")
            else:
                problems += same_keys(recorded[key], live[key], f"{where}.{key}")
    elif isinstance(recorded, list) and isinstance(live, list) and recorded and live:
        problems += same_keys(recorded[0], live[0], f"{where}[0]")
    return problems


def canary_sample_names(text: str) -> set[str]:
    from prometheus_client.parser import text_string_to_metric_families

    # *_created series are a prometheus_client exposition switch, not part of the metrics contract
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples
            if s.name.startswith("mirrorwatch_canary_") and not s.name.endswith("_created")}


class Stack:
    def __init__(self, source, target, base: Path):
        self.base, self.source, self.target = base, source, target
        self.topic = f"t-dash-{uuid.uuid4().hex[:6]}"
        self.api, self.canary_port, self.page_port = free_port(), free_port(), free_port()
        self.config = {
            "clusters": {"east": source.config(), "west": target.config()},
            "flows": {FLOW: {"source": "east", "target": "west", "topics": [self.topic], "checkpoint_groups": [],
                             "group": f"mw-{self.topic}"}},
            "mirror": fast_mirror_settings(heartbeats_topic=f"hb.{self.topic}", metrics_port=None, offset_sync_every=50,
                                           commit_interval_s=3.0),  # slower commits: a visible saw-tooth,
            "canary": {"topic": f"mw.canary.{self.topic}", "interval_s": 1, "warn_latency_s": 2, "crit_latency_s": 4,
                       "heartbeat_max_age_s": 6, "metrics_port": self.canary_port, "connect_timeout_s": 3},
            "monitor": {"interval_s": 1, "window": 3, "history": False, "http_port": self.api, "metrics_port": 0},
            "dashboard": {"refresh_s": 2, "analytics_dir": str(base / "no-analytics-here")},
        }
        self.config_path = base / "mirrorwatch.yaml"
        self.services: list[Service] = []
        self.mirror: MirrorProcess | None = None

    def start(self) -> "Stack":
        create_topic(self.source.bootstrap, self.topic, 3)
        produce_numbered(self.source.bootstrap, self.topic, 300, 3)
        self.mirror = MirrorProcess(self.config, self.config_path).start()  # also writes the config file
        path = str(self.config_path)
        self.services.append(Service("monitor", [str(BIN / "monitor"), "run", "--config", path], self.base))
        self.services.append(Service("canary", [str(BIN / "canary"), "run", "--config", path], self.base))
        self.services.append(Service("dashboard", [sys.executable, "-m", "mirrorwatch.dashboards.cli", "--config", path,
                                                   "--port", str(self.page_port)], self.base))
        return self

    def check_alive(self) -> None:
        for service in self.services:
            assert service.alive(), f"{service.name} exited:\n{service.log_text()[-3000:]}"

    def flows_body(self) -> dict:
        return requests.get(f"http://127.0.0.1:{self.api}/v1/flows", timeout=5).json()

    def canary_text(self) -> str:
        return requests.get(f"http://127.0.0.1:{self.canary_port}/metrics", timeout=5).text

    def canary_value(self, name: str) -> float | None:
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(self.canary_text()):
            for s in family.samples:
                if s.name == name and s.labels.get("flow") == FLOW:
                    return s.value
        return None

    def wait(self, predicate, timeout_s: float, what: str):
        def check():
            self.check_alive()
            try:
                return predicate()
            except (requests.RequestException, KeyError, IndexError, ValueError):
                return None
        return wait_until(check, timeout_s, 0.5, what)

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        if self.mirror:
            try:
                self.mirror.terminate()
            except subprocess.TimeoutExpired:
                self.mirror.kill()


@pytest.fixture(scope="module")
def stack(source, target, tmp_path_factory):
    s = Stack(source, target, tmp_path_factory.mktemp("dashboard-stack")).start()
    try:
        def healthy():
            flow = s.flows_body()["flows"][0]
            return (flow["status"] == "OK" and flow["totals"]["true_lag"] == 0 and flow["complete"] == 1.0
                    and s.canary_value("mirrorwatch_canary_status") == 0
                    and s.canary_value("mirrorwatch_canary_round_trip_seconds_count")
                    and s.canary_value("mirrorwatch_canary_heartbeat_age_seconds") == s.canary_value("mirrorwatch_canary_heartbeat_age_seconds"))  # not NaN
        s.wait(healthy, 120, "mirror caught up, evaluator OK, canary OK with a heartbeat")
        yield s
    finally:
        s.stop()


def record_or_compare(name: str, live_flows: dict, live_canary: str) -> None:
    flows_path, canary_path = FIXTURES / f"flows_{name}.json", FIXTURES / f"canary_{name}.txt"
    if RECORD:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        flows_path.write_text(json.dumps(live_flows, indent=1) + "\n")
        canary_path.write_text(live_canary)
        return
    assert flows_path.exists(), f"{flows_path} missing: record it with MIRRORWATCH_RECORD_DASHBOARD=1"
    problems = same_keys(shape(json.loads(flows_path.read_text())), shape(live_flows), "flows")
    assert not problems, "recorded /v1/flows no longer matches the live API (re-record):\n" + "\n".join(problems)
    assert canary_sample_names(canary_path.read_text()) == canary_sample_names(live_canary), \
        "recorded canary metrics no longer match the live canary's series (re-record)"


def test_recorded_fixtures_match_the_live_api_shape(stack):
    body = stack.flows_body()
    assert body["flows"][0]["flow"] == FLOW
    record_or_compare("healthy", body, stack.canary_text())


# ------------------------------------------------------------------ the browser


@pytest.fixture(scope="module")
def browser_page():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (Debian package chromium)")
    profile = tempfile.mkdtemp(prefix="mw-chromium-")  # a new empty profile every run
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                        args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1000})
        try:
            yield context.new_page()
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


def page_text(page) -> str:
    return page.evaluate("document.body.innerText")


def wait_for_text(page, stack: Stack, text: str, timeout_s: float) -> str:
    def seen():
        body = page_text(page)
        return body if text in body else None
    return stack.wait(seen, timeout_s, f"'{text}' on the page")


class Traffic:
    """~rate records/s to the flow's topic from a thread, so the detail charts show the lags moving."""

    def __init__(self, bootstrap: str, topic: str, rate: int):
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.rate = topic, rate
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            for i in range(self.rate // 10):
                self.producer.produce(self.topic, value=b"x" * 100, partition=i % 3)
            self.producer.poll(0)
        self.producer.flush(30)

    def __enter__(self) -> "Traffic":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)


def test_browser_overview_ok_then_not_ok_after_the_mirror_stops(stack, browser_page):
    page = browser_page
    ARTIFACTS.mkdir(exist_ok=True)
    url = f"http://127.0.0.1:{stack.page_port}/"
    stack.wait(lambda: requests.get(url, timeout=2).status_code == 200, 60, "the page server")
    page.goto(url)
    body = wait_for_text(page, stack, "Status: OK", 90)
    assert FLOW in body and "east → west" in body and "Traceback" not in body
    page.screenshot(path=str(ARTIFACTS / "dashboard-healthy.png"), full_page=True)

    # the detail view under some traffic: partition table, the three lags and the canary filling in over time
    page.set_viewport_size({"width": 1600, "height": 1400})  # Streamlit scrolls inside its own container
    page.get_by_text("Flow detail", exact=True).click()
    with Traffic(stack.source.bootstrap, stack.topic, 600):
        body = wait_for_text(page, stack, "Mean round trip", 30)  # the last section: the whole view is drawn
        time.sleep(15)  # polls every 2 s: enough points for the charts to show the committed saw-tooth
    assert "Lag over time" in body and "Canary" in body and "Mean round trip" in body
    # caught up again (lag 0: OK by the evaluator's first rule), with the saw-tooth still on the chart
    wait_for_text(page, stack, "Status: OK", 60)
    page.screenshot(path=str(ARTIFACTS / "dashboard-detail.png"), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.get_by_text("Overview", exact=True).click()

    stack.mirror.terminate()
    produce_numbered(stack.source.bootstrap, stack.topic, 90, 3, start=300)

    def degraded():
        flow = stack.flows_body()["flows"][0]
        return flow["status"] == "ERR" and stack.canary_value("mirrorwatch_canary_status") == 2
    stack.wait(degraded, 90, "evaluator ERR and canary CRITICAL")
    record_or_compare("degraded", stack.flows_body(), stack.canary_text())

    # the page polls on its own timer, so it may still show the poll before the evaluator's ERR: wait for that,
    # and for the page as a whole (during a re-run the previous elements stay until replaced)
    body = stack.wait(lambda: (t := page_text(page)) and "Status: DOWN" in t and "evaluator ERR" in t
                      and "Status: OK" not in t and t, 60, "Status: DOWN with the evaluator's ERR on the page")
    assert "STOP (the mirror stopped committing while new records arrived)" in body and "Traceback" not in body
    page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)

    page.get_by_text("History", exact=True).click()  # this config points at an empty analytics folder
    body = wait_for_text(page, stack, "No analytics yet", 30)
    assert "monitor analyze" in body and "Traceback" not in body
