"""The mirror's flows and consumer groups on the real clusters, as the mirror tests set them up and read them: a
flow's config for one topic, what a topic holds, a group's commits, a commit made by hand."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

from harness.helpers import admin, end_offsets
from harness.mirror_harness import fast_mirror_settings


def config_for(mirror_config: dict[str, Any], topic: str, group: str, **flow: Any) -> dict[str, Any]:
    mirror_config["flows"]["east-west"].update({"topics": [topic], "group": group, **flow})
    mirror_config["mirror"] = fast_mirror_settings()
    return mirror_config


def count_on(bootstrap: str, topic: str) -> int:
    topics = admin(bootstrap).list_topics(timeout=10).topics
    return sum(end_offsets(bootstrap, topic).values()) if topic in topics else 0


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def consume_and_commit(bootstrap: str, topic: str, group: str, partition: int, upto: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for attempt in range(20):  # a fresh cluster's group coordinator may still be loading
            try:
                consumer.commit(offsets=[TopicPartition(topic, partition, upto)], asynchronous=False)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or attempt == 19:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()
