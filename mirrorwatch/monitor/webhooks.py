"""Webhook notifications on group status changes, sent off the sampling thread.

The sampler hands every snapshot to :meth:`Notifier.observe`, which compares each group's status with the
last one seen and queues one event per change; a worker thread POSTs it to every configured URL with a
timeout and retries (exponential backoff). A failing or slow webhook only delays other webhook calls — never
a sample — and the queue is bounded (the oldest events are dropped with a warning when it is full).

The implicit starting status is OK, so the first sample of a group that is already unhealthy notifies, and
a healthy start does not.

With ``leader.enabled`` (docs/ha.md) every replica observes, but only the leader queues and sends, and it asks the
election right before each POST (a follower's queue is never sent). After the POSTs of an event the leader records
the notified status in the election topic (:mod:`.notified`); a replica that becomes the leader first sends what
that record says the previous leader had not (:meth:`Notifier._take_over`). Sending, recording and the takeover
all run on the one worker thread, in queue order, so a takeover reads the record of every POST queued before it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import requests

from ..core.leader import Election
from ..core.redact import redact_text
from ..core.status import GROUP_STATUS, GroupStatus
from .model import GroupView, Snapshot
from .notified import PREFIX, GroupKey, parse_records, record_key, record_value, takeover_changes

log = logging.getLogger("mirrorwatch.monitor.webhooks")


def _safe_url(url: str) -> str:
    """Scheme and host only: webhook paths often carry a token (Slack, Teams), which must not reach logs."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/…"


def status_event(v: GroupView, previous: int) -> dict[str, Any]:
    """The webhook body for a group whose status changed from ``previous`` to its view's."""
    return {
        "event": "group_status_changed",
        "ts_ms": v.ts_ms,
        "cluster": v.cluster,
        "group": v.group,
        "flow": v.flow or None,
        "target": v.target or None,
        "previous_status": GROUP_STATUS[previous],
        "status": v.status_name,
        "totallag": v.totallag,
        "complete": v.complete,
        "reason": redact_text(v.error) if v.error else None,
        # what explains it (GroupView.reasons: the partitions' statuses, MM2 connectors, hanging transactions)
        "reasons": [redact_text(r) for r in v.reasons],
    }


class _TakeOver:
    """Queued when this replica became the leader: send what the previous leader had not (worker thread)."""

    def __init__(self, term: int, views: dict[GroupKey, GroupView]):
        self.term, self.views = term, views


class Notifier:
    def __init__(
        self,
        urls: list[str],
        timeout_s: float = 5.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_queue: int = 1000,
        election: Election | None = None,
    ):
        self.urls, self.timeout_s, self.retries, self.backoff_s = list(urls), timeout_s, retries, backoff_s
        self.election = election  # None: the only replica, always the leader, nothing recorded
        self._term: int | None = None  # the leadership term this replica last queued under
        self._last: dict[tuple[str, str], int] = {}
        self._queue: queue.Queue[tuple[dict[str, Any], int] | _TakeOver] = queue.Queue(maxsize=max_queue)
        self._stop = threading.Event()
        self._session = requests.Session()
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)
        self.sent = 0
        self.failed = 0
        if self.urls:
            self._thread.start()

    def observe(self, snap: Snapshot) -> list[dict[str, Any]]:
        """Queue an event per group whose status changed; returns the events (for tests and logs). A follower
        queues nothing; a new leader queues a takeover instead (the events are derived on the worker)."""
        leading, term = self.election.state() if self.election is not None else (True, 0)
        took_over = self.election is not None and leading and term != self._term
        self._term = term if leading else None
        events = []
        for v in snap.views:
            key = (v.cluster, v.group)
            before = self._last.get(key, GroupStatus.OK)
            self._last[key] = v.group_status
            if v.group_status == before or not leading or took_over:
                continue
            event = status_event(v, before)
            events.append(event)
            if self.urls:
                self._enqueue((event, term))
        if took_over and self.urls:
            self._enqueue(_TakeOver(term, {(v.cluster, v.group): v for v in snap.views}))
        return events

    def _enqueue(self, item: tuple[dict[str, Any], int] | _TakeOver) -> None:
        while True:
            try:
                self._queue.put_nowait(item)
                return
            except queue.Full:
                try:
                    dropped = self._queue.get_nowait()
                    if isinstance(dropped, _TakeOver):
                        log.warning("webhooks: queue full, dropped a takeover")
                    else:
                        event = dropped[0]
                        log.warning("webhooks: queue full, dropped the %s event of %s", event["status"], event["group"])
                except queue.Empty:
                    pass

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                if isinstance(item, _TakeOver):
                    self._take_over(item)
                else:
                    self._deliver(*item)
            except Exception:  # a bug here must not end the worker: later events still go out
                log.exception("webhooks: cannot send an event")

    def _leading(self, term: int) -> bool:
        return self.election is None or self.election.state() == (True, term)

    def _deliver(self, event: dict[str, Any], term: int) -> None:
        """POST to every URL, then record what was notified; nothing once this replica is not the leader of
        ``term`` (its successor's takeover sends what was not recorded)."""
        for url in self.urls:
            if self._post(url, event, term) is None:
                return
        if self.election is not None and self._leading(term):
            key = (event["cluster"], event["group"])
            status = GroupStatus[event["status"]]
            self.election.write_record(record_key(key), record_value(key, status, event["ts_ms"]))

    def _take_over(self, item: _TakeOver) -> None:
        if self.election is None or not self._leading(item.term):
            return
        try:
            notified = parse_records(self.election.read_records(PREFIX))
        except TimeoutError as exc:
            # sending twice beats not sending: every group not OK is notified again
            log.warning("webhooks: %s; notifying every group that is not OK", exc)
            notified = {}
        current = {key: v.group_status for key, v in item.views.items()}
        owed = takeover_changes(notified, current)
        log.info("webhooks: leader now; %d status change(s) not notified before", len(owed))
        for key, previous in owed:
            self._deliver(status_event(item.views[key], previous), item.term)

    def _post(self, url: str, event: dict[str, Any], term: int = 0) -> bool | None:
        """True when sent, False when every attempt failed, None when not attempted to the end (not the leader)."""
        for attempt in range(self.retries + 1):
            if self._stop.is_set() and attempt:
                break
            if not self._leading(term):
                return None
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
