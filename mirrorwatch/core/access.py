"""Authentication, TLS and authorisation failures, each told as one line the user can act on.

librdkafka does not fail a request when a SASL handshake or a TLS handshake fails: it reports the failure to
the client's error callback and keeps retrying, so the request itself later looks like a timeout ("cannot
reach"). The shared error callback (``core.clients``) therefore records such failures here, per bootstrap
address, and the commands ask for them before blaming the network.

A refused request (no ACL) does fail, with ``*_AUTHORIZATION_FAILED``; :func:`denied_line` turns it into
"not authorised to WRITE topic east.orders on cluster 'west' (principal User:mirror): grant it (see
docs/security.md)". The operation is what the caller was doing: the broker's answer does not say.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from .redact import redact_text

DOC = "docs/security.md"

AUTHENTICATION_CODES = {KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
TLS_CODES = {KafkaError._SSL}
DENIED_RESOURCE = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
}

_lock = threading.Lock()
_failures: dict[str, tuple[str, str]] = {}  # bootstrap.servers → (kind, librdkafka's reason)
_aliases: dict[str, str] = {}  # bootstrap.servers → cluster alias (registered when a config is loaded)
_users: dict[str, str | None] = {}  # bootstrap.servers → sasl.username


class AccessProblem(Exception):
    """Authentication, TLS or an ACL: not transient, so no retry helps. ``exit_code`` None = the tool's default."""

    def __init__(self, line: str, exit_code: int | None = None):
        super().__init__(line)
        self.exit_code = exit_code


class Denied(Exception):
    """An authorisation failure whose operation and resource are known where it happened; the cluster (by its
    role, "source" or "target") is named by whoever catches it."""

    def __init__(self, operation: str, resource_type: str, resource: str, role: str):
        super().__init__(f"not authorised to {operation} {resource_type} {resource} on the {role} cluster")
        self.operation, self.resource_type, self.resource, self.role = operation, resource_type, resource, role


def raise_if_denied(exc: BaseException, operation: str, resource_type: str, resource: str, role: str) -> None:
    """Denied when ``exc`` refuses this kind of resource (a topic request refused for a *group* is something else,
    e.g. an assign()-only consumer's coordinator lookup, which does not stop it from reading)."""
    err = error_of(exc)
    if err is not None and DENIED_RESOURCE.get(err.code()) == resource_type:
        raise Denied(operation, resource_type, resource, role) from None


def register_cluster(alias: str, properties: dict[str, str]) -> None:
    bootstrap = properties.get("bootstrap.servers", "")
    with _lock:
        _aliases[bootstrap] = alias
        _users[bootstrap] = properties.get("sasl.username")


def principal_of(properties: dict[str, str]) -> str:
    """The principal the broker sees: the SASL user, or ANONYMOUS without SASL (mTLS aside)."""
    user = properties.get("sasl.username")
    return f"User:{user}" if user and "SASL" in properties.get("security.protocol", "").upper() else "User:ANONYMOUS"


def kind_of(err: KafkaError) -> str | None:
    code = err.code()
    if code in AUTHENTICATION_CODES:
        return "authentication"
    if code in TLS_CODES or "SSL handshake failed" in err.str() or "certificate verify failed" in err.str():
        return "tls"
    return None


def record_client_error(bootstrap: str, err: KafkaError) -> str | None:
    """Called from the clients' error callback; returns the kind when it was an authentication/TLS failure."""
    kind = kind_of(err)
    if kind is not None:
        reason = redact_text(err.str())
        with _lock:
            # librdkafka reports one failed TLS handshake in two wordings, the longer with its hint ("broker
            # certificate could not be verified, verify that ssl.ca.location ..."), in either order: keep that one
            known = _failures.get(bootstrap)
            if known is None or known[0] != kind or len(_short(reason)) >= len(_short(known[1])):
                _failures[bootstrap] = (kind, reason)
    return kind


def forget(bootstrap: str | None = None) -> None:
    with _lock:
        if bootstrap is None:
            _failures.clear()
        else:
            _failures.pop(bootstrap, None)


def connection_problem(bootstrap: str, alias: str | None = None) -> str | None:
    """The one line for a recorded authentication or TLS failure at this address, or None."""
    with _lock:
        found = _failures.get(bootstrap)
        alias = alias or _aliases.get(bootstrap)
        user = _users.get(bootstrap)
    if found is None:
        return None
    kind, reason = found
    where = f"cluster '{alias}' at {bootstrap}" if alias else f"the cluster at {bootstrap}"
    reason = _short(reason)
    if kind == "authentication":
        who = f" as user '{user}'" if user else ""
        return (
            f"authentication failed on {where}{who}: {reason}; check sasl.username, sasl.password and "
            f"sasl.mechanism (see {DOC})"
        )
    return (
        f"TLS handshake with {where} failed: {reason}; check ssl.ca.location (the CA that signed the broker's "
        f"certificate) (see {DOC})"
    )


def any_connection_problem() -> str | None:
    with _lock:
        addresses = list(_failures)
    return connection_problem(addresses[0]) if addresses else None


_BROKER_PREFIX = re.compile(r"^[a-z_]+://[^ ]+/(bootstrap|\d+): ")


def _short(reason: str) -> str:
    # librdkafka names the broker connection first ("sasl_ssl://127.0.0.1:9093/bootstrap: ") and appends state
    # and repeat counts ("(after 12ms in state AUTH_REQ, 3 identical error(s) suppressed)"); the line says both
    reason = _BROKER_PREFIX.sub("", reason.strip())
    for marker in (" (after ", " (in state "):
        if marker in reason:
            reason = reason.split(marker)[0]
    return reason.strip()


def error_of(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    if isinstance(exc, KafkaError):
        return exc
    return None


def is_denied(err: KafkaError | BaseException | None) -> bool:
    if err is not None and not isinstance(err, KafkaError):
        err = error_of(err)
    return err is not None and err.code() in DENIED_RESOURCE


def denied_line(operation: str, resource_type: str, resource: str, alias: str, principal: str) -> str:
    target = "the cluster resource" if resource_type == "cluster" else f"{resource_type} {resource}"
    return f"not authorised to {operation} {target} on cluster '{alias}' (principal {principal}): grant it (see {DOC})"


def denied(
    operation: str,
    resource_type: str,
    resource: str,
    alias: str,
    properties: dict[str, str],
    exit_code: int | None = None,
) -> AccessProblem:
    return AccessProblem(denied_line(operation, resource_type, resource, alias, principal_of(properties)), exit_code)


def wait_for_connection(admin: Any, bootstrap: str, alias: str, timeout_s: float) -> bool:
    """Ask for metadata until it comes (True), an authentication/TLS failure is recorded (AccessProblem), or
    ``timeout_s`` passes (False: unreachable, or too slow; the caller decides what that means).

    Short requests in a loop rather than one long one: a failed handshake would otherwise cost the whole timeout.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        problem = connection_problem(bootstrap, alias)
        if problem:
            raise AccessProblem(problem)
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            if admin.list_topics(timeout=min(1.0, left)).brokers:
                forget(bootstrap)  # an earlier failure (e.g. before a credential was fixed) is history now
                return True
        except KafkaException:
            pass
        serve_callbacks(admin)


def serve_callbacks(client: Any) -> None:
    """Error callbacks are served only by poll(): an admin client that is never polled never reports a failed
    handshake. Call before deciding a cluster is unreachable."""
    try:
        client.poll(0)
    except Exception:  # a closed or odd client: nothing to serve
        pass
