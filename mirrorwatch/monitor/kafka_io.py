"""The monitor's reads from a cluster, one admin client per cluster: topics, end offsets, a group's committed
offsets and whether it has members. Every call is bounded by a timeout; failures raise ``ClusterUnreachable``
(the whole cluster) or come back as -1 for a single partition (e.g. a target topic not created yet)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import wait

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition

# confluent_kafka.admin imports ClusterMetadata and OffsetSpec without re-exporting them (no __all__): strict mypy
# calls them private
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec  # type: ignore[attr-defined]

from ..core.access import connection_problem, serve_callbacks
from ..core.clients import make_admin
from ..core.config import ClusterConfig
from ..core.coordinator_calls import for_cluster
from ..core.redact import redact_text

log = logging.getLogger("mirrorwatch.monitor.kafka")

TP = tuple[str, int]
# a new admin client is not renewed for a timeout before this long (ClusterReader._settled)
CLIENT_SETTLE_S = 30.0
# the second metadata request's bound (ClusterReader._list_topics): a healthy node answers a new client in ms
ASK_AGAIN_S = 3.0


class ClusterUnreachable(Exception):
    pass


def reported_reachable(failures_in_a_row: int, reached_before: bool) -> bool:
    """What a sample says of a cluster (``mirrorwatch_cluster_up``, the API's ``clusters``): unreachable once its
    metadata could not be read (asked twice, ``ClusterReader._list_topics``) in two samples in a row, or in the
    first sample of a cluster never reached (a one-shot command, a monitor starting). One failed sample of a
    cluster that answered the one before is not an outage: a rolling restart's node stopping or starting held
    both requests of one sample now and then, and the inhibit-only ``MirrorwatchFlowClusterUnreachable`` fired.
    The flow's views are UNKNOWN for that sample all the same (fail closed); only the cluster's verdict waits."""
    return failures_in_a_row == 0 or (failures_in_a_row == 1 and reached_before)


class ClusterReader:
    def __init__(self, alias: str, cluster: ClusterConfig, timeout_s: float = 5.0):
        self.alias, self.timeout_s, self._cluster = alias, timeout_s, cluster
        self.admin = self._new_admin()
        self.coordinator = for_cluster(cluster)  # describe and offsets of groups: in a helper process
        self._stale = False
        self._topics: dict[str, int] = {}
        # the newest list_topics answer (partition leaders for the hanging-transaction advice)
        self._metadata: ClusterMetadata | None = None
        self.failures_in_a_row = 0  # samples in a row whose topics() failed
        self.reached = False  # some sample read the cluster's metadata

    @property
    def reachable(self) -> bool:
        """What the newest sample says of the cluster (:func:`reported_reachable`)."""
        return reported_reachable(self.failures_in_a_row, self.reached)

    def _settled(self) -> bool:
        """The client has had time to connect: a timeout from one younger than this is its start-up, and renewing
        it then would start another, every cycle, on a slow or loaded cluster (a soak's monitor stayed UNKNOWN)."""
        return time.monotonic() - self._admin_since >= CLIENT_SETTLE_S

    def _new_admin(self) -> AdminClient:
        self._admin_since = time.monotonic()
        # short reconnect backoff: an unreachable cluster should be noticed back soon after it returns
        return make_admin(self._cluster, f"mirrorwatch-monitor-{self.alias}", **{"reconnect.backoff.max.ms": 2000})

    def _fail(self, what: str, exc: BaseException) -> ClusterUnreachable:
        # After a broker restart, a long-lived AdminClient can keep timing out on group requests while a new
        # one succeeds at once (seen with librdkafka 2.16 and a restarted single-broker cluster). So after
        # any failure the next cycle starts with a fresh client.
        self._stale = True
        serve_callbacks(self.admin)  # a failed SASL/TLS handshake is only reported to the error callback
        problem = connection_problem(self._cluster.bootstrap_servers, self.alias)
        return ClusterUnreachable(problem or f"cluster '{self.alias}': {what}: {redact_text(str(exc))}")

    def topics(self) -> dict[str, int]:
        """{topic: partition count} of every topic the cluster lists. Called first in every cycle."""
        if self._stale:
            self.admin, self._stale = self._new_admin(), False
        try:
            md = self._list_topics()
        except KafkaException as exc:
            self.failures_in_a_row += 1
            raise self._fail("cannot list topics", exc) from None
        self.reached, self.failures_in_a_row = True, 0
        self._topics = {name: len(t.partitions) for name, t in md.topics.items() if t.error is None}
        self._metadata = md
        return self._topics

    def _list_topics(self) -> ClusterMetadata:
        """The cluster's metadata. A request that timed out or lost its connection is asked again, once, of a new
        client: one sent to a node just starting a clean shutdown is never answered (its request handlers stop
        first) or fails with the connection, while the other nodes would answer, and a new client cannot connect to
        that node any more. One such failure made a three-node cluster in a rolling restart "unreachable" for a
        sample. A cluster that is really away fails both (a refused connection at once)."""
        try:
            return self.admin.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not (_timed_out(exc) or (isinstance(err, KafkaError) and err.code() == KafkaError._TRANSPORT)):
                raise
            log.info("cluster '%s': listing topics: %s; asking a new client", self.alias, redact_text(str(exc)))
        self.admin = self._new_admin()
        return self.admin.list_topics(timeout=min(self.timeout_s, ASK_AGAIN_S))

    def leaders(self, partitions: Iterable[TP]) -> dict[TP, int]:
        """Leader broker ids, from the metadata this cycle's topics() read (no new request); a partition without
        a known leader is left out."""
        topics = self._metadata.topics if self._metadata is not None else {}
        out: dict[TP, int] = {}
        for t, p in partitions:
            meta = topics[t].partitions.get(p) if t in topics else None
            if meta is not None and meta.leader >= 0:
                out[(t, p)] = meta.leader
        return out

    def end_offsets(self, partitions: Iterable[TP]) -> dict[TP, int]:
        """Log-end offsets (high watermarks); -1 for a partition that could not be read."""
        return self._offsets(partitions, OffsetSpec.latest())  # type: ignore[no-untyped-call]  # unannotated upstream

    def stable_end_offsets(self, partitions: Iterable[TP]) -> dict[TP, int]:
        """Last stable offsets (what a read_committed reader's end is: below the first record of a transaction
        still open); -1 for a partition that could not be read. Below the end offset = a transaction is open."""
        return self._offsets(
            partitions,
            OffsetSpec.latest(),  # type: ignore[no-untyped-call]  # unannotated upstream
            isolation_level=IsolationLevel.READ_COMMITTED,
        )

    def start_offsets(self, partitions: Iterable[TP]) -> dict[TP, int]:
        """Log-start offsets (the oldest offset still there); -1 for a partition that could not be read."""
        return self._offsets(partitions, OffsetSpec.earliest())  # type: ignore[no-untyped-call]  # unannotated upstream

    def _offsets(
        self, partitions: Iterable[TP], spec: OffsetSpec, isolation_level: IsolationLevel | None = None
    ) -> dict[TP, int]:
        wanted = list(partitions)
        if not wanted:
            return {}
        request = {TopicPartition(t, p): spec for t, p in wanted}
        options = {} if isolation_level is None else {"isolation_level": isolation_level}
        try:
            futures = self.admin.list_offsets(request, request_timeout=self.timeout_s, **options)
        except KafkaException as exc:
            raise self._fail("cannot list offsets", exc) from None
        # one deadline for the whole request: waited partition by partition, answers that never came cost a
        # timeout each, and a cycle over many partitions stood still for minutes
        _, late = wait(list(futures.values()), timeout=self.timeout_s + 1)
        out: dict[TP, int] = {}
        failures = 0
        for tp, future in futures.items():
            try:
                if future in late:
                    raise TimeoutError("no answer within the request timeout")
                out[(tp.topic, tp.partition)] = future.result(0).offset
            except Exception as exc:  # one missing partition (topic not there yet) must not sink the rest
                out[(tp.topic, tp.partition)] = -1
                failures += 1
                self._stale = self._stale or (_timed_out(exc) and self._settled())
        if failures == len(wanted) and not self._reachable():
            raise ClusterUnreachable(f"cluster '{self.alias}': no end offset could be read")
        return out

    def group(self, group: str) -> tuple[int | None, dict[TP, int] | None]:
        """(members now, committed offsets) of a group. Members: None when it cannot be told (members mean a
        live, subscribed consumer). Offsets: {} when the group has none, None when unknown to the cluster or
        its coordinator is not available yet.

        Both are coordinator requests, which librdkafka 2.16 can abort the process on when a broker drops: they go
        through the cluster's helper process (core.coordinator_calls). Offsets are only asked for after the
        describe — which fails cleanly on a fresh cluster — has reached the coordinator (an OffsetFetch there
        ended its process with SIGSEGV).
        """
        try:
            members = len(self.coordinator.describe_group(group, self.timeout_s).members)
        except Exception as exc:
            err = exc.args[0] if exc.args else None
            if "__consumer_offsets" not in self._topics and (
                isinstance(err, KafkaError) and err.code() == KafkaError.COORDINATOR_NOT_AVAILABLE
            ):
                return None, None  # a fresh cluster: no group has ever committed here
            # anything else is not "no such group": an authorization error, a timeout or a helper that died says
            # nothing about the group, so the view is UNKNOWN with what could not be read (fail closed), never
            # NOTFOUND or OK. (A principal without DESCRIBE on __consumer_offsets does not see it listed: the
            # metadata alone cannot tell a fresh cluster, so the coordinator's answer decides.)
            raise self._fail(f"cannot describe group '{group}'", exc) from None
        try:
            return members, self.coordinator.committed_offsets(group, self.timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() in (KafkaError.GROUP_ID_NOT_FOUND,):
                return members, None
            raise self._fail(f"cannot read offsets of group '{group}'", exc) from None
        except Exception as exc:  # a timeout, or the helper died
            raise self._fail(f"cannot read offsets of group '{group}'", exc) from None

    def _reachable(self) -> bool:
        try:
            self.admin.list_topics(timeout=min(self.timeout_s, 2.0))
            return True
        except KafkaException:
            return False


def _timed_out(exc: BaseException) -> bool:
    """A request librdkafka let time out, or never answered: after a broker's restart a long-lived admin client
    can go on doing so while a new one is answered at once (see ClusterReader._fail), so the next cycle starts
    with a new one. A partition that is not there (a topic not created yet) is no reason to."""
    if isinstance(exc, TimeoutError):
        return True
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(err, KafkaError) and err.code() in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT)
