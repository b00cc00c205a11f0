"""Clusters that vanish or freeze: the mirror waits them out instead of dying.

A broker that is stopped, restarted, partitioned away or frozen (SIGSTOP, a long GC pause) is a transient
outage: librdkafka reconnects by itself and the engine's data path only sees fewer records or slower
acknowledgements. What used to kill the mirror were the bounded admin calls at start (30 s metadata requests)
and nothing said whether a cluster was there. This module:

- probes each cluster with a small bounded metadata request on its own thread (``ClusterWatch``), logs ONE
  line per state change (unreachable / reachable again) per cluster, never one per retry, and exposes
  ``up`` for the ``mirrorwatch_mirror_cluster_up`` gauge;
- retries the engine's start-up steps with backoff while the failure is transient (``start_when_reachable``);
  a non-retriable error (authorization, a bad setting) still ends the run at once, as before;
- with ``mirror.max_unreachable_s`` set, gives up after that long unreachable: one line, exit code 3.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from ..core.clients import make_admin
from ..core.config import ClusterConfig

log = logging.getLogger("mirrorwatch.mirror")

PROBE_INTERVAL_S = 2.0
PROBE_TIMEOUT_S = 5.0  # a frozen broker accepts the connection and never answers: this bounds the wait
# Longer than a broker's restart or a thawed cluster settling: a probe client stuck this long is asked about.
SECOND_OPINION_AFTER_S = 20.0
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)  # between start-up attempts; the last one repeats
UNREACHABLE_EXIT = 3

# Errors that mean "the cluster is not answering now", not "this can never work".
_TRANSIENT = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._RESOLVE,
    KafkaError._MSG_TIMED_OUT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_CONTROLLER,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.BROKER_NOT_AVAILABLE,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError._WAIT_COORD,
    KafkaError._DESTROY,
}


def second_opinion_due(
    down_since: float | None, last_opinion: float | None, now: float, after_s: float = SECOND_OPINION_AFTER_S
) -> bool:
    """Whether a failing client should also be asked of a new one: once it has failed for ``after_s``, and again
    every ``after_s`` while it keeps failing (the watch's probes; the heartbeat producer's deliveries)."""
    if down_since is None or now - down_since < after_s:
        return False
    return last_opinion is None or last_opinion < down_since or now - last_opinion >= after_s


class ClustersUnreachable(Exception):
    """A cluster stayed unreachable longer than ``mirror.max_unreachable_s``."""


def is_transient(exc: BaseException) -> bool:
    """A Kafka error worth waiting out (a timeout or a broker away), as opposed to one that will not heal."""
    if isinstance(exc, TimeoutError):
        return True
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if not isinstance(err, KafkaError):
        return False
    if err.fatal():
        return False
    if err.code() == KafkaError.INVALID_REPLICATION_FACTOR and "fenced" in err.str():
        # KRaft's "All brokers are currently fenced": a broker just restarted or thawed has not been let back in
        # yet (seconds). Any other replication factor the cluster cannot meet will not heal by waiting.
        return True
    return err.code() in _TRANSIENT or err.retriable()


def _reason(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    return err.str() if isinstance(err, KafkaError) else (str(exc) or type(exc).__name__)


class ClusterWatch:
    """Is each cluster answering? One bounded metadata request per cluster every ``interval_s``.

    ``clusters`` is [(role, alias, cluster config)]. ``on_give_up(message)`` is called once when a cluster has
    been unreachable for ``max_unreachable_s`` (None: never give up).
    """

    def __init__(
        self,
        clusters: list[tuple[str, str, ClusterConfig]],
        max_unreachable_s: float | None = None,
        on_give_up: Callable[[str], None] | None = None,
        interval_s: float = PROBE_INTERVAL_S,
        timeout_s: float = PROBE_TIMEOUT_S,
        on_probe: Callable[[str, bool], None] | None = None,
    ):
        self.clusters = clusters
        self.max_unreachable_s = max_unreachable_s
        self.on_give_up = on_give_up or (lambda message: None)
        self.on_probe = on_probe or (lambda alias, answered: None)  # (alias, answered): the /readyz state
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self.up: dict[str, bool] = {role: True for role, _, _ in clusters}  # assumed up until a probe says otherwise
        self.down_since: dict[str, float] = {}
        self.outages: dict[str, int] = {role: 0 for role, _, _ in clusters}
        self.last_error: dict[str, BaseException] = {}  # the newest failed probe's error, per role
        # when the probe whose answer stands was asked, per role: an older probe's late answer is not news
        self._asked_at: dict[str, float] = {}
        self._admins = {role: self._make_probe_admin(cluster) for role, _, cluster in clusters}
        self._retired_admins: list[object] = []  # replaced probe clients, kept: see _second_opinion
        self._second_opinion_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._gave_up = False
        self._thread: threading.Thread | None = None

    def all_up(self) -> bool:
        return all(self.up.values())

    def _make_probe_admin(self, cluster: ClusterConfig) -> AdminClient:
        timeout_ms = int(self.timeout_s * 1000)
        return make_admin(
            cluster,
            "mirrorwatch-mirror-probe",
            **{
                "socket.timeout.ms": timeout_ms,
                "socket.connection.setup.timeout.ms": timeout_ms,
                "reconnect.backoff.max.ms": 1000,
            },
        )

    def _ask(self, admin: AdminClient) -> tuple[bool, str, BaseException | None]:
        try:
            metadata = admin.list_topics(timeout=self.timeout_s)
            return bool(metadata.brokers), "no brokers in the metadata answer", None
        except Exception as exc:  # KafkaException (timeout, transport, authentication) or anything the client raises
            return False, _reason(exc), exc

    def probe(self, role: str) -> bool:
        """Ask the cluster once; its answer is recorded unless a probe asked later has answered already.

        Why the order matters: the watch's thread and the start-up steps probe the same cluster at once. A probe
        asked while the cluster was frozen times out up to ``timeout_s`` after the thaw, when a probe asked after
        the thaw may have been answered already; recorded last, that old timeout would say "unreachable" right
        after "reachable again", for an outage that had ended."""
        asked_at = time.monotonic()
        ok, reason, error = self._ask(self._admins[role])
        if not ok and error is not None and is_transient(error):
            ok = self._second_opinion(role)
        if not self.mark(role, ok, reason, asked_at):
            return ok
        if ok or error is None:
            self.last_error.pop(role, None)
        else:
            self.last_error[role] = error
        self.on_probe(self._where(role)[0], ok)
        return ok

    def _second_opinion(self, role: str) -> bool:
        """After ``SECOND_OPINION_AFTER_S`` of failed probes, ask a new client too; if it answers, it replaces the
        watch's own client, which is stuck.

        Why: librdkafka (2.16) forgets a broker that a metadata answer leaves out, and a KRaft broker fenced by its
        controller right after a thaw is left out for a moment; a client that asked then knows no broker and never
        asks again (confluentinc/librdkafka#5301). The watch's client stayed 'unreachable' for good after such a
        thaw, and the mirror, which starts only once both clusters answer, never started. The stuck client is kept
        referenced, never destroyed (destroying one was the first suspect of a crash); that happens once per such
        thaw, not once per probe. A new client that gets no answer either is an outage, and is let go at once."""
        now = time.monotonic()
        with self._lock:  # the watch's thread and the start-up steps both probe: one opinion at a time
            if not second_opinion_due(self.down_since.get(role), self._second_opinion_at.get(role), now):
                return False
            self._second_opinion_at[role] = now
        cluster = next(cluster for r, _, cluster in self.clusters if r == role)
        fresh = self._make_probe_admin(cluster)
        answered, _, _ = self._ask(fresh)
        if not answered:
            return False
        alias, bootstrap = self._where(role)
        log.warning(
            "%s cluster '%s' at %s answers a new client but not the cluster watch's own; replacing that client",
            role,
            alias,
            bootstrap,
        )
        with self._lock:
            self._retired_admins.append(self._admins[role])
            self._admins[role] = fresh
        return True

    def mark(self, role: str, ok: bool, reason: str = "", asked_at: float | None = None) -> bool:
        """Record a cluster's state; log only when it changes. ``asked_at``: when the answer's probe was asked
        (monotonic); an answer to a probe asked before the one already recorded is left out. Returns whether
        it was recorded."""
        alias, bootstrap = self._where(role)
        now = time.monotonic()
        asked_at = now if asked_at is None else asked_at
        with self._lock:
            if asked_at < self._asked_at.get(role, asked_at):
                return False
            self._asked_at[role] = asked_at
            was_up = self.up[role]
            self.up[role] = ok
            if ok and not was_up:
                away = now - self.down_since.pop(role, now)
                log.warning(
                    "%s cluster '%s' at %s is reachable again after %.0f s; resuming", role, alias, bootstrap, away
                )
            elif not ok and was_up:
                self.down_since[role] = now
                self.outages[role] += 1
                log.warning(
                    "%s cluster '%s' at %s is unreachable (%s); waiting for it, retrying with backoff",
                    role,
                    alias,
                    bootstrap,
                    reason,
                )
            since = self.down_since.get(role)
        if (
            not ok
            and since is not None
            and self.max_unreachable_s is not None
            and not self._gave_up
            and now - since >= self.max_unreachable_s
        ):
            self._gave_up = True
            self.on_give_up(
                f"{role} cluster '{alias}' at {bootstrap} has been unreachable for {now - since:.0f} s "
                f"(mirror.max_unreachable_s = {self.max_unreachable_s:g}); giving up"
            )
        return True

    def _where(self, role: str) -> tuple[str, str]:
        for r, alias, cluster in self.clusters:
            if r == role:
                return alias, cluster.bootstrap_servers
        raise KeyError(role)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cluster-watch", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for role, _, _ in self.clusters:
                if self._stop.is_set():
                    return
                self.probe(role)
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            # a probe inside the client library while the interpreter exits can crash the process: wait it out
            self._thread.join(self.timeout_s + 1)


def start_when_reachable(
    start: Callable[[], None],
    watch: ClusterWatch,
    stopping: threading.Event,
    credentials: Callable[[], None] | None = None,
    renew_clients: Callable[[], None] | None = None,
    tick: Callable[[], None] = lambda: None,
) -> bool:
    """Run the engine's start-up steps (idempotent) once both clusters answer, retrying with backoff.

    The clusters are probed first (bounded, 5 s) so that a cluster that is away costs no 30 s admin timeouts
    and ``mirror.max_unreachable_s`` is honoured promptly. Returns False when ``stopping`` was set before the
    steps succeeded. A non-transient error propagates (exit, as before).

    When the steps fail transiently although the watch's own clients just had answers from both clusters, the
    steps' clients are replaced (``renew_clients``) before the next attempt: a client created while a broker was
    frozen was once seen failing every request with "transport failure" for minutes after the broker was back.
    ``tick`` is called between the steps: waiting out a cluster is progress, not a wedge (/healthz).
    """
    attempt = 0
    while not stopping.is_set():
        tick()
        if credentials is not None:
            credentials()  # a failed SASL/TLS handshake looks like an outage: said at once instead (AccessProblem)
        answered = [watch.probe(role) for role, _, _ in watch.clusters]  # probe both, every time
        tick()
        for error in list(watch.last_error.values()):
            if not is_transient(error):  # e.g. authentication or TLS: waiting will not heal it
                raise error
        if all(answered):
            try:
                start()
                return True
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("start-up step failed transiently (will retry): %s", _reason(exc))
                if renew_clients is not None:
                    renew_clients()
        stopping.wait(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)])
        attempt += 1
    return False
