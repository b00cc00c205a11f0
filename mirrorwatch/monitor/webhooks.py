"""Webhook notifications on group status changes, sent off the sampling thread.

The sampler hands every snapshot to :meth:`Notifier.observe`, which compares each group's status with the
last one seen and queues one event per change; a worker thread POSTs it to every configured URL with a
timeout and retries (exponential backoff). A failing or slow webhook only delays other webhook calls — never
a sample — and the queue is bounded (the oldest events are dropped with a warning when it is full).

The implicit starting status is OK, so the first sample of a group that is already unhealthy notifies, and
a healthy start does not.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from urllib.parse import urlsplit

import requests

from ..core.redact import redact_text
from ..core.status import GROUP_STATUS, GroupStatus
from .model import Snapshot

log = logging.getLogger("mirrorwatch.monitor.webhooks")


def _safe_url(url: str) -> str:
    """Scheme and host only: webhook paths often carry a token (Slack, Teams), which must not reach logs."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/…"


class Notifier:
    def __init__(
        self, urls: list[str], timeout_s: float = 5.0, retries: int = 3, backoff_s: float = 0.5, max_queue: int = 1000
    ):
        self.urls, self.timeout_s, self.retries, self.backoff_s = list(urls), timeout_s, retries, backoff_s
        self._last: dict[tuple[str, str], int] = {}
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue)
        self._stop = threading.Event()
        self._session = requests.Session()
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
        self.sent = 0
        self.failed = 0
        if self.urls:
            self._thread.start()

    def observe(self, snap: Snapshot) -> list[dict]:
        """Queue an event per group whose status changed; returns the events (for tests and logs)."""
        events = []
        for v in snap.views:
            key = (v.cluster, v.group)
            before = self._last.get(key, GroupStatus.OK)
            self._last[key] = v.group_status
            if v.group_status == before:
                continue
            event = {
                "event": "group_status_changed",
                "ts_ms": v.ts_ms,
                "cluster": v.cluster,
                "group": v.group,
                "flow": v.flow or None,
                "target": v.target or None,
                "previous_status": GROUP_STATUS[before],
                "status": v.status_name,
                "totallag": v.totallag,
                "complete": v.complete,
                "reason": redact_text(v.error) if v.error else None,
            }
            events.append(event)
            if self.urls:
                self._enqueue(event)
        return events

    def _enqueue(self, event: dict) -> None:
        while True:
            try:
                self._queue.put_nowait(event)
                return
            except queue.Full:
                try:
                    dropped = self._queue.get_nowait()
                    log.warning("webhooks: queue full, dropped the %s event of %s", dropped["status"], dropped["group"])
                except queue.Empty:
                    pass

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                event = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            for url in self.urls:
                self._post(url, event)

    def _post(self, url: str, event: dict) -> bool:
        for attempt in range(self.retries + 1):
            if self._stop.is_set() and attempt:
                break
            try:
                response = self._session.post(url, json=event, timeout=self.timeout_s)
                if response.status_code < 300:
                    self.sent += 1
                    return True
                problem = f"HTTP {response.status_code}"
            except requests.RequestException as exc:
                problem = type(exc).__name__
            log.warning("webhook %s: attempt %d/%d failed: %s", _safe_url(url), attempt + 1, self.retries + 1, problem)
            self._stop.wait(self.backoff_s * (2**attempt))
        self.failed += 1
        return False

    def drain(self, timeout_s: float = 10.0) -> None:
        """Wait until queued events are sent (tests and shutdown)."""
        deadline = time.monotonic() + timeout_s
        while not self._queue.empty() and time.monotonic() < deadline:
            time.sleep(0.05)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.timeout_s + 1)
        self._session.close()
