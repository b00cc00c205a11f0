"""The status page against the real stack: real clusters, `mirror run`, `monitor run`, `canary run` and the page
served by the dashboard command, driven in headless Debian Chromium through Playwright (system executable, no
browser download).

- the recorded API answers under tests/fixtures/dashboard/ still have the live API's shape (keys), so the
  AppTest stub does not rot; ``MIRRORWATCH_RECORD_DASHBOARD=1`` re-records them from this run instead;
- end to end: the overview shows the flow OK with its chart; the detail view under traffic; the mirror frozen
  (SIGSTOP, records produced meanwhile) turns the status DOWN with the reasons in words; a reload keeps the
  charts (they come from the monitor's memory); after SIGCONT the monitor's own scheduled Spark run fills the
  History view with the freeze as an incident: its story and the charts as drawn (24-hour UTC axis labels, rows
  of both topics not over each other, sizes). It takes the screenshots the README shows (overview-healthy.png,
  overview-frozen.png, history.png, history-compliance.png, dashboard.png = the detail view) into
  test-artifacts/screenshots/; ``scripts/screenshots`` runs it with ``MIRRORWATCH_SCREENSHOTS=docs/img`` to refresh
  the README's (the suite writes only under ignored folders).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import requests

from harness.chromium import CHROMIUM, CHROMIUM_FLAGS
from harness.dashboard_stub import FIXTURES
from harness.helpers import create_topic, produce_numbered
from harness.mirror_harness import BIN, MirrorProcess, fast_mirror_settings, wait_until
from harness.services import Service
from mirrorwatch.localkafka.launcher import free_port

from .support.history_charts import check_history_charts

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOTS = Path(os.environ.get("MIRRORWATCH_SCREENSHOTS") or ARTIFACTS / "screenshots")
RECORD = os.environ.get("MIRRORWATCH_RECORD_DASHBOARD") == "1"
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
    return {
        s.name
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.startswith("mirrorwatch_canary_") and not s.name.endswith("_created")
    }


class Stack:
    def __init__(self, source, target, base: Path):
        self.base, self.source, self.target = base, source, target
        self.topic = f"t-dash-{uuid.uuid4().hex[:6]}"
        self.topic2 = f"{self.topic}-audit"  # a second topic: the History view's rows per topic must not collide
        self.api, self.canary_port, self.page_port = free_port(), free_port(), free_port()
        self.config = {
            "clusters": {"east": source.config(), "west": target.config()},
            "flows": {
                FLOW: {
                    "source": "east",
                    "target": "west",
                    "topics": [self.topic, self.topic2],
                    "checkpoint_groups": [],
                    "group": f"mw-{self.topic}",
                }
            },
            "mirror": fast_mirror_settings(
                heartbeats_topic=f"hb.{self.topic}", metrics_port=None, offset_sync_every=50, commit_interval_s=3.0
            ),  # slower commits: a visible saw-tooth,
            "canary": {
                "topic": f"mw.canary.{self.topic}",
                "interval_s": 1,
                "warn_latency_s": 3,
                "crit_latency_s": 5,
                "heartbeat_max_age_s": 6,
                "metrics_port": self.canary_port,
                "connect_timeout_s": 3,
            },
            # history files close every 3 s; the monitor runs the Spark job itself (local[1]: one core stays for the
            # brokers, mirror and browser), with an SLO tight enough for a freeze to breach it. Its schedule is an
            # hour: the test asks for the one run it needs with SIGUSR1 after the freeze. Runs every 40 s went back
            # to back for the whole test (2-2.5 min each on a busy 2-core machine), loading both workers, and the
            # one wanted could wait for two of them: 102-345 s for this test in four whole-suite runs
            "monitor": {
                "interval_s": 1,
                "window": 3,
                "http_port": self.api,
                "metrics_port": 0,
                "history_dir": str(base / "history"),
                "history_roll_s": 3,
                "analytics": {
                    "every_s": 3600,
                    "master": "local[1]",
                    "out": str(base / "analytics"),
                    "slo_lag": 50,
                    "slo_time_s": 3,
                    "lookback_days": 1,
                    "timeout_s": 900,
                },
            },
            "dashboard": {"refresh_s": 2},
        }
        self.config_path = base / "mirrorwatch.yaml"
        self.services: list[Service] = []
        self.mirror: MirrorProcess | None = None

    def start(self) -> Stack:
        for topic in (self.topic, self.topic2):
            create_topic(self.source.bootstrap, topic, 3)
            produce_numbered(self.source.bootstrap, topic, 300, 3)
        self.mirror = MirrorProcess(self.config, self.config_path).start()  # also writes the config file
        path = str(self.config_path)
        self.services.append(Service("monitor", [str(BIN / "monitor"), "run", "--config", path], self.base))
        self.services.append(Service("canary", [str(BIN / "canary"), "run", "--config", path], self.base))
        self.services.append(
            Service(
                "dashboard",
                [sys.executable, "-m", "mirrorwatch.dashboards.cli", "--config", path, "--port", str(self.page_port)],
                self.base,
            )
        )
        return self

    def check_alive(self) -> None:
        for service in self.services:
            assert service.alive(), f"{service.name} exited:\n{service.log_text()[-3000:]}"

    def flows_body(self) -> dict:
        return requests.get(f"http://127.0.0.1:{self.api}/v1/flows", timeout=5).json()

    def recent_body(self) -> dict:
        return requests.get(f"http://127.0.0.1:{self.api}/v1/flows/{FLOW}/recent", timeout=5).json()

    def analytics_status(self) -> dict:
        return requests.get(f"http://127.0.0.1:{self.api}/v1/analytics", timeout=5).json()["analytics"]

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
            return (
                flow["status"] == "OK"
                and flow["totals"]["true_lag"] == 0
                and flow["complete"] == 1.0
                and s.canary_value("mirrorwatch_canary_status") == 0
                and s.canary_value("mirrorwatch_canary_round_trip_seconds_count")
                and s.canary_value("mirrorwatch_canary_heartbeat_age_seconds")
                == s.canary_value("mirrorwatch_canary_heartbeat_age_seconds")
            )  # not NaN

        s.wait(healthy, 120, "mirror caught up, evaluator OK, canary OK with a heartbeat")
        yield s
    finally:
        s.stop()


def record_or_compare(name: str, live_flows: dict, live_canary: str, live_recent: dict) -> None:
    flows_path, canary_path = FIXTURES / f"flows_{name}.json", FIXTURES / f"canary_{name}.txt"
    recent_path = FIXTURES / f"recent_{name}.json"
    if RECORD:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        flows_path.write_text(json.dumps(live_flows, indent=1) + "\n")
        recent_path.write_text(json.dumps(live_recent, indent=1) + "\n")
        canary_path.write_text(live_canary)
        return
    for path, live, what in (
        (flows_path, live_flows, "/v1/flows"),
        (recent_path, live_recent, "/v1/flows/<flow>/recent"),
    ):
        assert path.exists(), f"{path} missing: record it with MIRRORWATCH_RECORD_DASHBOARD=1"
        problems = same_keys(shape(json.loads(path.read_text())), shape(live), "body")
        assert not problems, f"recorded {what} no longer matches the live API (re-record):\n" + "\n".join(problems)
    assert canary_sample_names(canary_path.read_text()) == canary_sample_names(live_canary), (
        "recorded canary metrics no longer match the live canary's series (re-record)"
    )


def test_recorded_fixtures_match_the_live_api_shape(stack):
    body = stack.flows_body()
    assert body["flows"][0]["flow"] == FLOW
    recent = stack.wait(
        lambda: (r := stack.recent_body()) and len(r["recent"]["points"]) >= 5 and r, 30, "a few recent points"
    )
    record_or_compare("healthy", body, stack.canary_text(), recent)


# ------------------------------------------------------------------ the browser


@pytest.fixture(scope="module")
def browser_page():
    sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is not installed")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not installed (Debian package chromium)")
    profile = tempfile.mkdtemp(prefix="mw-chromium-")  # a new empty profile every run
    with sync_api.sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 1000},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(120_000)  # a shared 2-core machine under load can take that long to serve
            page.set_default_navigation_timeout(120_000)
            yield page
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


def page_text(page) -> str:
    return page.evaluate("document.body.innerText")


def wait_for_text(page, stack: Stack, text: str | list[str], timeout_s: float) -> str:
    """The page's text once every one of ``text`` is on it at the same time (Streamlit draws in steps, and a
    re-run replaces elements one by one)."""
    texts = [text] if isinstance(text, str) else text

    def seen():
        body = page_text(page)
        return body if all(t in body for t in texts) else None

    return stack.wait(seen, timeout_s, f"{texts} on the page")


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

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(30)


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / name), full_page=True)


def charts_drawn(page) -> int:
    """Vega-Lite charts on the page that have drawn their canvas or SVG. Each chart element is scrolled into
    view first: a chart below the fold may wait to draw until it is seen (and a loaded machine is slow to)."""
    return page.evaluate("""() => {
        document.querySelectorAll('.vega-embed, [data-testid="stVegaLiteChart"]').forEach(e => e.scrollIntoView());
        return document.querySelectorAll('.vega-embed canvas, .vega-embed svg.marks').length;
    }""")


def wait_for_charts(page, stack, count: int, what: str, timeout_s: float = 90) -> None:
    """Wait for ``count`` drawn charts; on a timeout say how many there were, and keep a screenshot and the
    page's text in test-artifacts/ (this wait failed only inside whole-suite runs on a loaded machine)."""
    try:
        stack.wait(lambda: charts_drawn(page) >= count, timeout_s, what)
    except AssertionError as exc:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "charts-timeout.png"), full_page=True)
        (ARTIFACTS / "charts-timeout.txt").write_text(page_text(page) or "")
        drawn = charts_drawn(page)
        embeds = page.evaluate("document.querySelectorAll('.vega-embed').length")
        raise AssertionError(
            f"{exc}: {drawn} drawn of {embeds} chart elements (screenshot and text in {ARTIFACTS})"
        ) from None


