"""`monitor run` as a service, read from outside: its metrics page parsed, a condition polled until it holds, a
free port for its API."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import requests
from prometheus_client.parser import text_string_to_metric_families

from harness.prometheus_server import free_port as harness_free_port

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout_s: float = 60, every: float = 0.3) -> T:
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
            last = result
        except requests.RequestException as exc:
            last = exc
        time.sleep(every)
    raise AssertionError(f"condition not met within {timeout_s}s (last: {last!r})")


def metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def free_port() -> int:
    return harness_free_port()  # outside the ephemeral range (mirrorwatch/localkafka/process.py says why)
