"""The coordinator-call helper process: ``python -m mirrorwatch.core.coordinator_worker``.

It runs the admin requests that go to a consumer group's coordinator (describe groups, list and alter a group's
committed offsets), so that librdkafka 2.16's abort in their error path (confluentinc/librdkafka#5397) ends
this process, not the mirror or the monitor that asked. See ``core.coordinator_calls`` for the parent side and
``core.coordinator_protocol`` for the lines spoken.

The first line on stdin is the client configuration (never argv or the environment: it holds secrets); each
further line is one request, answered by one line on stdout. End of stdin ends the helper.
"""

from __future__ import annotations

import signal
import sys
from typing import IO, Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from .coordinator_protocol import (
    TP,
    decode,
    description_result,
    encode,
    error_answer,
    offsets_of,
    offsets_result,
)

# beyond the request's own timeout (which librdkafka enforces), how long to wait for its future
FUTURE_MARGIN_S = 1.0


def describe(admin: AdminClient, groups: list[str], timeout_s: float) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for group, future in admin.describe_consumer_groups(groups, request_timeout=timeout_s).items():
        try:
            d = future.result(timeout_s + FUTURE_MARGIN_S)
        except Exception as exc:
            answers[group] = answer_of(exc, timeout_s)
            continue
        members = [
            (
                m.member_id,
                m.client_id,
                m.host,
                [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])],
            )
            for m in d.members or ()
        ]
        answers[group] = {"result": description_result(group, d.state.name, members)}
    return answers


def committed(admin: AdminClient, group: str, timeout_s: float) -> list[list[Any]]:
    request = [ConsumerGroupTopicPartitions(group)]
    result = admin.list_consumer_group_offsets(request, request_timeout=timeout_s)[group]
    answer = result.result(timeout_s + FUTURE_MARGIN_S)
    raise_partition_error(answer.topic_partitions)
    return offsets_result({(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or ()})


def alter(admin: AdminClient, group: str, offsets: dict[TP, int], timeout_s: float) -> int:
    tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
    request = [ConsumerGroupTopicPartitions(group, tps)]
    answer = admin.alter_consumer_group_offsets(request, request_timeout=timeout_s)[group]
    raise_partition_error(answer.result(timeout_s + FUTURE_MARGIN_S).topic_partitions)
    return len(tps)


def raise_partition_error(partitions: list[TopicPartition] | None) -> None:
    # a partition the coordinator refused is not "no offset there": the whole answer is refused
    for tp in partitions or ():
        if tp.error is not None:
            raise KafkaException(tp.error)


def answer_of(exc: BaseException, timeout_s: float) -> dict[str, Any]:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return {"error": error_answer(exc.args[0])}
    if isinstance(exc, TimeoutError):
        return {"timeout": f"no answer within {timeout_s:g} s"}
    return {"failure": f"{type(exc).__name__}: {exc}"}


def serve(admin: AdminClient, request: dict[str, Any]) -> dict[str, Any]:
    op, timeout_s = request.get("op"), float(request.get("timeout_s", 30.0))
    try:
        if op == "describe":
            return {"result": describe(admin, [str(g) for g in request["groups"]], timeout_s)}
        if op == "offsets":
            return {"result": committed(admin, str(request["group"]), timeout_s)}
        if op == "alter":
            return {"result": alter(admin, str(request["group"]), offsets_of(request["offsets"]), timeout_s)}
        return {"failure": f"unknown request {op!r}"}
    except Exception as exc:
        return answer_of(exc, timeout_s)


def run(stdin: IO[bytes], stdout: IO[bytes]) -> int:
    setup = stdin.readline()
    if not setup:
        return 0
    try:
        admin = AdminClient(decode(setup)["properties"])
    except KafkaException as exc:  # a property librdkafka refuses: the caller raises it as a direct client would
        stdout.write(encode({"id": 0, **answer_of(exc, 0)}))
        stdout.flush()
        return 1
    stdout.write(encode({"id": 0, "result": "ready"}))
    stdout.flush()
    for line in stdin:
        request = decode(line)
        stdout.write(encode({"id": request.get("id"), **serve(admin, request)}))
        stdout.flush()
    return 0


def main() -> int:
    # Ctrl-C is for the parent, which closes our stdin when it stops; the helper has its own session anyway
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return run(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
