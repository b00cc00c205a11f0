"""A consumer fenced for good is replaced (mirror/consumer_guard.py), on the real single-broker pair.

With static membership (``mirror.instance_id``), librdkafka makes FENCED_INSTANCE_ID fatal to the consumer that gets
it ("Static consumer fenced by other consumer with same group.instance.id"): it never rejoins. Kafka answers it when
another member joined under the same ``group.instance.id``; librdkafka meets it by itself after its group
coordinator's broker is killed (the session times out locally, it rejoins under a new member id, and an answer to a
request still carrying the old one fences it). The fault suite's exactly-once mirror stood still that way, with
nothing assigned, in 2 of 3 runs. Here the fence is made the deterministic way: a second consumer joins the mirror's
group (the source group at-least-once, the positions group on the target exactly-once) under the mirror's instance
id, and leaves. The mirror must replace its consumer and mirror everything, each record once under exactly-once."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import Consumer, KafkaError

from harness.helpers import create_topic, produce_numbered, read_all
from harness.mirror_harness import fast_mirror_settings, wait_until
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.naming import positions_group
from mirrorwatch.mirror.consumer_guard import ConsumerGuard, is_fatal
from mirrorwatch.mirror.engine import MirrorEngine

from .support.exactly_once import delivery, read_committed

INSTANCE = "fence-me"
PARTITIONS = 3


@pytest.mark.parametrize(
    "err, fatal",
    [
        (KafkaError(KafkaError._FATAL, "Fatal consumer error: Broker: Static consumer fenced"), True),
        (KafkaError(KafkaError.FENCED_INSTANCE_ID, "fenced", fatal=True), True),
        (KafkaError(KafkaError._TRANSPORT, "Connection refused"), False),
        (KafkaError(KafkaError._ALL_BROKERS_DOWN, "all brokers down"), False),
    ],
)
def test_which_client_errors_are_fatal(err, fatal):
    assert is_fatal(err) is fatal


def test_a_fatal_error_marks_the_consumer_until_it_is_replaced():
    guard = ConsumerGuard.__new__(ConsumerGuard)
    guard._init_consumer_guard()
    guard.exactly_once = False
    guard._note_consumer_error(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
    assert guard.group_failed is None
    fenced = KafkaError(KafkaError._FATAL, "fenced")
    guard._note_consumer_error(fenced)
    guard._note_consumer_error(KafkaError(KafkaError._FATAL, "later"))
    assert guard.group_failed is fenced  # the first cause is the one said


def _fence(bootstrap: str, group: str, topic: str) -> None:
    """Join ``group`` under the mirror's instance id (the broker fences the mirror's member), hold the assignment
    for a moment, leave."""
    intruder = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": INSTANCE,
            "session.timeout.ms": 10_000,
            "enable.auto.commit": False,
            "partition.assignment.strategy": "cooperative-sticky",
        }
    )
    try:
        intruder.subscribe([topic])
        wait_until(lambda: bool(intruder.poll(0.2) or intruder.assignment()), 60, 0, f"the intruder in {group}")
    finally:
        intruder.close()


@pytest.fixture
def running(source, target, topic_name, mirror_config):
    create_topic(source.bootstrap, topic_name, PARTITIONS)
    flow = {"topics": [topic_name], "group": f"g-{topic_name}", "internal_topics": False, "checkpoint_groups": []}
    mirror_config["flows"]["east-west"].update(flow)
    engines: list[MirrorEngine] = []
    failures: list[BaseException] = []
    threads: list[threading.Thread] = []

    def start(delivery_mode: str) -> MirrorEngine:
        mirror_config["mirror"] = {
            **fast_mirror_settings(),
            "metrics_port": None,
            "delivery": delivery_mode,
            "instance_id": INSTANCE,
        }
        engine = MirrorEngine(config_from_dict(mirror_config))

        def run() -> None:
            try:
                engine.run()
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                failures.append(exc)

        engines.append(engine)
        threads.append(threading.Thread(target=run, daemon=True))
        threads[-1].start()
        return engine

    yield start, failures
    for engine in engines:
        engine.stop()
    for thread in threads:
        thread.join(60)


@pytest.mark.parametrize("mode", ["at_least_once", "exactly_once"])
def test_a_fenced_static_member_is_replaced_and_everything_is_mirrored(running, source, target, topic_name, mode):
    start, failures = running
    engine = start(mode)
    produce_numbered(source.bootstrap, topic_name, 3_000, partitions=PARTITIONS)
    wait_until(lambda: len(engine.owned) == PARTITIONS, 90, what="the mirror owning every partition")
    group = positions_group(f"g-{topic_name}") if mode == "exactly_once" else f"g-{topic_name}"
    # the group's members subscribe to the target topics under exactly-once, to the source ones otherwise
    subscribed = f"east.{topic_name}" if mode == "exactly_once" else topic_name
    _fence(target.bootstrap if mode == "exactly_once" else source.bootstrap, group, subscribed)
    wait_until(lambda: engine.consumer_replacements >= 1 or failures, 60, what="the fenced consumer replaced")
    assert not failures, failures
    produce_numbered(source.bootstrap, topic_name, 3_000, partitions=PARTITIONS, start=3_000)
    target_topic = f"east.{topic_name}"
    if mode == "exactly_once":

        def complete() -> bool:
            return delivery(read_committed(target.bootstrap, target_topic), 6_000, PARTITIONS).lost == 0

        wait_until(complete, 120, 1.0, "every record committed on the target")
        seen = delivery(read_committed(target.bootstrap, target_topic), 6_000, PARTITIONS)
        assert seen.exact, seen
    else:
        keys = {m.key() for m in read_all(target.bootstrap, target_topic, expect=6_000, timeout_s=120)}
        assert len(keys) == 6_000, f"{6_000 - len(keys)} records lost"
    assert not failures, failures
