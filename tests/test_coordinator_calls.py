"""Coordinator-targeted admin calls through their helper process (mirrorwatch/core/coordinator_calls.py): the
answers and errors are a direct admin call's, a helper that dies costs only the call in flight, and the client
configuration's secrets never show in the helper's argv or environment."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from harness.helpers import kafka_error_code
from mirrorwatch.core.config import ClusterConfig
from mirrorwatch.core.coordinator_calls import CoordinatorCalls, HelperDied
from mirrorwatch.core.coordinator_protocol import (
    CoordinatorCallFailed,
    GroupDescription,
    GroupMember,
    decode,
    description_of,
    description_result,
    encode,
    error_answer,
    offsets_of,
    offsets_result,
    raise_answer,
)

TIMEOUT_S = 15.0

# ---------------------------------------------------------------- pure: the lines spoken


@pytest.mark.parametrize(
    "answer, raises, code, retriable",
    [
        ({"error": error_answer(KafkaError(KafkaError.GROUP_ID_NOT_FOUND, "no such group"))}, KafkaException, 69, 0),
        (
            {"error": error_answer(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE, "moving", retriable=True))},
            KafkaException,
            KafkaError.COORDINATOR_NOT_AVAILABLE,
            1,
        ),
        ({"error": error_answer(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))}, KafkaException, 30, 0),
        ({"error": error_answer(KafkaError(KafkaError._TIMED_OUT, "Timed out"))}, KafkaException, -185, 0),
        ({"timeout": "no answer within 5 s"}, TimeoutError, None, None),
        ({"failure": "ValueError: bad"}, CoordinatorCallFailed, None, None),
        ({}, CoordinatorCallFailed, None, None),
    ],
)
def test_an_answer_raises_what_a_direct_call_raises(answer, raises, code, retriable):
    with pytest.raises(raises) as caught:
        raise_answer(decode(encode({"id": 1, **answer})), "the offsets of group 'g'")
    if code is not None:
        err = caught.value.args[0]
        assert (err.code(), int(err.retriable())) == (code, retriable)
        assert err.str() == answer["error"]["text"]
    else:
        assert not isinstance(caught.value, KafkaException)  # never taken for a broker's answer
        assert "the offsets of group 'g'" in str(caught.value)


@pytest.mark.parametrize(
    "members",
    [
        [],
        [("m-1", "c-1", "/10.0.0.1", [])],
        [("m-1", "c-1", "/10.0.0.1", [("a", 0), ("a", 2)]), ("m-2", "c-2", "/h", [("b.x", 1)])],
    ],
)
def test_a_description_crosses_the_pipe_whole(members):
    line = encode({"id": 3, "result": description_result("g", "STABLE", members)})
    expected = GroupDescription("g", "STABLE", tuple(GroupMember(m, c, h, tuple(a)) for m, c, h, a in members))
    assert description_of(raise_answer(decode(line), "x")) == expected


@pytest.mark.parametrize("offsets", [{}, {("a", 0): 0}, {("a", 1): 5, ("a", 0): 7, ("b.c", 12): 2**40}])
def test_offsets_cross_the_pipe_whole(offsets):
    assert offsets_of(raise_answer(decode(encode({"id": 1, "result": offsets_result(offsets)})), "x")) == offsets


# ---------------------------------------------------------------- against a real cluster


def _direct_description(admin: AdminClient, group: str) -> GroupDescription:
    d = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S + 1)
    members = tuple(
        GroupMember(
            m.member_id,
            m.client_id,
            m.host,
            tuple((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])),
        )
        for m in d.members
    )
    return GroupDescription(group, d.state.name, members)


def _direct_offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    f = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S)[group]
    return {(tp.topic, tp.partition): tp.offset for tp in f.result(TIMEOUT_S + 1).topic_partitions if tp.offset >= 0}


@pytest.fixture(scope="module")
def live_group(source):
    """A group with a member assigned a 3-partition topic and offsets committed on two of its partitions."""
    topic, group = f"t-coord-{uuid.uuid4().hex[:6]}", f"g-coord-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(source.config())
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = Producer(source.config())
    for p in range(3):
        for i in range(5):
            producer.produce(topic, value=b"x%d" % i, partition=p)
    producer.flush(30)
    consumer = Consumer({**source.config(), "group.id": group, "enable.auto.commit": False, "client.id": "coord-t"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the test consumer was never assigned its topic"
    from confluent_kafka import TopicPartition

    consumer.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 2, 5)], asynchronous=False)
    yield topic, group, admin
    consumer.close()


@pytest.fixture
def calls(source):
    calls = CoordinatorCalls(ClusterConfig(properties=source.config()))
    yield calls
    calls.close()


def _pid_gone(pid: int) -> bool:
    """No process and no zombie left with this id (a zombie keeps /proc/<pid> with state Z)."""
    return not Path(f"/proc/{pid}").exists()


def test_answers_equal_the_direct_calls(calls, live_group):
    topic, group, admin = live_group
    described = calls.describe_group(group, TIMEOUT_S)
    assert described == _direct_description(admin, group)
    assert described.state == "STABLE" and len(described.members) == 1
    assert sorted(described.members[0].assignment) == [(topic, 0), (topic, 1), (topic, 2)]
    assert calls.committed_offsets(group, TIMEOUT_S) == _direct_offsets(admin, group) == {(topic, 0): 3, (topic, 2): 5}


def test_alter_writes_what_a_direct_read_sees(calls, live_group):
    topic, _, admin = live_group
    idle = f"g-coord-idle-{uuid.uuid4().hex[:6]}"
    assert calls.alter_offsets(idle, {(topic, 1): 4, (topic, 2): 1}, TIMEOUT_S) == 2
    assert _direct_offsets(admin, idle) == calls.committed_offsets(idle, TIMEOUT_S) == {(topic, 1): 4, (topic, 2): 1}


def test_errors_round_trip_with_their_code(calls, live_group, source):
    topic, group, admin = live_group
    missing = f"g-coord-none-{uuid.uuid4().hex[:6]}"
    for direct, helper in [
        (lambda: _direct_description(admin, missing), lambda: calls.describe_group(missing, TIMEOUT_S)),
        (lambda: _direct_offsets(admin, missing), lambda: calls.committed_offsets(missing, TIMEOUT_S)),
    ]:
        assert kafka_error_code(helper) == kafka_error_code(direct)
    # the live group has a member: the coordinator refuses to move its offsets
    assert (
        kafka_error_code(lambda: calls.alter_offsets(group, {(topic, 0): 1}, TIMEOUT_S)) == KafkaError.UNKNOWN_MEMBER_ID
    )
    # a property librdkafka refuses is its own error, as constructing the client directly raises it
    bad = {**source.config(), "socket.timeout.ms": "not-a-number"}
    with pytest.raises(KafkaException) as direct:
        AdminClient(bad)
    with pytest.raises(KafkaException) as through:
        CoordinatorCalls(ClusterConfig(properties=bad)).committed_offsets(group, TIMEOUT_S)
    assert through.value.args[0].code() == direct.value.args[0].code()


def _wait_locked(calls: CoordinatorCalls) -> None:
    deadline = time.monotonic() + 10
    while not calls._lock.locked():
        assert time.monotonic() < deadline, "the call never started"
        time.sleep(0.01)


def test_a_helper_killed_mid_call_fails_that_call_only(calls, live_group, caplog):
    topic, group, _ = live_group
    calls.committed_offsets(group, TIMEOUT_S)
    first = calls.pid
    assert first is not None
    os.kill(first, signal.SIGSTOP)  # it holds the request unanswered until killed: the call is in flight
    raised: list[BaseException] = []

    def call() -> None:
        try:
            calls.committed_offsets(group, TIMEOUT_S)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=call)
    sent = calls._sequence
    with caplog.at_level(logging.WARNING, logger="mirrorwatch.kafka.coordinator"):
        thread.start()
        _wait_locked(calls)
        # the request numbered, so past the check that the helper is alive: killed now, it dies mid-call (killed
        # before that check, the call would start a new helper and answer)
        deadline = time.monotonic() + 10
        while calls._sequence == sent and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # the request written to its pipe
        os.kill(first, signal.SIGKILL)
        thread.join(TIMEOUT_S + 15)
    assert len(raised) == 1 and isinstance(raised[0], HelperDied)
    assert not isinstance(raised[0], KafkaException)  # callers fail closed, never "no such group"
    assert f"committed offsets of group '{group}'" in str(raised[0]) and "SIGKILL" in str(raised[0])
    assert any("SIGKILL" in r.message and "librdkafka#5397" in r.message for r in caplog.records)
    assert _pid_gone(first)
    assert calls.committed_offsets(group, TIMEOUT_S) == {(topic, 0): 3, (topic, 2): 5}
    assert calls.pid not in (None, first)


def test_a_helper_dead_between_calls_is_replaced_without_losing_a_call(calls, live_group, caplog):
    _, group, _ = live_group
    calls.describe_group(group, TIMEOUT_S)
    first = calls.pid
    assert first is not None
    os.kill(first, signal.SIGABRT)
    deadline = time.monotonic() + 10
    while calls._helper is not None and calls._helper.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with caplog.at_level(logging.WARNING, logger="mirrorwatch.kafka.coordinator"):
        assert len(calls.describe_group(group, TIMEOUT_S).members) == 1
    assert any("SIGABRT" in r.message for r in caplog.records)
    assert _pid_gone(first) and calls.pid not in (None, first)


def test_a_helper_that_does_not_answer_is_stopped_within_the_bound(calls, live_group):
    _, group, _ = live_group
    calls.describe_group(group, TIMEOUT_S)
    first = calls.pid
    assert first is not None
    calls.grace_s = 0.5
    os.kill(first, signal.SIGSTOP)
    with pytest.raises(CoordinatorCallFailed, match="no answer from the coordinator-call helper within 1.5 s"):
        calls.committed_offsets(group, 1.0)
    assert _pid_gone(first)
    calls.grace_s = 10.0
    assert len(calls.describe_group(group, TIMEOUT_S).members) == 1


def test_secrets_never_reach_the_helpers_argv_or_environment(source, live_group):
    _, group, _ = live_group
    secret = f"mwSecret{uuid.uuid4().hex[:12]}Zq"
    # librdkafka ignores SASL settings on a plaintext connection: the secret only has to reach the helper
    calls = CoordinatorCalls(ClusterConfig(properties={**source.config(), "sasl.password": secret}))
    try:
        assert len(calls.describe_group(group, TIMEOUT_S).members) == 1
        pid = calls.pid
        assert pid is not None
        for name in ("cmdline", "environ"):
            assert secret.encode() not in Path(f"/proc/{pid}/{name}").read_bytes()
    finally:
        calls.close()
    assert _pid_gone(pid)


@pytest.mark.parametrize("call", ["committed_offsets", "describe_group"])
def test_a_call_that_times_out_gets_a_new_helper_next(calls, live_group, call):
    """librdkafka 2.16's long-lived admin client went on timing out group requests for minutes after a broker
    restarted (the soak's monitor stayed UNKNOWN): after a timeout, the next call is made by a new helper. A describe
    answers each group on its own, so there the client that gave up says so per group; counting only a whole call's
    timeout, the monitor's view of a group on a restarted single-node cluster stayed UNKNOWN for good."""
    _topic, group, _admin = live_group
    calls.describe_group(group, TIMEOUT_S)
    first = calls.pid
    assert first is not None
    with pytest.raises((TimeoutError, KafkaException)):
        getattr(calls, call)(group, 0.0001)  # too short for any answer
    assert calls.pid is None and _pid_gone(first), "the timed-out helper was stopped"
    assert calls.describe_group(group, TIMEOUT_S).group_id == group
    assert calls.pid not in (None, first)
