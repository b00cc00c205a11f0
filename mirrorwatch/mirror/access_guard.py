"""The mirror engine's access checks (credentials, TLS, ACLs), a mix-in of MirrorEngine.

A missing ACL cannot be waited out: the engine stops (committing what was acknowledged) and exits 1 with one
line naming the operation, resource, cluster and principal (core.access). Failed handshakes are checked first
at start, because they would otherwise surface only as a metadata timeout.
"""

from __future__ import annotations

import logging

from ..core.access import AccessProblem, Denied, wait_for_connection
from ..core.access import denied as access_denied
from .acknowledgement import RecordFailure
from .engine_state import EngineState
from .topics import check_named_topics

log = logging.getLogger("mirrorwatch.mirror")

ACCESS_CHECK_S = (
    10.0  # at start: how long to wait for each cluster's first metadata (a failed handshake ends it sooner)
)


class EngineAccess(EngineState):
    access_problem: AccessProblem | None = None  # an ACL or credential problem: stop, say it, exit 1

    def _as_problem(self, denied: Denied) -> AccessProblem:
        alias = self.flow.source if denied.role == "source" else self.flow.target
        cluster = self.source_cluster if denied.role == "source" else self.target_cluster
        return access_denied(denied.operation, denied.resource_type, denied.resource, alias, cluster.properties)

    def deny(self, denied: Denied) -> None:
        """From any thread: an ACL is missing. The engine stops (committing what was acknowledged) and exits 1
        with one line naming the operation and resource; retrying cannot make an ACL appear."""
        if self.access_problem is None:
            self.access_problem = self._as_problem(denied)
            log.error("%s", self.access_problem)
        self._stop.set()

    def _check_access(self) -> None:
        """Credentials and TLS first: a failed handshake would otherwise surface as a metadata timeout."""
        for alias, cluster, admin in (
            (self.flow.source, self.source_cluster, self.source_admin),
            (self.flow.target, self.target_cluster, self.target_admin),
        ):
            wait_for_connection(admin, cluster.bootstrap_servers, alias, ACCESS_CHECK_S)
        check_named_topics(self.source_admin, self.flow, {self.settings.heartbeats_topic, self.config.canary.topic})

    def denied_write_message(self, failures: list[RecordFailure]) -> str | None:
        """The line for a record refused for want of WRITE on its target topic (None for any other failure)."""
        if failures and failures[0].error_name.endswith("_AUTHORIZATION_FAILED"):
            return str(self._as_problem(Denied("WRITE", "topic", failures[0].target_topic, "target")))
        return None
