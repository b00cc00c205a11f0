"""``canary run``: one FlowCanary per flow, probes scheduled with APScheduler, metrics over HTTP.

Per flow: the probe job (scheduler thread) checks both clusters, writes one event per partition and returns
at once; a reader thread reads the target canary and heartbeat partitions continuously (assign() only, never
a consumer group) and feeds the tracker. Status is re-judged after every read, so an overdue event turns the
status CRITICAL within a fraction of a second after its critical timeout, not at the next probe.
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from prometheus_client import CollectorRegistry

from ..core.cli import UserError
from ..core.client_set import close_bounded, join_all
from ..core.clients import make_consumer, make_producer
from ..core.config import Config
from ..core.httpserver import Server, probe_registry, serve_metrics
from ..core.leader import election_for, export_leader_gauge
from ..core.records import CANARY_MARKER_HEADER, CanaryEvent
from .events import MARKER_VALUE, arrival_of, new_run_id, now_ms
from .heartbeats import HeartbeatWatch, lookback_offset
from .metrics import CanaryMetrics
from .reader_guard import CHECK_EVERY_S, reader_stuck
from .service_probes import canary_probes, probe_job, watch_loops
from .status import CRITICAL, EXIT_CODES, UNKNOWN, WARNING, worst
from .topics import FlowTopics, ProbeUnknown, warm_up
from .tracker import Tracker

log = logging.getLogger("mirrorwatch.canary")


def delivery_timeout_ms(crit_latency_s: float) -> int:
    """How long the producer tries to write a probe's event: four fifths of ``crit_latency_s``, so that an event the
    source never took is reported refused (UNKNOWN: nothing was tested) before its probe is judged at
    ``crit_latency_s``. With the two equal, the refusal raced the judgement; losing it, the event was counted
    overdue and then lost when the next one arrived: a canary-loss page for a write that never happened (a source
    node SIGKILLed under the event, its request left to time out)."""
    return max(1000, int(crit_latency_s * 800))


class FlowCanary:
    def __init__(self, config: Config, flow_name: str, metrics: CanaryMetrics):
        self.settings = config.canary
        self.topics = FlowTopics(config, flow_name, "mirrorwatch-canary")
        self.run_id = new_run_id()
        self.name = self.topics.flow_name
        self.labels = metrics, (self.name, self.topics.source_alias, self.topics.target_alias)
        self.tracker = Tracker(
            self.run_id,
            self.topics.source_alias,
            self.settings.warn_latency_s,
            self.settings.crit_latency_s,
            own_only=True,
        )
        self.heartbeat = HeartbeatWatch(self.topics.source_alias, self.topics.target_alias, self.topics.mm2)
        self.producer = self._new_producer()
        self._warmed_up = False
        self.producer_fatal: str | None = None  # set by a delivery report; the next probe replaces the producer
        self.reader = self._new_reader()
        # where the reader reads next, per (topic, partition) it was given: a replaced reader resumes there
        self._next_offset: dict[tuple[str, int], int] = {}
        self.reader_check_every_s = CHECK_EVERY_S
        self._reader_checked_at = 0.0
        self._reader_look: tuple[dict[int, int], dict[int, int]] | None = None  # (target ends, reader's next)
        self._renew_reader = False
        self._retired_readers: list[
            Consumer
        ] = []  # replaced readers: kept open (close() can wait for good); stop() tries
        self.reader_replacements = 0
        self.lock = threading.Lock()
        self.seq = 0
        self.assigned: set[tuple[str, int]] = set()
        self._to_assign: list[TopicPartition] = []
        self.unknown_reason: str | None = None
        self.probe_status: str | None = None  # of the probe that resolved last
        self.status = UNKNOWN
        self._published: dict[str, float] = {}
        self._stop = threading.Event()
        self._probing = threading.Lock()
        self.on_read_turn: Callable[[], None] = lambda: None  # a reader tick for /healthz (service_probes.py)
        self._thread = threading.Thread(target=self._read_loop, name=f"canary-reader-{flow_name}", daemon=True)

    def _new_reader(self) -> Consumer:
        return make_consumer(
            self.topics.target_cluster,
            f"mirrorwatch-canary-{self.run_id}",
            group_id=f"mirrorwatch-canary-{self.run_id}-never-committed",
            **{
                "auto.offset.reset": "earliest",
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 100,
            },
        )

    def _new_producer(self) -> Producer:
        return make_producer(
            self.topics.source_cluster,
            f"mirrorwatch-canary-{self.run_id}",
            **{
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": delivery_timeout_ms(self.settings.crit_latency_s),
            },
        )

    def _replace_fatal_producer(self) -> None:
        """An idempotent producer that raised a fatal error refuses every record from then on; librdkafka's
        remedy is a new producer. Without this the canary would say CRITICAL for good after one such error
        (a source restart can cause one), long after the mirror is fine again."""
        log.warning(
            "%s: canary producer failed for good (%s); starting a new one", self.topics.flow_name, self.producer_fatal
        )
        old, self.producer = self.producer, self._new_producer()
        old.purge()
        old.flush(0)
        self.producer_fatal, self._warmed_up = None, False

    # ------------------------------------------------------------------ probe (scheduler thread)
    def probe(self) -> None:
        with self._probing:  # stop() waits for a probe under way before it closes the clients
            if not self._stop.is_set():
                self._probe()

    def _probe(self) -> None:
        connect_s = self.settings.connect_timeout_s
        if self.producer_fatal is not None:
            self._replace_fatal_producer()
        try:
            source_partitions = self.topics.ensure_source(connect_s)
            target_partitions, created = self.topics.ensure_target(source_partitions, connect_s)
            self._assign_new(target_partitions, created, connect_s)
            self._check_reader(target_partitions, connect_s)
        except ProbeUnknown as exc:
            self._set_unknown(str(exc))
            return
        except Exception as exc:  # never let one bad round stop the service
            self._set_unknown(f"probe failed: {type(exc).__name__}: {exc}")
            return
        if not self._warmed_up:
            try:
                warm_up(self.producer, self.topics, source_partitions[0], connect_s)
            except ProbeUnknown as exc:
                self._set_unknown(str(exc))
                return
            self._warmed_up = True
        self._set_unknown(None)
        self.seq += 1
        produced_at = now_ms()
        with self.lock:
            self.tracker.sent(self.seq, source_partitions, produced_at)
        for partition in source_partitions:
            event = CanaryEvent(self.run_id, self.seq, int(produced_at), self.topics.source_alias, partition)
            try:
                self.producer.produce(
                    self.topics.source_topic,
                    key=self.run_id.encode(),
                    value=event.to_value(),
                    partition=partition,
                    timestamp=int(produced_at),
                    headers=[(CANARY_MARKER_HEADER, MARKER_VALUE)],
                    on_delivery=functools.partial(self._delivered, self.seq, partition),
                )
            except Exception as exc:  # queue full while the source is away, or a partition gone
                if isinstance(exc, KafkaException) and exc.args and exc.args[0].fatal():
                    self.producer_fatal = exc.args[0].str()
                with self.lock:
                    self.tracker.unsent(self.seq, partition, str(exc))
        self.producer.poll(0)
        metrics, labels = self.labels
        metrics.probes.labels(*labels).inc()

    def _assign_new(self, target_partitions: list[int], created: bool, connect_s: float) -> None:
        """Hand partitions the reader does not read yet to it, with start offsets fixed *before* producing."""
        new = [p for p in target_partitions if (self.topics.target_topic, p) not in self.assigned]
        heartbeat_new: list[int] = []
        if self.topics.heartbeats_expected:
            found = self.topics.partitions("target", self.topics.heartbeat_topic, connect_s) or []
            heartbeat_new = [p for p in found if (self.topics.heartbeat_topic, p) not in self.assigned]
        if not new and not heartbeat_new:
            return
        starts = (
            {p: 0 for p in new}
            if created
            else self.topics.end_offsets("target", self.topics.target_topic, new, connect_s)
        )
        beat_ends = self.topics.end_offsets("target", self.topics.heartbeat_topic, heartbeat_new, connect_s)
        assignment = [TopicPartition(self.topics.target_topic, p, o) for p, o in starts.items()]
        assignment += [TopicPartition(self.topics.heartbeat_topic, p, lookback_offset(e)) for p, e in beat_ends.items()]
        with self.lock:
            self._to_assign.extend(assignment)
            self.assigned.update((tp.topic, tp.partition) for tp in assignment)
            self._next_offset.update(((tp.topic, tp.partition), tp.offset) for tp in assignment)

    def _check_reader(self, target_partitions: list[int], connect_s: float) -> None:
        """Every ``reader_check_every_s``: has the reader left records unread that the target already holds
        (``reader_guard.reader_stuck``)? Then the reader thread replaces it before its next read."""
        now = time.monotonic()
        if not target_partitions or now - self._reader_checked_at < self.reader_check_every_s:
            return
        self._reader_checked_at = now
        try:
            ends = self.topics.end_offsets("target", self.topics.target_topic, target_partitions, connect_s)
        except ProbeUnknown:  # the probe's own requests say whether the target answers; this look starts over
            self._reader_look = None
            return
        with self.lock:
            next_ = {p: o for (t, p), o in self._next_offset.items() if t == self.topics.target_topic}
        if self._reader_look is not None and reader_stuck(*self._reader_look, next_):
            log.warning(
                "%s: the canary reader has read nothing for %g s while the target holds canary events it has not "
                "read; replacing it",
                self.topics.flow_name,
                self.reader_check_every_s,
            )
            self._renew_reader, self._reader_look = True, None
            return
        self._reader_look = (ends, next_)

    def _replace_reader(self) -> None:
        """(reader thread) A new reader, given every partition at the offset the old one would have read next."""
        with self.lock:
            self._renew_reader, self._to_assign = False, []  # everything pending is in _next_offset already
            assignment = [TopicPartition(t, p, o) for (t, p), o in self._next_offset.items()]
        self._retired_readers.append(self.reader)
        self.reader = self._new_reader()
        self.reader.assign(assignment)
        self.reader_replacements += 1

    def _delivered(self, seq: int, partition: int, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            if err.fatal() or err.code() == KafkaError._FATAL:
                self.producer_fatal = err.str()
            with self.lock:
                self.tracker.unsent(seq, partition, err.str())

    def _set_unknown(self, reason: str | None) -> None:
        with self.lock:
            if reason != self.unknown_reason and reason is not None:
                log.warning("%s: UNKNOWN %s", self.topics.flow_name, reason)
            self.unknown_reason = reason
            self._judge()

    # ------------------------------------------------------------------ reader (own thread)
    def _read_loop(self) -> None:
        while not self._stop.is_set():
            self.on_read_turn()
            try:
                self._read_once()
            except Exception as exc:  # keep reading: the clusters come back, the service must still be here
                log.warning("%s: canary reader: %s: %s", self.topics.flow_name, type(exc).__name__, exc)
                self._stop.wait(1.0)

    def _read_once(self) -> None:
        if self._renew_reader:
            self._replace_reader()
        with self.lock:
            adding, self._to_assign = self._to_assign, []
        if adding:
            self.reader.incremental_assign(adding)
        if not self.assigned:
            self._stop.wait(0.2)
            messages = []
        else:
            messages = self.reader.consume(500, 0.2)
        received = now_ms()
        self.producer.poll(0)  # delivery reports
        with self.lock:
            for msg in messages:
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                if msg.error() or topic is None or partition is None or offset is None:
                    continue
                self._next_offset[(topic, partition)] = offset + 1
                if topic == self.topics.target_topic:
                    arrival = arrival_of(msg, received)
                    if arrival is not None:
                        self.tracker.arrived(arrival)
                elif topic == self.topics.heartbeat_topic:
                    self.heartbeat.offer(msg.value(), msg.key())
            self.tracker.expire(now_ms())
            self._judge()

    # ------------------------------------------------------------------ judging (under self.lock)
    def _judge(self) -> None:
        for probe in self.tracker.take_resolved():
            if probe.overdue and probe.status == CRITICAL != self.probe_status:
                partitions, crit_s = ", ".join(map(str, probe.overdue)), self.settings.crit_latency_s
                log.warning(
                    "%s: CRITICAL probe %d: partition(s) %s not seen within %g s (overdue, still expected)",
                    *(self.name, probe.seq, partitions, crit_s),
                )
            self.probe_status = probe.status
        if (newly_lost := self.tracker.lost - self._published.get("lost", 0)) > 0:
            losses, self.tracker.losses = self.tracker.losses, []
            log.warning(
                "%s: %d canary event(s) lost: a later one of its partition came first (%s)",
                *(
                    self.name,
                    newly_lost,
                    ", ".join(f"[{p}] seq {lost} skipped, seq {came} came" for p, lost, came in losses),
                ),
            )
        metrics, labels = self.labels
        for seconds in self.tracker.take_latencies():
            metrics.round_trip.labels(*labels).observe(seconds)
        now = now_ms()
        age = self.heartbeat.age_s(now)
        heartbeat_status = CRITICAL if age is not None and age > self.settings.heartbeat_max_age_s else None
        anomaly_status = WARNING if self.tracker.anomaly_pending else None
        overdue = self.tracker.overdue_events  # CRITICAL for as long as one is, not only for the probe that found it
        overdue_status = CRITICAL if overdue else None
        if self.unknown_reason is not None:
            status = UNKNOWN
        elif self.probe_status is None and heartbeat_status is None:
            status = UNKNOWN  # no probe has resolved yet
        else:
            status = worst(self.probe_status, heartbeat_status, anomaly_status, overdue_status)
        if status != self.status:
            log.info("%s: %s → %s", self.topics.flow_name, self.status, status)
            self.status = status
        metrics.status.labels(*labels).set(EXIT_CODES[status])
        metrics.heartbeat_age.labels(*labels).set(float("nan") if age is None else age)
        metrics.overdue.labels(*labels).set(overdue)
        metrics.oldest_overdue.labels(*labels).set(self.tracker.oldest_overdue_s(now))
        for name in ("lost", "late", "duplicates", "reordered"):
            value = getattr(self.tracker, name)
            if value > self._published.get(name, 0):
                getattr(metrics, name).labels(*labels).inc(value - self._published.get(name, 0))
                self._published[name] = value

    # ------------------------------------------------------------------ life
    def start(self) -> None:
        metrics, labels = self.labels
        for name in ("lost", "late", "duplicates", "reordered", "probes"):
            getattr(metrics, name).labels(*labels)  # export zeros from the start, so rate() works at once
        metrics.status.labels(*labels).set(EXIT_CODES[UNKNOWN])
        metrics.overdue.labels(*labels).set(0)
        metrics.oldest_overdue.labels(*labels).set(0)
        self._thread.start()

    def stop(self) -> None:
        """Stop the reader thread and wait for a probe under way (both bounded), then close the clients. One still
        in use by a thread that did not end in time is left open, never closed or freed under it."""
        self._stop.set()
        probe_ended = self._probing.acquire(timeout=min(6 * self.settings.connect_timeout_s, 30.0))
        reader_ended = not join_all([self._thread], 5.0)
        if reader_ended:
            self.reader.close()
        for old in self._retired_readers:
            close_bounded(old, 1.0)
        self._retired_readers.clear()
        if probe_ended and reader_ended:  # both use the producer (produce, delivery reports)
            self.producer.purge()
            self.producer.flush(1)
        if probe_ended:
            self.topics.close()
            self._probing.release()  # a probe the scheduler started late finds the flow stopped


class CanaryService:
    def __init__(self, config: Config, flow_names: list[str]):
        self.config = config
        self.registry = CollectorRegistry()
        self.metrics = CanaryMetrics(self.registry)
        self.flows = [FlowCanary(config, name, self.metrics) for name in flow_names]
        # leader.enabled: both replicas probe (each judges its own run's events); the canary has no singleton
        # work, so the election only says which one is the leader (docs/ha.md)
        self.election = election_for(config, "canary")
        export_leader_gauge(self.election, self.registry)
        self.probes = canary_probes(self.flows, self.metrics)  # /healthz, /readyz (service_probes.py)
        probe_registry(self.probes, "canary", self.registry)
        self.metrics_server: Server | None = None
        self._stop = threading.Event()

    def run_forever(self) -> None:
        settings = self.config.canary
        self.metrics_server = serve_metrics(
            settings.metrics_host,
            settings.metrics_port,
            self.registry,
            self.probes,
            "metrics",
            "canary.metrics_port",
            3,
        )
        if self.metrics_server is not None:
            log.info("metrics on http://%s:%d/metrics", settings.metrics_host, self.metrics_server.port)
        # a probe held up by a slow cluster makes the next ones skip (max_instances=1); that is expected, not news
        logging.getLogger("apscheduler.executors.default").setLevel(logging.ERROR)
        logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)
        scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(len(self.flows) + 1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": max(1, int(settings.interval_s))},
        )
        watch_loops(self.probes, self.flows, settings.interval_s)
        for flow in self.flows:
            flow.start()
            scheduler.add_job(
                probe_job(self.probes, flow),
                "interval",
                seconds=settings.interval_s,
                next_run_time=_now(),
                id=f"probe-{flow.topics.flow_name}",
            )
        if threading.current_thread() is threading.main_thread():  # tests run the service on a thread of theirs
            signal.signal(signal.SIGTERM, lambda *_: self._stop.set())
            signal.signal(signal.SIGINT, lambda *_: self._stop.set())
        scheduler.start()
        self.election.start()
        log.info(
            "canary running: %d flow(s), a probe every %g s, critical after %g s",
            len(self.flows),
            settings.interval_s,
            settings.crit_latency_s,
        )
        try:
            while not self._stop.wait(1.0):
                if self.election.fatal:
                    raise UserError(f"leader: {self.election.fatal}", 3)
        finally:
            self.election.stop()
            scheduler.shutdown(wait=False)
            for flow in self.flows:
                flow.stop()
            if self.metrics_server is not None:
                self.metrics_server.close()
            log.info("canary stopped")


def _now() -> datetime:
    return datetime.now(UTC)
