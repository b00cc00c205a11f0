"""A stub monitor API and canary endpoint for the status page: they serve the answers recorded from the real
services (tests/fixtures/dashboard/, recorded by tests/test_dashboard_live.py) with their times moved to the
moment of each request. Shared by tests/test_dashboard_app.py and bench/dashboard_render.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "dashboard"

# a route's body: bytes, or a function that makes them as of the request (a recorded answer replayed as of now)
Body = bytes | Callable[[], bytes]


def recorded_flows(name: str) -> dict[str, Any]:
    """A recorded /v1/flows body with its sample times moved to now (the stub plays a live monitor)."""
    body: dict[str, Any] = json.loads((FIXTURES / f"flows_{name}.json").read_text())
    now = int(time.time() * 1000)
    for flow in body["flows"]:
        flow["ts_ms"] = now
        if flow.get("last_ok_ms"):
            flow["last_ok_ms"] = now
    return body


def recorded_recent(name: str) -> dict[str, Any]:
    """A recorded /v1/flows/<flow>/recent body with its times moved so that the newest point is now."""
    body: dict[str, Any] = json.loads((FIXTURES / f"recent_{name}.json").read_text())
    recent = body["recent"]
    shift = int(time.time() * 1000) - max(p["ts_ms"] for p in recent["points"])
    for item in recent["points"] + recent["status_changes"]:
        item["ts_ms"] += shift
    return body


def analytics_status(state: str, **fields: Any) -> bytes:
    body = {
        "state": state,
        "reason": None,
        "started_ms": 1_767_571_200_000,
        "finished_ms": 1_767_571_260_000,
        "duration_s": 60.0,
        "last_ok_ms": None,
        "runs": 1,
        "failures": 0,
        "every_s": 120,
        "master": "local[2]",
        "out": "/somewhere",
        **fields,
    }
    return json.dumps({"error": False, "message": "analytics status returned", "analytics": body}).encode()


class StubServer:
    """Serves ``routes`` (path → (status, content type, body)); change them between runs."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, Body]] = {}
        routes = self.routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                status, ctype, body = routes.get(
                    self.path, (404, "application/json", b'{"error":true,"message":"nope"}')
                )
                body = body() if callable(body) else body  # a recorded answer replayed as of now
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def serve(self, scenario: str) -> None:
        # times moved to the moment of each request: a slow page run on a busy machine still sees a live monitor
        self.routes["/v1/flows"] = (200, "application/json", lambda: json.dumps(recorded_flows(scenario)).encode())
        self.routes["/v1/flows/east-west/recent"] = (
            200,
            "application/json",
            lambda: json.dumps(recorded_recent(scenario)).encode(),
        )
        self.routes["/metrics"] = (200, "text/plain", (FIXTURES / f"canary_{scenario}.txt").read_bytes())

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def big_flow(partitions: int) -> dict[str, Any]:
    """The recorded degraded flow grown to ``partitions`` partitions over 20 topics."""
    body = recorded_flows("degraded")
    flow = body["flows"][0]
    template = flow["partitions"][0]
    flow["partitions"] = [
        {**template, "topic": f"topic-{i % 20:02d}", "partition": i // 20, "time_lag_s": float(i % 97), "true_lag": i}
        for i in range(partitions)
    ]
    return body
