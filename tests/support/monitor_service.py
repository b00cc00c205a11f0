"""`monitor run` as a service, read from outside: its metrics page parsed, a condition polled until it holds, a
free port for its API."""

from __future__ import annotations

import socket
import time

import requests
from prometheus_client.parser import text_string_to_metric_families


def wait_for(check, timeout_s: float = 60, every: float = 0.3):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except requests.RequestException as exc:
            last = exc
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout_s}s (last: {last!r})")


def metrics(port: int) -> dict:
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
