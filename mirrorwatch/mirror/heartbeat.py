"""Heartbeats: Heartbeat(source, target, ts) written to the source's heartbeats topic every interval.

They are mirrored like any topic, so their age on the target is an end-to-end liveness signal that needs no
access to the mirror process (MirrorMaker 2's heartbeats, same idea).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from ..core.access import Denied, is_denied, raise_if_denied
from ..core.clients import make_admin, make_producer
from ..core.config import ClusterConfig
from ..core.records import Heartbeat
from .outage import second_opinion_due

log = logging.getLogger("mirrorwatch.mirror.heartbeat")
STUCK_AFTER_S = 30.0


def ensure_heartbeats_topic(cluster: ClusterConfig, topic: str) -> None:
    admin = make_admin(cluster, "mirrorwatch-heartbeat-admin")
    if topic in admin.list_topics(timeout=30).topics:
        return
    futures = admin.create_topics([NewTopic(topic, 1, -1, config={"retention.ms": str(24 * 3600 * 1000)})])
    try:
        futures[topic].result(30)
    except Exception as exc:  # created concurrently by another worker: fine
        raise_if_denied(exc, "CREATE", "topic", topic, "source")
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


class HeartbeatProducer(threading.Thread):
    def __init__(
        self,
        cluster: ClusterConfig,
        topic: str,
        source: str,
        target: str,
        interval_s: float,
        on_sent: Callable[[], None] | None = None,
        on_denied: Callable[[Denied], None] | None = None,
    ) -> None:
        super().__init__(name="heartbeats", daemon=True)
        self.topic, self.source, self.target, self.interval_s = topic, source, target, interval_s
        self._cluster = cluster
        self._producer = self._new_producer()
        self._stopping = threading.Event()  # not _stop: that is Thread's own method, which join() calls
        self._on_sent: Callable[[], None] = on_sent or (lambda: None)
        self._on_denied: Callable[[Denied], None] = on_denied or (lambda denied: None)
        self.stuck_after_s = STUCK_AFTER_S
        self._last_sent = self._last_renewal_try = time.monotonic()
        self._retired: list[Producer] = []  # replaced producers: kept, never destroyed (see _renew_if_stuck)
        self.replacements = 0

    def _new_producer(self) -> Producer:
        return make_producer(self._cluster, "mirrorwatch-heartbeat", **{"linger.ms": 0, "acks": "all"})

    def _renew_if_stuck(self) -> None:
        """No heartbeat acknowledged for ``stuck_after_s``: ask a new client; if it reaches the source, it
        replaces the producer.

        Why: a long-lived librdkafka client can stay unable to reach a restarted cluster that a new client
        reaches at once (confluentinc/librdkafka#5301), and stale heartbeats turn the canary CRITICAL while the
        mirror itself is fine. A new client that gets no answer either means an outage: it is let go, and the
        next try is ``stuck_after_s`` later. The replaced one is kept, as the cluster watch keeps its stuck
        clients (docs/design.md), which happens once per such restart."""
        now = time.monotonic()
        if not second_opinion_due(self._last_sent, self._last_renewal_try, now, self.stuck_after_s):
            return
        self._last_renewal_try = now
        fresh = self._new_producer()
        try:
            answered = bool(fresh.list_topics(self.topic, timeout=5).brokers)
        except KafkaException:
            answered = False
        if not answered:
            return
        log.warning(
            "heartbeats: none acknowledged for %.0f s but the source answers a new client; replacing the "
            "heartbeat producer",
            now - self._last_sent,
        )
        self._retired.append(self._producer)
        self._producer, self._last_sent = fresh, now
        self.replacements += 1

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            self._last_sent = time.monotonic()
            self._on_sent()
        elif is_denied(err):  # no retry makes an ACL appear: tell the engine, which stops with one line
            self._on_denied(Denied("WRITE", "topic", self.topic, "source"))

    def run(self) -> None:
        while not self._stopping.is_set():
            beat = Heartbeat(self.source, self.target, int(time.time() * 1000))
            try:
                self._producer.produce(self.topic, key=beat.key(), value=beat.to_value(), on_delivery=self._delivered)
            except BufferError:  # the source is down and the queue is full: skip this beat, it is only a signal
                pass
            except KafkaException as exc:  # refused at once once the client knows it may not write there
                if is_denied(exc):
                    self._on_denied(Denied("WRITE", "topic", self.topic, "source"))
                    return
                log.warning("heartbeat not sent: %s", exc)
            self._producer.poll(0)
            self._renew_if_stuck()
            self._stopping.wait(self.interval_s)
        self._producer.flush(2)

    def stop(self) -> None:
        self._stopping.set()
