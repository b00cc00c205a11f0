"""The status page's logic in Streamlit's AppTest, against a stub monitor API and canary endpoint that serve
answers recorded from the real services (tests/fixtures/dashboard/, recorded by test_dashboard_live.py)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from mirrorwatch.dashboards.settings import CONFIG_ENV

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "mirrorwatch" / "dashboards" / "app.py"
FIXTURES = ROOT / "tests" / "fixtures" / "dashboard"
SECRET = "hunter2-very-secret"


def recorded_flows(name: str) -> dict:
    """A recorded /v1/flows body with its sample times moved to now (the stub plays a live monitor)."""
    body = json.loads((FIXTURES / f"flows_{name}.json").read_text())
    now = int(time.time() * 1000)
    for flow in body["flows"]:
        flow["ts_ms"] = now
        if flow.get("last_ok_ms"):
            flow["last_ok_ms"] = now
    return body


class StubServer:
    """Serves ``routes`` (path → (status, content type, body bytes)); change them between runs."""

    def __init__(self):
        self.routes: dict[str, tuple[int, str, bytes]] = {}
        routes = self.routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                status, ctype, body = routes.get(self.path, (404, "application/json", b'{"error":true,"message":"nope"}'))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def serve(self, scenario: str) -> None:
        self.routes["/v1/flows"] = (200, "application/json", json.dumps(recorded_flows(scenario)).encode())
        self.routes["/metrics"] = (200, "text/plain", (FIXTURES / f"canary_{scenario}.txt").read_bytes())

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub():
    server = StubServer()
    yield server
    server.close()


def closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens once the socket is closed


@pytest.fixture
def page(tmp_path, monkeypatch):
    """Start the page with a config pointing at the given addresses; returns the AppTest after its first run."""

    def start(monitor_url: str, canary_url: str | None, analytics_dir: str | None = None, **dashboard) -> AppTest:
        config = {
            "clusters": {"east": {"bootstrap.servers": "127.0.0.1:1", "sasl.username": "mirror",
                                  "sasl.password": SECRET},
                         "west": {"bootstrap.servers": "127.0.0.1:2"}},
            "flows": {"east-west": {"source": "east", "target": "west"}},
            "canary": {"heartbeat_max_age_s": 6},
            "monitor": {"interval_s": 1},
            "dashboard": {"monitor_url": monitor_url, "canary_url": canary_url or "", "refresh_s": 5,
                          "analytics_dir": analytics_dir or str(tmp_path / "no-analytics"), **dashboard},
        }
        path = tmp_path / "mirrorwatch.yaml"
        path.write_text(yaml.safe_dump(config))
        monkeypatch.setenv(CONFIG_ENV, str(path))
        return AppTest.from_file(str(PAGE), default_timeout=30).run()

    return start


def texts(at: AppTest) -> str:
    """Everything the page wrote as text (markdown, captions, banners, metrics), one string."""
    parts = []
    for kind in ("markdown", "caption", "error", "warning", "info", "success", "title", "subheader"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label}={m.value}" for m in at.metric]
    return "\n".join(parts)


def show(at: AppTest, view: str) -> AppTest:
    return at.sidebar.radio(key="view").set_value(view).run()


def assert_no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


# ------------------------------------------------------------------ live views


def test_healthy_overview_is_green(stub, page):
    stub.serve("healthy")
    at = page(stub.url, f"{stub.url}/metrics")
    assert_no_exception(at)
    text = texts(at)
    assert "Status: OK" in text and "east-west" in text and "east → west" in text
    assert "Evaluator=OK" in text and "Canary=OK" in text and "True lag=0" in text
    assert not at.error and not at.warning


def test_degraded_says_why_in_words(stub, page):
    stub.serve("degraded")
    at = page(stub.url, f"{stub.url}/metrics")
    assert_no_exception(at)
    text = texts(at)
    assert "Status: DOWN" in text and "Status: OK" not in text
    assert "evaluator ERR: 3 partitions STOP (the mirror stopped committing while new records arrived)" in text
    assert "canary CRITICAL" in text and "Evaluator=ERR" in text and "True lag=90" in text


def test_monitor_unreachable_is_a_banner_naming_the_address(page):
    address = closed_port_url()
    at = page(address, None)
    assert_no_exception(at)
    (banner,) = at.error
    assert "Monitor unreachable" in banner.value and address in banner.value and "Traceback" not in texts(at)
    at = show(at, "Flow detail")
    assert_no_exception(at)
    assert address in at.error[0].value


def test_monitor_answering_garbage_is_a_banner_too(stub, page):
    stub.routes["/v1/flows"] = (502, "text/html", b"<html>bad gateway</html>")
    at = page(stub.url, None)
    assert_no_exception(at)
    assert "HTTP 502" in at.error[0].value and stub.url in at.error[0].value


def test_unexpected_answer_shapes_never_raise(stub, page):
    odd = {"error": False, "flows": [{"flow": "east-west", "status": "ERR", "partitions": "not a list", "totals": 5,
                                      "ts_ms": "yesterday"}, "not a flow"]}
    stub.routes["/v1/flows"] = (200, "application/json", json.dumps(odd).encode())
    stub.routes["/metrics"] = (200, "text/plain", b"this is { not prometheus text\n")
    at = page(stub.url, f"{stub.url}/metrics")
    assert_no_exception(at)
    assert "Status: DOWN" in texts(at) and "not Prometheus text" in texts(at)
    at = show(at, "Flow detail")
    assert_no_exception(at)


def test_canary_unreachable_degrades_with_a_warning(stub, page):
    stub.serve("healthy")
    missing = closed_port_url() + "/metrics"
    at = page(stub.url, missing)
    assert_no_exception(at)
    text = texts(at)
    assert "Status: DEGRADED" in text and f"canary metrics unavailable: cannot connect to {missing}" in text


def test_without_a_canary_the_verdict_is_the_evaluator_alone(stub, page):
    stub.serve("healthy")
    at = page(stub.url, None)
    assert "Status: OK" in texts(at) and not at.warning


def test_flow_detail_table_and_charts_fill_from_successive_polls(stub, page):
    stub.serve("healthy")
    at = show(page(stub.url, f"{stub.url}/metrics"), "Flow detail")
    assert_no_exception(at)
    (table,) = at.dataframe
    frame = table.value
    assert {"committed_lag", "read_lag", "true_lag", "rpo_seconds", "status", "forecast"} <= set(frame.columns)
    assert len(frame) == len(recorded_flows("healthy")["flows"][0]["partitions"])
    assert "Collecting" in texts(at)  # one point so far
    stub.serve("degraded")  # a new sample (new ts_ms): a second point, and the detail follows it
    at.run()
    timeline = at.session_state["timeline"]
    assert len(timeline.lag_frame("east-west")) >= 2
    assert list(timeline.lag_frame("east-west")["true_lag"])[-1] == 90
    text = texts(at)
    assert "Lost=" in text and "Duplicates=" in text and "Heartbeat age=" in text and "Collecting" not in text


def test_secrets_are_never_rendered(stub, page):
    stub.serve("degraded")
    at = page(stub.url, f"{stub.url}/metrics")
    for view in ("Overview", "Flow detail", "History"):
        at = show(at, view)
        assert SECRET not in texts(at) and "sasl" not in texts(at).lower()


def test_bad_config_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    path = tmp_path / "bad.yaml"
    path.write_text("clusters: {east: {bootstrap.servers: x}}\ndashboard: {port: 0}\n")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    at = AppTest.from_file(str(PAGE), default_timeout=30).run()
    assert_no_exception(at)
    assert "dashboard.port" in at.error[0].value


# ------------------------------------------------------------------ history (analytics output)


def test_no_analytics_is_an_explained_empty_state(page):
    at = show(page(closed_port_url(), None), "History")
    assert_no_exception(at)
    (info,) = at.info
    assert "No analytics yet" in info.value and "monitor analyze" in info.value


def test_analytics_present_compliance_incidents_and_trend(page):
    # a tiny `monitor generate-history --days 3 --interval 120 --topics orders,payments --partitions 2` +
    # `monitor analyze` output, recorded once (Spark is too slow to start for this test)
    at = show(page(closed_port_url(), None, analytics_dir=str(FIXTURES / "analytics")), "History")
    assert_no_exception(at)
    assert [s.value for s in at.subheader] == ["SLO compliance per topic", "Incidents", "Daily p99 trend"]
    compliance, incidents = at.dataframe
    assert sorted(compliance.value["topic"]) == ["orders", "payments"]
    assert compliance.value["compliance"].between(90, 100).all()  # shown in percent
    assert len(incidents.value) == 42 and "42 partition incidents, 0 open" in texts(at)
    assert not at.error and not at.warning
