"""The engine's start-up and background threads, and how it behaves while a cluster is away (a mixin of
MirrorEngine, kept apart so engine.py stays about the data path)."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from ..core.access import Denied, wait_for_connection
from ..core.client_set import join_all, settle
from ..core.clients import make_admin
from ..core.coordinator_calls import close_all as close_coordinator_calls
from ..core.coordinator_calls import for_cluster
from ..core.probes import LIVENESS_FLOOR_S, ProbeState
from .engine_state import EngineState
from .heartbeat import HeartbeatProducer, ensure_heartbeats_topic
from .outage import ClusterWatch, start_when_reachable
from .own_topics import ensure_own_topics, matched_topics, other_consumers, report_shared, warn_if_legacy_group

log = logging.getLogger("mirrorwatch.mirror")

# /healthz: the start-up steps chain bounded admin calls (30 s each) and back off up to 15 s while a cluster is
# away, so they are called wedged only after this long without progress; the data loop turns many times a second.
START_UP_STALE_S = 180.0
DATA_PATH_STALE_S = LIVENESS_FLOOR_S
# at shutdown, how long the heartbeat, checkpoint and topic threads may take to end their current client call
BACKGROUND_JOIN_S = 10.0
# a shutdown step that takes longer says so: a stop that outlasts its grace period (systemd's TimeoutStopSec, the
# pod's terminationGracePeriodSeconds) ends in SIGKILL, and the log then says which step held it
SLOW_STEP_S = 2.0


class EngineLifecycle(EngineState):
    def _init_lifecycle(self) -> None:
        # /healthz, /readyz: a cluster has answered once the watch's metadata probe succeeded (outage.py)
        self.probes = ProbeState([self.flow.source, self.flow.target])
        self.probes.config_loaded()
        self.probes.watch("start-up", START_UP_STALE_S)
        self.heartbeats = None  # a HeartbeatProducer once started
        self.checkpoints = None
        self.topics_thread = None  # the topic refresh (subscription.py), once started
        self.matched_topics: int | None = None  # the flow's own topics on the source (None: not listed yet)
        self.shared_with: list[str] | None = None  # other groups mirroring our internal topics (None: not looked)
        self.gave_up: str | None = None  # why the engine stopped waiting for a cluster (mirror.max_unreachable_s)
        self.watch = ClusterWatch(
            [("source", self.flow.source, self.source_cluster), ("target", self.flow.target, self.target_cluster)],
            self.settings.max_unreachable_s,
            self._give_up,
            on_probe=self.probes.answered,
        )

    def _topics_listed(self, ready: list[str], with_configs: bool) -> None:
        """After each topic refresh: does the flow match anything, and does another flow mirror our internal topics?"""
        self.matched_topics = matched_topics(
            self.flow_name, self.flow, ready, self.internal_topics, self.matched_topics is None
        )
        if with_configs:  # as often as configs are synced (a group listing is not free)
            calls = for_cluster(self.source_cluster)
            others = other_consumers(self.source_admin, calls, self.group, self.internal_topics)
            self.shared_with = report_shared(self.flow_name, self.flow, others, self.shared_with)

    def _prepare(self) -> None:
        """The start-up steps that talk to the clusters; idempotent, so retried while a cluster is away.
        Credentials and ACLs are checked first: a refusal ends the run with one line (engine.deny), never a wait."""
        try:
            self._check_access()
            if self.exactly_once:
                self._init_transactions()  # transactions.py: a refused transactional id stops here
            self.target_topics.ensure_internal()
            if self.settings.heartbeats:
                ensure_heartbeats_topic(self.source_cluster, self.settings.heartbeats_topic)
            ensure_own_topics(self.config, self.flow, self.policy, self.source_admin, self.target_admin)
            warn_if_legacy_group(self.source_admin, self.flow_name, self.flow, self.group)
            self.refresh_topics(with_configs=True)
        except Denied as denied:
            raise self._as_problem(denied) from None

    def _check_credentials(self) -> None:
        """From the start-up thread, on the engine's own admin clients: a recorded authentication or TLS failure
        raises AccessProblem (one line, exit 1); otherwise nothing (an outage is the watch's to report)."""
        for alias, cluster, admin in (
            (self.flow.source, self.source_cluster, self.source_admin),
            (self.flow.target, self.target_cluster, self.target_admin),
        ):
            wait_for_connection(admin, cluster.bootstrap_servers, alias, 1.0)

    def _renew_admin_clients(self) -> None:
        """Fresh admin clients for the start-up steps and the topic refresh (see start_when_reachable)."""
        self.source_admin = make_admin(self.source_cluster, "mirrorwatch-mirror-admin")
        self.target_admin = make_admin(self.target_cluster, "mirrorwatch-mirror-admin")
        self.target_topics.source_admin, self.target_topics.target_admin = self.source_admin, self.target_admin

    def _give_up(self, message: str) -> None:
        self.gave_up = message
        self._stop.set()

    def start_background(self) -> bool:
        self.watch.start()
        tick = functools.partial(self.probes.tick, "start-up")
        if not start_when_reachable(
            self._prepare, self.watch, self._stop, self._check_credentials, self._renew_admin_clients, tick
        ):
            return False
        if self.settings.heartbeats:
            self.heartbeats = HeartbeatProducer(
                self.source_cluster,
                self.settings.heartbeats_topic,
                self.flow.source,
                self.flow.target,
                self.settings.heartbeat_interval_s,
                self._heartbeat_sent,
                on_denied=self.deny,
            )
            self.heartbeats.start()
        self.topics_thread = threading.Thread(target=self._topic_loop, name="topics", daemon=True)
        self.topics_thread.start()
        if self.flow.checkpoint_groups:
            from .checkpoints import CheckpointEmitter

            self.checkpoints = CheckpointEmitter(
                self.config, self.flow_name, owned=lambda: self.owned, all_up=self.watch.all_up, on_denied=self.deny
            )
            self.checkpoints.start()
        self.probes.unwatch("start-up")  # from here the data loop ticks (engine.run)
        self.probes.watch("data path", DATA_PATH_STALE_S)
        self.probes.cycle_done()
        return True

    def _heartbeat_sent(self) -> None:
        self.heartbeats_sent += 1

    def _retrying(self, message: str, *args: object) -> None:
        # while the watch reports a cluster away it has said so once; its retries are not news
        log.log(logging.WARNING if self.watch.all_up() else logging.DEBUG, message, *args)

    def _end_background(self) -> None:
        """At shutdown, join the threads that use the engine's clients (each was told to stop), then wait out the
        admin clients' requests: none is inside a client call, nor has a request outstanding, when the clients
        are closed and freed (docs/design.md, "Teardown")."""
        running = join_all([self.heartbeats, self.checkpoints, self.topics_thread], BACKGROUND_JOIN_S)
        if running:
            log.warning("still running %g s after the stop (not waited for longer): %s", BACKGROUND_JOIN_S, running)
        settle([self.source_admin, self.target_admin])

    def _shutdown(self) -> None:
        """Stop in a defined order, each step bounded (docs/design.md, "Teardown"); a slow step is named."""
        self._stop.set()  # also after an exception: nothing below may wait for a cluster as if still running
        if self.heartbeats:
            self.heartbeats.stop()
        if self.checkpoints:
            self.checkpoints.stop()
        _timed("flushing what is in flight", self._flush_in_flight)
        self.watch.stop()
        _timed("joining the background threads and settling the admin clients", self._end_background)
        _timed("the last commit", self._last_commit)
        _timed("flushing the producer", self._flush_producer)
        _timed("closing the consumer", self._close_consumer)
        _timed("stopping the coordinator-call helpers", close_coordinator_calls)

    def _flush_in_flight(self) -> None:
        remaining = self._flush(8)
        if remaining:
            log.warning(
                "%d record(s) still unacknowledged at shutdown; they stay uncommitted and will be re-sent", remaining
            )

    def _last_commit(self) -> None:
        if self.exactly_once:
            self._close_transactions()  # commit what was written if the target can check it, else abort
            return
        if self.watch.up["source"]:  # a commit to a source that is away would block; the records come again
            self.publisher.commit()
        self.publisher.emit_syncs()

    def _flush_producer(self) -> None:
        try:
            self.producer.flush(2)
        except Exception as exc:  # a producer failed fatally (exactly-once: fenced) has nothing left to flush
            log.debug("flushing the producer at shutdown: %s", exc)

    def _close_consumer(self) -> None:
        try:
            self.consumer.close()
        except Exception as exc:
            log.warning("closing the consumer: %s", exc)


def _timed(what: str, step: Callable[[], None]) -> None:
    started = time.monotonic()
    step()
    took = time.monotonic() - started
    if took > SLOW_STEP_S:
        log.info("shutdown: %s took %.1f s", what, took)
