"""A Kafka Connect cluster's REST API, read only: the state of MirrorMaker 2's connectors and their tasks.

``GET /connectors/{name}/status`` (the name URL-quoted: Strimzi names them ``src->dst.MirrorSourceConnector``)
answers ``{"name", "connector": {"state", "worker_id", "trace"?}, "tasks": [{"id", "state", "worker_id",
"trace"?}], "type"}``. The states are Connect's own (``AbstractStatus.State`` in connect-runtime 4.x:
UNASSIGNED, RUNNING, PAUSED, FAILED, DESTROYED, RESTARTING, STOPPED); ``UNKNOWN`` is mirrorwatch's, for a
connector the API did not describe (unreachable, refused, not found, not JSON), with a one-line reason.

:func:`parse_status` is pure (tested on JSON captured from a real worker); :class:`ConnectRestClient` does the
GET. Credentials go in the ``Authorization`` header, never in the URL, and every reason is redacted anyway (a
library's error text may quote what it was given).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote

from .config_mm2 import ConnectRestSettings
from .redact import MASK, redact_text

# Connect's states (connect-runtime 4.x AbstractStatus.State), then mirrorwatch's "the API did not say"
CONNECT_STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED", "RESTARTING", "STOPPED")
UNKNOWN = "UNKNOWN"
STATES = CONNECT_STATES + (UNKNOWN,)
RUNNING, PAUSED, FAILED, STOPPED = "RUNNING", "PAUSED", "FAILED", "STOPPED"
# a source connector in one of these mirrors nothing, whatever its worker's heartbeats say
NOT_MIRRORING = ("PAUSED", "FAILED", "STOPPED", "UNASSIGNED", "DESTROYED")


@dataclass(frozen=True)
class TaskState:
    id: int
    state: str
    worker_id: str | None = None
    trace: str | None = None  # FAILED only: the first line of Connect's stack trace
    cause: str | None = None  # FAILED only: its last "Caused by:" (the root cause, e.g. RecordTooLargeException)


@dataclass(frozen=True)
class ConnectorState:
    name: str
    role: str  # "source", "checkpoint" or "heartbeat": which of MM2's connectors
    state: str
    worker_id: str | None = None
    trace: str | None = None
    tasks: tuple[TaskState, ...] = ()
    cause: str | None = None
    error: str | None = None  # state UNKNOWN: why (one line, no secret)
    missing: bool = False  # the REST API answered 404: this Connect cluster has no connector of that name

    @property
    def answered(self) -> bool:
        return self.error is None

    def body(self) -> dict[str, Any]:
        """Plain JSON values (API, ``monitor lag --json``)."""
        return {
            "name": self.name,
            "role": self.role,
            "state": self.state,
            "worker_id": self.worker_id,
            "trace": self.trace,
            "error": self.error,
            "tasks": [{"id": t.id, "state": t.state, "worker_id": t.worker_id, "trace": t.trace} for t in self.tasks],
        }


@dataclass(frozen=True)
class ConnectStates:
    """One poll of a flow's connectors: ``ts_ms`` when it ended."""

    ts_ms: int
    connectors: tuple[ConnectorState, ...] = field(default_factory=tuple)

    @property
    def up(self) -> bool:
        """The REST API answered for every connector asked for. A connector it does not have (404) is an answer:
        that connector is missing (its own line among the problems), the API is not down."""
        return bool(self.connectors) and all(c.answered or c.missing for c in self.connectors)


def first_line(trace: object) -> str | None:
    if not isinstance(trace, str) or not trace.strip():
        return None
    return trace.strip().splitlines()[0].strip()


def root_cause(trace: object) -> str | None:
    """The last ``Caused by:`` line of a Java stack trace, without those words (None when there is none)."""
    if not isinstance(trace, str):
        return None
    causes = [
        line.strip()[len("Caused by:") :].strip()
        for line in trace.splitlines()
        if line.strip().startswith("Caused by:")
    ]
    return causes[-1] if causes else None


def _state(value: object) -> str:
    return value if isinstance(value, str) and value in CONNECT_STATES else UNKNOWN


def unknown(name: str, role: str, reason: str) -> ConnectorState:
    return ConnectorState(name=name, role=role, state=UNKNOWN, error=redact_text(reason))


def parse_status(name: str, role: str, body: object) -> ConnectorState:
    """A ``/connectors/{name}/status`` answer as a :class:`ConnectorState` (UNKNOWN with a reason when malformed)."""
    if not isinstance(body, dict) or not isinstance(body.get("connector"), dict):
        return unknown(name, role, "the status answer has no 'connector' object")
    conn = body["connector"]
    tasks = []
    for t in body.get("tasks") or []:
        if not isinstance(t, dict) or not isinstance(t.get("id"), int):
            continue
        state = _state(t.get("state"))
        tasks.append(
            TaskState(
                id=t["id"],
                state=state,
                worker_id=t.get("worker_id") if isinstance(t.get("worker_id"), str) else None,
                trace=first_line(t.get("trace")) if state == FAILED else None,
                cause=root_cause(t.get("trace")) if state == FAILED else None,
            )
        )
    state = _state(conn.get("state"))
    return ConnectorState(
        name=str(body.get("name") or name),
        role=role,
        state=state,
        worker_id=conn.get("worker_id") if isinstance(conn.get("worker_id"), str) else None,
        trace=first_line(conn.get("trace")) if state == FAILED else None,
        cause=root_cause(conn.get("trace")) if state == FAILED else None,
        tasks=tuple(sorted(tasks, key=lambda t: t.id)),
    )


