"""Sources with offset gaps: a transactional producer (commit markers — the last one after the last record —
and aborted transactions) and a compacted topic. Idle, the mirror shows lag 0 and OK; so does a watched plain
consumer group that read everything (the real engine, the monitor's real sampling code)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer

from harness.helpers import create_topic, end_offsets, produce_numbered
from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.monitor.sampler import Sampler

from .support.mirror_flows import count_on

PARTS = 3


def produce_transactions(bootstrap: str, topic: str, committed: int, aborted: int, size: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    for i in range(committed + aborted):
        producer.begin_transaction()
        for p in range(PARTS):
            for j in range(size):
                producer.produce(topic, key=f"k{j}".encode(), value=f"{i}-{j}".encode(), partition=p)
        if i % 3 == 1 and aborted > 0:
            producer.flush(30)  # on the log, then aborted: offsets no committed read ever returns
            producer.abort_transaction(30)
            aborted -= 1
        else:
            producer.commit_transaction(30)  # the last one ends with a commit marker after the last record


def consume_all(bootstrap: str, topic: str, group: str, expect: int) -> None:
    """A plain librdkafka consumer group reads every committed record and commits (read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 60
    try:
        while seen < expect and time.monotonic() < deadline:
            seen += sum(1 for m in consumer.consume(1000, 0.5) if not m.error())
        time.sleep(1.0)  # a last fetch moves the position past the final commit marker
        consumer.consume(1000, 0.5)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert seen == expect


def test_transactional_and_compacted_sources_idle_at_zero(source, target, topic_name, tmp_path):
    tx_topic, compacted = f"{topic_name}-tx", f"{topic_name}-cmp"
    create_topic(source.bootstrap, tx_topic, PARTS)
    create_topic(source.bootstrap, compacted, PARTS, config={"cleanup.policy": "compact"})
    produce_transactions(source.bootstrap, tx_topic, committed=7, aborted=3, size=50)
    produce_numbered(source.bootstrap, compacted, 300, PARTS)
    ends = end_offsets(source.bootstrap, tx_topic)
    assert all(end > 350 for end in ends.values())  # markers and aborted records: offsets beyond the 350 records
    group = f"app-{topic_name}"
    consume_all(source.bootstrap, tx_topic, group, 350 * PARTS)
    cfg = {
        "clusters": {"east": source.config(), "west": target.config()},
        "flows": {
            "east-west": {
                "source": "east",
                "target": "west",
                "topics": [tx_topic, compacted],
                "checkpoint_groups": [],
                "group": f"mw-mirror-{topic_name}",
            }
        },
        "mirror": fast_mirror_settings(heartbeats=False, metrics_port=None),
        "monitor": {
            "interval_s": 1,
            "window": 3,
            "history": False,
            "group_commit_interval_s": 1,
            "groups": [{"cluster": "east", "group": group}],
        },
    }
    sampler = Sampler(config_from_dict(cfg))
    try:
        with MirrorProcess(cfg, tmp_path / "mirror.yaml") as mirror:
            wait_until(
                lambda: count_on(target.bootstrap, f"east.{tx_topic}") == 350 * PARTS,
                90,
                what="committed records mirrored",
                alive=mirror,
            )
            flow = wait_until(
                lambda: (
                    (v := sampler.sample().views[0])
                    and all(
                        r["true_lag"] == 0 and r["committed_lag"] == 0 and r["rpo_seconds"] == 0.0 for r in v.rows()
                    )
                    and v
                ),
                30,
                0.5,
                "idle flow at lag 0",
                alive=mirror,
            )
            for _ in range(4):  # stays OK over the window: no STALL on the final commit marker
                time.sleep(1.0)
                snap = sampler.sample()
            flow, plain = snap.views
            assert flow.status_name == "OK" and {r["status"] for r in flow.rows()} == {"OK"}
            assert all(r["true_lag"] == 0 and r["read_lag"] == 0 and r["committed_lag"] == 0 for r in flow.rows())
            assert plain.status_name == "OK" and all(r["committed_lag"] == 0 for r in plain.rows())
            assert all(r["forecast"] == "caught up" for r in flow.rows())
    finally:
        sampler.close()
