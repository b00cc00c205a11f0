"""A tiny threaded HTTP server for the metrics endpoint and the status API (stdlib; GET only)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

log = logging.getLogger("mirrorwatch.monitor.http")

Response = tuple[int, str, bytes]  # status, content type, body
Route = Callable[[str], Response]


def json_response(status: int, body: dict) -> Response:
    return status, "application/json", json.dumps(body, separators=(",", ":"), allow_nan=False).encode()


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

    def log_message(self, fmt, *args) -> None:
        log.debug("%s " + fmt, self.address_string(), *args)


class Server:
    def __init__(self, host: str, port: int, route: Route, name: str):
        handler = type(f"{name}Handler", (_Handler,), {"route": staticmethod(route)})
        self.httpd = ThreadingHTTPServer((host, port), handler)
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
