"""The JSON lines spoken between a process and its coordinator-call helper (``core.coordinator_calls``).

Pure values only, so that what crosses the pipe is tested table-driven. One request per line, one answer per
line, both carrying the request's ``id``. An answer is one of:

- ``{"id", "result": ...}``: the admin call's answer (see the ``*_result`` functions);
- ``{"id", "error": {"code", "text", "retriable", "fatal"}}``: a Kafka error, raised in the caller as the same
  ``KafkaException(KafkaError(...))`` a direct admin call raises, so its handling (GROUP_ID_NOT_FOUND,
  COORDINATOR_NOT_AVAILABLE, authorization, retriable codes) works unchanged;
- ``{"id", "timeout": text}``: no answer within the call's timeout (a direct call raises ``TimeoutError`` then);
- ``{"id", "failure": text}``: anything else that went wrong inside the helper.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException

TP = tuple[str, int]


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TP, ...]  # the (topic, partition)s assigned to this member


@dataclass(frozen=True)
class GroupDescription:
    """What ``describe_consumer_groups`` says of one group: its state's name (``STABLE``, ``EMPTY``, ``DEAD``,
    ...) and its members with their assignments."""

    group_id: str
    state: str
    members: tuple[GroupMember, ...]


class CoordinatorCallFailed(RuntimeError):
    """A coordinator call that got no answer from Kafka: deliberately not a ``KafkaException``, so that no caller
    takes it for a broker's answer (e.g. "gone meanwhile") and every caller fails closed."""


def encode(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode(line: bytes) -> dict[str, Any]:
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError(f"expected a JSON object, got {type(message).__name__}")
    return message


def error_answer(err: KafkaError) -> dict[str, Any]:
    return {"code": err.code(), "text": err.str(), "retriable": err.retriable(), "fatal": err.fatal()}


def raise_answer(answer: dict[str, Any], what: str) -> Any:
    """The answer's result, or the exception it carries (``what``: what was being read, for the message)."""
    if "result" in answer:
        return answer["result"]
    if "error" in answer:
        e = answer["error"]
        raise KafkaException(KafkaError(int(e["code"]), str(e["text"]), bool(e["fatal"]), bool(e["retriable"])))
    if "timeout" in answer:
        raise TimeoutError(f"cannot read {what}: {answer['timeout']}")
    raise CoordinatorCallFailed(f"cannot read {what}: {answer.get('failure', 'the helper gave no answer')}")


def description_result(group_id: str, state: str, members: list[tuple[str, str, str, list[TP]]]) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "state": state,
        "members": [
            {"member_id": m, "client_id": c, "host": h, "assignment": [[t, p] for t, p in assignment]}
            for m, c, h, assignment in members
        ],
    }


def description_of(result: dict[str, Any]) -> GroupDescription:
    members = tuple(
        GroupMember(
            str(m["member_id"]),
            str(m["client_id"]),
            str(m["host"]),
            tuple((str(t), int(p)) for t, p in m["assignment"]),
        )
        for m in result["members"]
    )
    return GroupDescription(str(result["group_id"]), str(result["state"]), members)


def offsets_result(offsets: dict[TP, int]) -> list[list[Any]]:
    return [[t, p, o] for (t, p), o in sorted(offsets.items())]


def offsets_of(result: list[list[Any]]) -> dict[TP, int]:
    return {(str(t), int(p)): int(o) for t, p, o in result}
