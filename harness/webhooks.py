"""A real webhook endpoint for the tests (stdlib HTTP server on a free loopback port): every POST body in arrival
order (``received_at``: each one's time.monotonic()); the first ``fail_first`` POSTs are answered 503, so that
retries show."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    def __init__(self, fail_first: int = 0, path: str = "/hook"):
        self.bodies: list[dict] = []
        self.received_at: list[float] = []
        self.fail_first, self.calls = fail_first, 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                receiver.calls += 1
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if receiver.calls <= receiver.fail_first:
                    self.send_response(503)
                else:
                    receiver.received_at.append(time.monotonic())
                    receiver.bodies.append(body)
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def changes(self) -> list[tuple[str, str]]:
        """(previous status, status) of each POST received."""
        return [(b["previous_status"], b["status"]) for b in self.bodies]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
