"""Records removed from the source (DeleteRecords, as retention does) before the mirror read them: the engine
refuses by default with the exact count, or continues and counts them; the monitor and `mirror failover check`
report the same count."""

from __future__ import annotations

import re
import urllib.request

from confluent_kafka import Producer, TopicPartition

from harness.helpers import admin, create_topic, produce_numbered
from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.monitor.sampler import Sampler

from .support.mirror_cli import check
from .support.mirror_flows import count_on

PARTS = 2


def config(source, target, topic, **mirror) -> dict:
    return {
        "clusters": {"east": source.config(), "west": target.config()},
        "flows": {
            "east-west": {
                "source": "east",
                "target": "west",
                "topics": [topic],
                "checkpoint_groups": [],
                "group": f"mw-mirror-{topic}",
            }
        },
        "mirror": fast_mirror_settings(heartbeats=False, **mirror),
        "monitor": {"interval_s": 1, "window": 3, "history": False},
    }


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    client = admin(bootstrap)
    tp = TopicPartition(topic, partition, offset)
    client.delete_records([tp])[tp].result(30)


def test_retention_gap_refused_then_counted(source, target, topic_name, tmp_path):
    create_topic(source.bootstrap, topic_name, PARTS)
    produce_numbered(source.bootstrap, topic_name, 3000, PARTS)  # 1500 per partition
    cfg = config(source, target, topic_name, metrics_port=None)
    path = tmp_path / "mirror.yaml"
    with MirrorProcess(cfg, path) as mirror:
        wait_until(lambda: count_on(target.bootstrap, f"east.{topic_name}") == 3000, 90, what="mirrored", alive=mirror)
        sampler = Sampler(config_from_dict(cfg))
        try:
            wait_until(
                lambda: all(r["committed_lag"] == 0 for r in sampler.sample().views[0].rows()), 30, what="committed"
            )
        finally:
            sampler.close()
    # stopped: 1000 more on partition 0 (offsets 1500-2499), then offsets 1500-1999 removed
    producer = Producer({"bootstrap.servers": source.bootstrap, "acks": "all"})
    for i in range(1000):
        producer.produce(topic_name, value=f"late{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    delete_records_before(source.bootstrap, topic_name, 0, 2000)

    # default: refuses with one line naming topic, partition, offset range and count; exit code 4
    mirror = MirrorProcess(cfg, path, log_name="refuse.log").start()
    assert mirror.wait(60) == 4
    lines = [l for l in mirror.log_text().splitlines() if "records lost" in l]
    assert lines and f"{topic_name}[0] offsets 1500-1999 (500 record(s))" in lines[-1], mirror.log_text()[-2000:]
    assert count_on(target.bootstrap, f"east.{topic_name}") == 3000  # nothing past the gap was mirrored

    # the monitor: 500 on partition 0, status LOST, group ERR
    sampler = Sampler(config_from_dict(cfg))
    try:
        view = sampler.sample().views[0]
    finally:
        sampler.close()
    rows = {r["partition"]: r for r in view.rows()}
    assert rows[0]["records_lost"] == 500 and rows[0]["status"] == "LOST" and rows[1]["records_lost"] == 0
    assert view.status_name == "ERR"
    # failover check: the same 500, at best DEGRADED
    code, report = check(path)
    assert code >= 1 and report["records_lost"] == 500
    assert [t["records_lost"] for t in report["topics"] if t["topic"] == topic_name] == [500]

    # on_records_lost: continue → mirrors the rest, logs at ERROR, counts exactly 500
    cfg["mirror"]["on_records_lost"] = "continue"
    cfg["mirror"]["metrics_port"] = 0
    with MirrorProcess(cfg, path, log_name="continue.log") as mirror:
        wait_until(
            lambda: count_on(target.bootstrap, f"east.{topic_name}") == 3500, 90, what="the rest mirrored", alive=mirror
        )
        port = int(re.search(r"metrics on http://[^:]+:(\d+)/", mirror.log_text()).group(1))
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        lost = {
            l.rsplit(" ", 1)[0]: l.rsplit(" ", 1)[1]
            for l in body.splitlines()
            if l.startswith("mirrorwatch_mirror_records_lost_total{") and f'topic="{topic_name}"' in l
        }
        assert sorted(lost.values()) == ["0.0", "500.0"]  # partition 1 lost nothing
        assert [k for k, v in lost.items() if v == "500.0"][0].count('partition="0"') == 1
        assert re.search(
            r"ERROR.*records lost before they were mirrored: .*offsets 1500-1999 \(500 record", mirror.log_text()
        )