def test_browser_overview_detail_frozen_mirror_and_history(stack, browser_page):
    page = browser_page
    url = f"http://127.0.0.1:{stack.page_port}/"
    stack.wait(lambda: requests.get(url, timeout=2).status_code == 200, 60, "the page server")
    page.goto(url)
    wait_for_text(page, stack, "Status: OK", 90)
    body = wait_for_text(
        page, stack, ["Status: OK", "RPO now", "Canary round trip", "Heartbeat age", "Status changes"], 60
    )
    assert FLOW in body and "east → west" in body and "Traceback" not in body
    stack.wait(lambda: charts_drawn(page) >= 1, 30, "the overview's RPO and lag chart")
    screenshot(page, "overview-healthy.png")

    # the detail view under some traffic: topics and partitions worst first, the lags, RPO and canary charts
    page.set_viewport_size({"width": 1600, "height": 1400})  # Streamlit scrolls inside its own container
    page.get_by_text("Flow detail", exact=True).click()
    with Traffic(stack.source.bootstrap, stack.topic, 600):
        # the last section: the whole view is drawn
        wait_for_text(page, stack, ["Lag over time", "Partitions sorted by", "All columns", "Mean round trip"], 60)
        time.sleep(10)  # the monitor's points every second: the committed saw-tooth shows
    # caught up again (lag 0: OK by the evaluator's first rule), with the saw-tooth still on the chart
    wait_for_text(page, stack, "Status: OK", 60)
    wait_for_charts(page, stack, 3, "lag, RPO and canary charts")
    screenshot(page, "dashboard.png")
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.get_by_text("Overview", exact=True).click()

    # freeze the mirror (as a hung process or a long GC pause would): it neither exits nor mirrors
    frozen_at = time.time()
    os.kill(stack.mirror.proc.pid, signal.SIGSTOP)
    try:
        for topic in (stack.topic, stack.topic2):
            produce_numbered(stack.source.bootstrap, topic, 90, 3, start=300)

        def degraded():
            flow = stack.flows_body()["flows"][0]
            return flow["status"] == "ERR" and stack.canary_value("mirrorwatch_canary_status") == 2

        stack.wait(degraded, 90, "evaluator ERR and canary CRITICAL")
        record_or_compare("degraded", stack.flows_body(), stack.canary_text(), stack.recent_body())

        # the page polls on its own timer, so it may still show the poll before the evaluator's ERR: wait for
        # that, and for the page as a whole (during a re-run the previous elements stay until replaced)
        body = stack.wait(
            lambda: (
                (t := page_text(page))
                and "Status: DOWN" in t
                and "evaluator ERR" in t
                and "Status: OK" not in t
                and "→ ERR" in t
                and t
            ),
            60,
            "Status: DOWN with the evaluator's ERR and the status change on the page",
        )
        # a frozen engine commits nothing while records arrive: STOP, or STALL when its last commits repeat
        assert (
            "STOP (the mirror stopped committing while new records arrived)" in body
            or "STALL (the mirror commits but its offset does not move)" in body
        ), body
        assert "Traceback" not in body
        assert "canary CRITICAL" in body and "heartbeat" in body
        # a reload is a new session: the charts and the status changes come back at once from the monitor
        page.reload()
        wait_for_text(page, stack, ["Status: DOWN", "→ ERR"], 60)
        stack.wait(lambda: charts_drawn(page) >= 1, 30, "the chart after a reload")
        time.sleep(3)  # the RPO climbing on the chart
        screenshot(page, "overview-frozen.png")
    finally:
        os.kill(stack.mirror.proc.pid, signal.SIGCONT)
    stack.wait(lambda: stack.flows_body()["flows"][0]["totals"]["true_lag"] == 0, 90, "the mirror caught up again")

    # a Spark run of the monitor's own, asked for once the mirror caught up (`kill -USR1`, as an on-call person
    # would after an incident), has the freeze's breach in its history: the History view fills itself (on a busy
    # machine one local[1] run takes minutes, hence the long wait)
    assert stack.analytics_status()["state"] == "never"  # the hourly schedule has not run it
    next(s for s in stack.services if s.name == "monitor").proc.send_signal(signal.SIGUSR1)

    def analysed_after_the_freeze():
        status = stack.analytics_status()
        assert status["state"] not in ("failed", "timeout"), status
        return status["state"] == "ok" and status["started_ms"] > frozen_at * 1000 + 10_000 and status

    status = stack.wait(analysed_after_the_freeze, 900, "the analytics run asked for after the freeze")
    assert status["runs"] == 1 and status["failures"] == 0
    incidents = pq.read_table(stack.base / "analytics" / "incidents").to_pylist()
    assert incidents  # on the flow's topic, and on the canary and heartbeat topics it mirrors too
    # the freeze is there: an incident starts within a few samples of it (time lag passes 3 s a few s later)
    assert any(abs(i["start"].timestamp() - frozen_at) < 30 for i in incidents), incidents

    page.set_viewport_size({"width": 1400, "height": 1000})
    page.get_by_text("History", exact=True).click()
    body = wait_for_text(
        page,
        stack,
        [
            "Started",
            "Evaluator statuses",
            "SLO compliance per topic",
            "Daily p99 trend",
            "Scheduled analytics every 3600 s",
        ],
        60,
    )
    assert "Traceback" not in body
    wait_for_charts(page, stack, 4, "incident timeline, compliance and trend charts")
    check_history_charts(page, stack, frozen_at, body)
    page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollTo(0, 0)")  # the charts' wait scrolled
    screenshot(page, "history.png")  # the story of the freeze and its timeline
    page.get_by_text("SLO compliance per topic", exact=True).evaluate("e => e.scrollIntoView({block: 'start'})")
    screenshot(page, "history-compliance.png")
