"""One small threaded HTTP server (stdlib; GET only) for every service's ``/metrics``, ``/healthz`` and
``/readyz``, and the monitor's status API.

The probes answer 200 or 503 with ``{"status": "ok"|"failing", "checks": {name: {"ok", "detail"}}}``
(``core/probes.py`` says what each means). ``mirrorwatch_alive`` and ``mirrorwatch_ready`` (``service`` label)
put the same two verdicts on ``/metrics``: where nothing restarts a wedged service (systemd), an alert can.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from .cli import UserError, listen_error
from .probes import ProbeState

log = logging.getLogger("mirrorwatch.http")

Response = tuple[int, str, bytes]  # status, content type, body
Route = Callable[[str], Response]
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def json_response(status: int, body: dict[str, Any]) -> Response:
    return status, "application/json", json.dumps(body, separators=(",", ":"), allow_nan=False).encode()


def probe_response(path: str, probes: ProbeState) -> Response | None:
    """``/healthz`` (alive) or ``/readyz`` (ready): 200 when OK, else 503; None for any other path."""
    wanted = path.split("?", 1)[0].rstrip("/")
    if wanted == "/healthz":
        verdict = probes.liveness()
    elif wanted == "/readyz":
        verdict = probes.readiness()
    else:
        return None
    return json_response(200 if verdict.ok else 503, verdict.body())


class ProbeCollector:
    """``mirrorwatch_alive`` and ``mirrorwatch_ready``, judged at scrape time (a wedged loop publishes nothing)."""

    def __init__(self, probes: ProbeState, service: str):
        self.probes, self.service = probes, service

    def collect(self) -> list[GaugeMetricFamily]:
        alive = GaugeMetricFamily(
            "mirrorwatch_alive",
            "1 while every loop of the service ticks (/healthz), 0 when one is wedged",
            labels=["service"],
        )
        alive.add_metric([self.service], float(self.probes.liveness().ok))
        ready = GaugeMetricFamily(
            "mirrorwatch_ready",
            "1 once config loaded, every cluster answered once, first cycle done, and alive (/readyz)",
            labels=["service"],
        )
        ready.add_metric([self.service], float(self.probes.readiness().ok))
        return [alive, ready]


def probe_registry(probes: ProbeState, service: str, registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """``registry`` (a new one when None) with the probe gauges registered."""
    registry = registry if registry is not None else CollectorRegistry()
    registry.register(ProbeCollector(probes, service))
    return registry


def metrics_route(render: Callable[[], bytes], probes: ProbeState) -> Route:
    """``/metrics`` (and ``/``) from ``render``, plus the two probes."""

    def route(path: str) -> Response:
        probe = probe_response(path, probes)
        if probe is not None:
            return probe
        if path.split("?", 1)[0] in ("/metrics", "/"):
            return 200, METRICS_CONTENT_TYPE, render()
        return 404, "text/plain", b"not found\n"

    return route


def serve_metrics(
    host: str,
    port: int | None,
    registry: CollectorRegistry,
    probes: ProbeState,
    name: str,
    setting: str,
    exit_code: int,
) -> Server | None:
    """Serve the registry on /metrics with the probes; port 0 = any free one, None = off (returns None).
    A port that cannot be opened is one line naming ``setting`` (UserError, ``exit_code``)."""
    if port is None:
        return None
    try:
        return Server(host, port, metrics_route(lambda: generate_latest(registry), probes), name).start()
    except OSError as exc:
        raise UserError(listen_error(exc, host, port, setting), exit_code) from None


class _Handler(BaseHTTPRequestHandler):
    route: Route  # set per server class
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        try:
            status, ctype, body = self.route(self.path)  # the query too: routes that take none ignore it
        except Exception as exc:  # a bug in one handler must not kill the server thread
            log.exception("HTTP %s failed", self.path)
            status, ctype, body = json_response(
                500, {"error": True, "message": f"internal error: {type(exc).__name__}"}
            )
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _method_not_allowed(self) -> None:
        """Every server here is read-only: another method gets JSON 405 (not http.server's HTML 501 page)."""
        length = int(self.headers.get("Content-Length") or 0)
        if length > 0:
            self.rfile.read(min(length, 1 << 20))  # keep-alive: the next request starts after this one's body
        _, ctype, body = json_response(
            405, {"error": True, "message": f"method {self.command} not allowed: this API answers GET only"}
        )
        self.send_response(405)
        self.send_header("Allow", "GET")
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _method_not_allowed  # noqa: N815 (http.server's names)

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("%s " + fmt, self.address_string(), *args)


class _ServerV6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class Server:
    def __init__(self, host: str, port: int, route: Route, name: str):
        handler = type(f"{name}Handler", (_Handler,), {"route": staticmethod(route)})
        server_class = _ServerV6 if ":" in host else ThreadingHTTPServer  # "::" as prometheus-client allowed
        self.httpd = server_class((host, port), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=name, daemon=True)

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self) -> Server:
        self.thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