def http_reason(status_code: int, name: str, body_text: str) -> str:
    """One line for a non-200 answer (Connect answers errors as ``{"error_code", "message"}``)."""
    if status_code == 401:
        return "HTTP 401: the Connect REST API refused the credentials (mirror.connect.username/password)"
    if status_code == 403:
        return "HTTP 403: the Connect REST API user may not read connector status"
    if status_code == 404:
        return f"HTTP 404: no connector named '{name}' on this Connect cluster"
    text = " ".join(body_text.split())[:200]
    return f"HTTP {status_code}: {text}" if text else f"HTTP {status_code}"


def connector_problems(connectors: tuple[ConnectorState, ...] | list[ConnectorState]) -> list[str]:
    """One line per connector or task that is not RUNNING (FAILED with its trace's first line), or whose state
    is unknown. The one place these words are made: ``monitor lag``, the API, the page and the evaluator's reasons
    read them."""
    lines = []
    for c in connectors:
        where = f"{c.role} connector {c.name}"
        if c.state == UNKNOWN:
            lines.append(f"{where}: state unknown ({c.error or 'no answer'})")
            continue
        if c.state != RUNNING:
            worker = f" on {c.worker_id}" if c.worker_id else ""
            lines.append(f"{where} {c.state}{worker}" + _why(c.trace, c.cause))
        for t in c.tasks:
            if t.state != RUNNING:
                worker = f" on {t.worker_id}" if t.worker_id else ""
                lines.append(f"{where} task {t.id} {t.state}{worker}" + _why(t.trace, t.cause))
    return lines


def _why(trace: str | None, cause: str | None) -> str:
    if not trace:
        return ""
    return f": {trace}" + (f" (caused by {cause})" if cause and cause != trace else "")


def source_mirroring(connectors: tuple[ConnectorState, ...] | list[ConnectorState]) -> bool | None:
    """Whether the source connector can be mirroring: False when it or every task is paused, failed, stopped or
    unassigned, or missing from the Connect cluster; None when its state is unknown (no REST answer) or there is no
    source connector."""
    for c in connectors:
        if c.role != "source":
            continue
        if c.missing:
            return False
        if c.state == UNKNOWN:
            return None
        if c.state in NOT_MIRRORING:
            return False
        if c.tasks and all(t.state in NOT_MIRRORING for t in c.tasks):
            return False
        return True
    return None


class ConnectRestClient:
    """GET-only client of one Connect cluster's REST API; :meth:`status` never raises."""

    def __init__(self, settings: ConnectRestSettings):
        import requests

        self.settings = settings
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        if settings.username is not None:
            self.session.auth = (settings.username, settings.password or "")
        if settings.ssl_ca_location:
            self.session.verify = settings.ssl_ca_location

    def _clean(self, text: str) -> str:
        text = redact_text(text)
        if self.settings.password:
            text = text.replace(self.settings.password, MASK)
        return " ".join(text.split())[:300]

    def status(self, name: str, role: str) -> ConnectorState:
        import requests

        url = f"{self.settings.url}/connectors/{quote(name, safe='')}/status"
        try:
            resp = self.session.get(url, timeout=self.settings.timeout_s, allow_redirects=False)
        except requests.Timeout:
            return unknown(name, role, f"no answer from {self.settings.url} within {self.settings.timeout_s:g} s")
        except requests.exceptions.SSLError:
            return unknown(
                name, role, f"TLS handshake with {self.settings.url} failed (mirror.connect.ssl_ca_location?)"
            )
        except requests.ConnectionError:
            return unknown(name, role, f"cannot connect to {self.settings.url}")
        except requests.RequestException as exc:
            return unknown(name, role, f"{self.settings.url}: {type(exc).__name__}")
        if resp.status_code != 200:
            state = unknown(name, role, self._clean(http_reason(resp.status_code, name, _error_message(resp))))
            return replace(state, missing=True) if resp.status_code == 404 else state
        try:
            body = resp.json()
        except ValueError:
            return unknown(name, role, f"{self.settings.url} answered HTTP 200 without JSON")
        state = parse_status(name, role, body)
        return state if state.error is None else unknown(name, role, self._clean(state.error))

    def close(self) -> None:
        self.session.close()


def _error_message(resp: Any) -> str:
    try:
        body = resp.json()
    except ValueError:
        return str(resp.text or "")
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, str) else ""
