"""Issue 37 item 5: commands end by a normal interpreter teardown (no os._exit), with their clients closed in a
defined order, and none dies of a signal on the way out (docs/design.md, "Teardown").

The loop runs each one-shot command and a short run of each service as real processes (a crash inside librdkafka only
shows in a real process's exit): MIRRORWATCH_TEST_TEARDOWN_COUNT times each (default 3, to keep the suite short;
the issue's 100 each is `python -m tests.support.teardown_loop --count 100`, reported in the design note)."""

from __future__ import annotations

import gc
import os
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from harness.helpers import create_topic
from harness.mirror_harness import wait_until
from mirrorwatch.core.client_set import ClientSet, TrackedAdmin
from mirrorwatch.core.clients import make_admin, make_consumer, make_producer
from mirrorwatch.core.config import ClusterConfig

from .support.teardown_loop import ONE_SHOTS, SERVICES, run_many, write_config

if TYPE_CHECKING:
    from .conftest import TestCluster

COUNT = int(os.environ.get("MIRRORWATCH_TEST_TEARDOWN_COUNT", "3"))


def _cluster(bootstrap: str) -> ClusterConfig:
    return ClusterConfig.model_validate({"bootstrap.servers": bootstrap})


def test_an_admin_client_let_go_waits_out_its_coordinator_requests(source: TestCluster) -> None:
    """Freeing an admin client while a request fanned out to group coordinators is outstanding crashed a broker
    thread (SIGSEGV, freed memory read while rd_kafka_destroy fails the broker's requests): a TrackedAdmin is
    freed only once every request it sent has an answer."""
    admin = make_admin(_cluster(source.bootstrap), "test-teardown")
    assert isinstance(admin, TrackedAdmin)
    groups = [f"teardown-{n}" for n in range(20)]
    futures = list(admin.describe_consumer_groups(groups, request_timeout=10).values())
    for group in groups:
        futures += admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=10).values()
    freed = weakref.ref(admin)
    del admin
    gc.collect()
    # let go at once (the caller does not wait), but not freed while a request is outstanding: kept until they end
    assert freed() is not None or all(f.done() for f in futures), "the admin client was freed with requests outstanding"
    wait_until(lambda: all(f.done() for f in futures), 30, what="its requests answered")
    wait_until(lambda: freed() is None, 30, what="the admin client freed once they were")


def test_a_client_set_stops_its_threads_then_closes_consumers_then_flushes_producers(
    source: TestCluster, topic_name: str
) -> None:
    create_topic(source.bootstrap, topic_name, 1)
    cluster = _cluster(source.bootstrap)
    stopped, order = threading.Event(), list[str]()
    clients = ClientSet(flush_s=10)
    consumer = clients.consumer(make_consumer(cluster, "test-teardown"))
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    producer = clients.producer(make_producer(cluster, "test-teardown"))
    admin = clients.admin(make_admin(cluster, "test-teardown"))
    pending = admin.describe_consumer_groups(["teardown-set"], request_timeout=10)["teardown-set"]

    class Reader:
        def stop(self) -> None:
            order.append("stop")
            stopped.set()

    def read() -> None:
        while not stopped.is_set():
            consumer.poll(0.05)  # a thread inside a client call until it is stopped
        order.append("thread ended")

    clients.stoppable(Reader())
    clients.thread(threading.Thread(target=read, name="reader")).start()
    producer.produce(topic_name, b"x")
    assert clients.close() == []
    assert order == ["stop", "thread ended"]
    assert pending.done()
    assert len(producer) == 0
    with pytest.raises(RuntimeError):
        consumer.assignment()  # closed


@pytest.fixture(scope="module")
def loop_config(
    source: TestCluster, target: TestCluster, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("teardown")
    return write_config(directory, source.bootstrap, target.bootstrap), directory


@pytest.mark.parametrize("command", [*ONE_SHOTS, *SERVICES])
def test_every_command_ends_by_a_normal_teardown(loop_config: tuple[Path, Path], command: str) -> None:
    config, directory = loop_config
    outcome, allowed = run_many(command, config, directory, COUNT)
    assert outcome.signalled == 0, outcome.first_bad
    assert set(outcome.codes) <= allowed, outcome.first_bad
    assert outcome.torn_down == COUNT, f"atexit ran in {outcome.torn_down} of {COUNT} runs"
