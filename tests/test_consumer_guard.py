"""Stuck clients replaced, on the real clusters (the rules are table-driven here and in test_outage_units.py):
the mirror's source consumer when it stays outside its group while the source answers (mirror/consumer_guard.py),
the cluster watch's probe client when a new client gets the answer it does not (mirror/outage.py), and the
heartbeat producer when no heartbeat is acknowledged but a new client reaches the source (mirror/heartbeat.py)."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from harness.helpers import create_topic, produce_numbered, read_all
from harness.mirror_harness import fast_mirror_settings, wait_until
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.localkafka.launcher import free_port
from mirrorwatch.mirror.consumer_guard import (
    STUCK_AFTER_S,
    ConsumerGuard,
    assignment_fetch_failed,
    group_state,
    outside_group_since,
    should_replace,
)
from mirrorwatch.mirror.engine import MirrorEngine
from mirrorwatch.mirror.heartbeat import HeartbeatProducer, ensure_heartbeats_topic
from mirrorwatch.mirror.outage import SECOND_OPINION_AFTER_S, ClusterWatch

from .support.mirror_flows import committed_offsets

# the shape of librdkafka's statistics around the group part (abridged from a real consumer's)
STATS_UP = '{"name": "c#consumer-1", "type": "consumer", "topics": {}, "cgrp": { "state": "up", "stateage": 12011, "join_state": "steady", "rebalance_age": 11990, "rebalance_cnt": 1, "assignment_size": 6 }, "eos": {}}'
STATS_QUERY = STATS_UP.replace('"state": "up"', '"state": "query-coord"')


@pytest.mark.parametrize(
    "stats, state",
    [
        (STATS_UP, "up"),
        (STATS_QUERY, "query-coord"),
        ('{"name": "p#producer-1", "type": "producer"}', None),  # no group part
        ("", None),
    ],
)
def test_group_state_from_statistics(stats, state):
    assert group_state(stats) == state


@pytest.mark.parametrize(
    "previous, source_up, state, expected",
    [
        (None, True, "up", None),  # in its group
        (None, True, "query-coord", 100.0),  # outside it: the clock starts now
        (40.0, True, "query-coord", 40.0),  # still outside: the clock keeps its start
        (40.0, True, "wait-coord", 40.0),  # any state but up is outside
        (40.0, True, "up", None),  # back in: reset
        (40.0, False, "query-coord", None),  # the source is away: the watch reports that, the clock stops
        (None, False, "query-coord", None),
        (40.0, True, None, None),  # no group part in the statistics
    ],
)
def test_outside_group_since(previous, source_up, state, expected):
    assert outside_group_since(previous, 100.0, source_up, state) == expected


@pytest.mark.parametrize(
    "since, now, replace",
    [
        (None, 1000.0, False),
        (100.0, 100.0 + STUCK_AFTER_S - 0.1, False),
        (100.0, 100.0 + STUCK_AFTER_S, True),
        (100.0, 100.0 + 10 * STUCK_AFTER_S, True),
    ],
)
def test_should_replace(since, now, replace):
    assert should_replace(since, now) is replace


# librdkafka's own words (src/rdkafka_assignment.c), request-level and per partition, and consume errors that are not
# about its assignment
REQUEST_LEVEL = (
    'Failed to fetch committed offsets for 0 partition(s) in group "mirrorwatch-soak": Broker: Not coordinator'
)
PER_PARTITION = 'Failed to fetch committed offset for group "g" topic orders [2]: Broker: Not coordinator'


@pytest.mark.parametrize(
    "err, failed",
    [
        (KafkaError(KafkaError.NOT_COORDINATOR, REQUEST_LEVEL), True),
        (KafkaError(KafkaError.NOT_COORDINATOR, PER_PARTITION), True),
        (
            KafkaError(
                KafkaError._TRANSPORT,
                'Failed to fetch committed offsets for partitions in group "g": Local: Broker transport failure',
            ),
            True,
        ),
        (KafkaError(KafkaError.NOT_COORDINATOR, "Broker: Not coordinator"), False),
        (KafkaError(KafkaError._TRANSPORT, "Connection refused"), False),
        (KafkaError(KafkaError.OFFSET_OUT_OF_RANGE, "Fetch position offset 12 is out of range"), False),
    ],
)
def test_an_assignment_librdkafka_stopped_serving(err, failed):
    assert assignment_fetch_failed(err) is failed


@pytest.mark.parametrize("exactly_once, replaced", [(False, True), (True, False)])
def test_only_the_source_consumer_is_replaced_for_an_assignment_it_stopped_serving(exactly_once, replaced):
    """Under exactly-once the watched consumer is the positions group's, which never fetches: its assignment's
    look-up failing stops nothing."""
    guard = ConsumerGuard.__new__(ConsumerGuard)
    guard._init_consumer_guard()
    guard.exactly_once = exactly_once
    err = KafkaError(KafkaError.NOT_COORDINATOR, REQUEST_LEVEL)
    guard._note_consumer_error(err)
    assert (guard.group_failed is err) is replaced


def test_a_replaced_consumer_loses_nothing_and_leaves_the_group(source, target, topic_name, mirror_config):
    """The stuck state itself comes from the client library at random (about one freeze of a single-broker
    cluster in ten); here the guard's clock is set as the statistics would set it, and the real replacement runs:
    mid-stream, with records in flight, a new consumer takes over from the group's commits."""
    group = f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, 3)
    produce_numbered(source.bootstrap, topic_name, 20_000, partitions=3)
    mirror_config["flows"]["east-west"].update({"topics": [topic_name], "group": group})
    mirror_config["mirror"] = {
        **fast_mirror_settings(),
        "metrics_port": None,
        "consumer": {"statistics.interval.ms": 500},
    }
    engine = MirrorEngine(config_from_dict(mirror_config))
    failures: list[BaseException] = []

    def run() -> None:
        try:
            engine.run()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        # the real statistics are read: the group state is "up" once the consumer joined
        wait_until(lambda: engine.group_state == "up" and engine.owned, 60, what="the consumer in its group")
        produce_numbered(source.bootstrap, topic_name, 20_000, partitions=3, start=20_000)
        deadline = time.monotonic() + 30
        while engine.consumer_replacements == 0 and time.monotonic() < deadline:
            # as the statistics would leave it after STUCK_AFTER_S outside the group (the next ones reset it)
            engine.outside_group_since = time.monotonic() - STUCK_AFTER_S - 1
            time.sleep(0.05)
        assert engine.consumer_replacements == 1
        wait_until(
            lambda: sum(committed_offsets(source.bootstrap, group, topic_name, 3).values()) == 40_000,
            90,
            what="everything committed by the new consumer",
        )
        # kept in a variable: a client collected while its request is pending fails the request's future
        client = AdminClient({"bootstrap.servers": source.bootstrap})
        described = client.describe_consumer_groups([group])[group].result(10)
        assert len(described.members) == 1, "the replaced consumer must not stay in the group"
    finally:
        engine.stop()
        thread.join(60)
    assert not failures, failures
    keys = {m.key() for m in read_all(target.bootstrap, f"east.{topic_name}", expect=40_000)}
    assert len(keys) == 40_000, f"{40_000 - len(keys)} records lost"


