"""Kafka client construction: one place, so every component gets SASL/SSL and redaction for free."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from .access import record_client_error
from .client_set import TrackedAdmin
from .config import ClusterConfig
from .redact import redact_text

log = logging.getLogger("mirrorwatch.kafka")


class _RepeatThrottle(logging.Filter):
    """librdkafka repeats a connection failure every few ms while a broker is away: say it once per window."""

    def __init__(self, window_s: float = 30.0):
        super().__init__()
        self.window_s = window_s
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # the address and error name identify a repeat; timings inside the text vary, so drop digits after them
        key = " ".join(record.getMessage().split("(after")[0].split()[-8:])
        now = time.monotonic()
        if now - self._last.get(key, -1e9) < self.window_s:
            return False
        if len(self._last) > 1000:
            self._last.clear()
        self._last[key] = now
        return True


log.addFilter(_RepeatThrottle())
# librdkafka's own log lines (connection refused, retries, BGQUEUE, ...) go here, silent unless -v
# (setup_logging(verbose=True) opens it): the components say what matters in one line of their own.
client_log = logging.getLogger("mirrorwatch.kafka.client")
client_log.setLevel(logging.CRITICAL + 1)
client_log.addFilter(_RepeatThrottle())
# errors that mean "a broker is not answering now"; librdkafka retries them, and the caller reports the outage
_TRANSIENT_CODES = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE, KafkaError._TIMED_OUT}
# One-shot commands configure no logging: client noise must not reach stderr beside their one-line answer.
# Services call setup_logging(), whose root handler still receives these records.
log.addHandler(logging.NullHandler())


def _error_callback(bootstrap: str) -> Callable[[KafkaError], None]:
    def on_error(err: KafkaError) -> None:
        # librdkafka reports broker errors here and retries them internally, so log, don't raise. A broker that
        # is away is the caller's to report (once, by state change); anything else (authentication, TLS) is news.
        # A failed SASL or TLS handshake comes only this way (the request then times out): remember it, so the
        # command can say "authentication failed" rather than "cannot reach".
        record_client_error(bootstrap, err)
        if err.code() in _TRANSIENT_CODES:
            client_log.debug("kafka client: %s", redact_text(str(err)))
        else:
            log.warning("kafka client: %s", redact_text(str(err)))

    return on_error


def client_properties(
    cluster: ClusterConfig, client_id: str, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    props: dict[str, Any] = {"client.id": f"{client_id}@{socket.gethostname()}"}
    props.update(cluster.properties)
    for key, value in (overrides or {}).items():
        props[key] = value
    props.setdefault("error_cb", _error_callback(cluster.bootstrap_servers))
    props.setdefault("logger", client_log)
    return props


def make_producer(cluster: ClusterConfig, client_id: str, **overrides: Any) -> Producer:
    return Producer(client_properties(cluster, client_id, overrides))


def make_consumer(cluster: ClusterConfig, client_id: str, group_id: str | None = None, **overrides: Any) -> Consumer:
    """A consumer; without ``group_id`` it is for assign()-only reading and never commits.

    The client library insists on a group.id even then; an assign()-only consumer that never commits does
    not join or create that group on the broker, so nothing is left behind.
    """
    # read_committed whatever a cluster's properties say: on a transactional target (exactly-once mirroring) every
    # reader here (syncs, checkpoints, canary, positions) must skip aborted records, as the mirror does on a source
    base: dict[str, Any] = {
        "enable.auto.commit": False,
        "group.id": group_id or "mirrorwatch-assign-only",
        "isolation.level": "read_committed",
    }
    base.update(overrides)
    return Consumer(client_properties(cluster, client_id, base))


def make_admin(cluster: ClusterConfig, client_id: str, **overrides: Any) -> AdminClient:
    """An admin client that is never freed while one of its requests is outstanding (core.client_set)."""
    return TrackedAdmin(client_properties(cluster, client_id, overrides))


def refresh_leader_epochs(admin: AdminClient, timeout_s: float) -> None:
    """Read the cluster's metadata so that the client's next ``list_offsets`` carries current leader epochs.
    librdkafka 2.16's admin ListOffsets sends the partition leader epochs the client has cached; after a leader
    change (a broker restarted) the broker answers FENCED_LEADER_EPOCH, and the client retried that in a busy loop
    until the request timed out: a core for the whole timeout, then no answer. A metadata answer just before brings
    the cached epochs up to date (a client polling through restarts of a three-node cluster: ~90 % of a core without
    it, ~1 % with it). All topics are asked for, never one by name: an admin client may auto-create a topic it asks
    about by name. A failed metadata request is left to list_offsets to report."""
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        log.debug("metadata before list_offsets: %s", redact_text(str(exc)))


def list_offsets_fresh(admin: AdminClient, request: dict[Any, Any], timeout_s: float, **options: Any) -> Any:
    """``admin.list_offsets`` right after :func:`refresh_leader_epochs`."""
    refresh_leader_epochs(admin, timeout_s)
    return admin.list_offsets(request, request_timeout=timeout_s, **options)