def test_a_stuck_probe_client_is_replaced_by_one_that_answers(source, mirror_config):
    """The watch's client for a cluster that answers is swapped for one that never will (the state librdkafka
    leaves a client in after a fenced broker's empty metadata answer): after SECOND_OPINION_AFTER_S of failed
    probes a new client is asked, answers, and takes over; the stuck one is kept, not destroyed."""
    east = config_from_dict(mirror_config).clusters["east"]
    watch = ClusterWatch([("source", "east", east)], timeout_s=2.0)
    stuck = AdminClient({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    watch._admins["source"] = stuck
    assert watch.probe("source") is False
    assert watch.probe("source") is False  # not yet: a thaw or a restart settles within the delay
    watch.down_since["source"] -= SECOND_OPINION_AFTER_S  # as if it had failed that long
    assert watch.probe("source") is True
    assert watch.up["source"] and watch._admins["source"] is not stuck and watch._retired_admins == [stuck]
    assert watch.probe("source") is True  # the new client serves the next probes


def test_a_cluster_that_is_really_away_keeps_the_watch_client():
    """A new client that gets no answer either means the cluster is away: nothing is replaced."""
    away = config_from_dict(
        {"clusters": {"east": {"bootstrap.servers": f"127.0.0.1:{free_port()}"}}, "flows": {}}
    ).clusters["east"]
    watch = ClusterWatch([("source", "east", away)], timeout_s=1.0)
    own = watch._admins["source"]
    assert watch.probe("source") is False
    watch.down_since["source"] -= SECOND_OPINION_AFTER_S
    assert watch.probe("source") is False
    assert watch._admins["source"] is own and watch._retired_admins == []


def test_a_stuck_heartbeat_producer_is_replaced_and_heartbeats_resume(source, mirror_config, topic_name):
    """The heartbeat producer is swapped for one that never reaches the source: once no heartbeat has been
    acknowledged for stuck_after_s, a new client is asked, reaches the source and takes over; heartbeats resume.
    A source that is really away keeps the producer (test_a_cluster_that_is_really_away_keeps_the_watch_client
    is the same rule)."""
    east = config_from_dict(mirror_config).clusters["east"]
    topic = f"hb.{topic_name}"
    ensure_heartbeats_topic(east, topic)
    sent = []
    beats = HeartbeatProducer(east, topic, "east", "west", 0.2, on_sent=lambda: sent.append(time.monotonic()))
    stuck = Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "log_level": 0})
    beats._producer, beats.stuck_after_s = stuck, 2.0
    beats.start()
    try:
        wait_until(lambda: beats.replacements == 1 and sent, 30, what="heartbeats resuming")
    finally:
        beats.stop()
        beats.join(10)
    assert beats._retired == [stuck] and beats._producer is not stuck
