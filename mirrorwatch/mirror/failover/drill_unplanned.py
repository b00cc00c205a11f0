"""``mirror failover drill --unplanned``: the whole disaster-recovery cycle, on fresh local clusters.

1. traffic at a set rate to east, mirrored to west; the application (a consumer group) reads it on east;
2. the mirror falls behind (frozen, as a mirror lagging under load), the traffic goes on, the application reads
   part of what the mirror has not copied;
3. the source is killed (SIGKILL, all its brokers), the mirror with it;
4. the group is failed over through its checkpoints, the producers move to west, the application reads there;
5. the old source is restarted; 6. ``mirror failback tail`` finds and exports the tail;
7–9. the failback (``drill_home``): the old primary wiped (``mirror failback plan --wipe``, refused until the
   tail is saved), the reverse flow run until true lag is 0, and a switchover home.

An independent reader (its own consumer, its own decoding of the export file; nothing shared with the tail
code) then counts by key and sequence: the export holds exactly the east records missing from west, the tail's
count equals that count, and every record the producers had acknowledged (to east before the crash, to west
after the failover) is on east, home again, or in the export.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from ...core.cli import UserError
from ...core.clients import client_log, make_admin
from ...core.config import ClusterConfig
from .drill_home import consume_to_end, go_home

BIN = Path(sys.executable).parent
AFTER = 100  # records the producers write to west after the failover


def _produce(bootstrap: str, topic: str, start: int, count: int, rate: int, acked: set[bytes]) -> None:
    """``count`` records ``k<i%100>`` / ``<i>`` at ``rate`` per second; the values the broker acknowledged go to
    ``acked`` (a record whose acknowledgement was lost in the crash is not counted as written)."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "logger": client_log}
    )

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.add(msg.value())

    began = time.monotonic()
    for i in range(start, start + count):
        producer.produce(topic, str(i).encode(), f"k{i % 100}".encode(), on_delivery=delivered)
        producer.poll(0)
        ahead = (i - start + 1) / rate - (time.monotonic() - began)
        if ahead > 0:
            time.sleep(ahead)
    producer.flush(30)


def read_values(bootstrap: str, topic: str) -> list[tuple[bytes, bytes]]:
    """The independent reader: (key, value) of every record of ``topic``, from its start to its end now. It
    shares no code with what it checks: its own consumer, its own reading loop."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "drill-independent-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "logger": client_log,
        }
    )
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in parts}
        ends = {p: high for p, (_low, high) in marks.items()}
        # from each partition's first record now (a wipe moves it past offset 0)
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _high) in marks.items()])
        done = {p for p, (low, high) in marks.items() if low >= high}
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 120
        while len(done) < len(ends) and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.5):
                partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                if msg.error():
                    if msg.partition() is not None and offset >= ends[partition]:
                        done.add(partition)  # the end-of-partition event
                    continue
                if offset < ends[partition]:
                    out.append((bytes(msg.key() or b""), bytes(msg.value() or b"")))
                if offset >= ends[partition] - 1:
                    done.add(partition)
        if len(done) < len(ends):
            raise UserError(f"the independent reader could not read {topic} at {bootstrap} to its end", 1)
        return out
    finally:
        consumer.close()


def _consume(bootstrap: str, topic: str, group: str, count: int) -> int:
    """The application: read ``count`` records, committing after each batch."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "logger": client_log,
        }
    )
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 90
    try:
        while seen < count and time.monotonic() < deadline:
            batch = [m for m in consumer.consume(min(200, count - seen), 0.5) if not m.error()]
            if batch:
                seen += len(batch)
                consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    if seen < count:
        raise UserError(f"the drill's application read {seen} of {count} records of {topic} in 90 s", 1)
    return seen


def _mirror(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "mirror"), *args], capture_output=True, text=True, timeout=240)


def _wait(what: str, done: Callable[[], bool], timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise UserError(f"the drill waited {timeout_s:.0f} s for {what}", 1)
        time.sleep(0.5)


def _ends(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "drill-ends", "logger": client_log})
    try:
        md = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.partitions)
    finally:
        consumer.close()


def _checkpointed(west: str, group: str) -> int:
    """The group's newest checkpointed source offsets on west, summed (read as JSON, as the topic holds them)."""
    newest: dict[tuple[str, int], int] = {}
    for _key, value in (
        read_values(west, "east.checkpoints.internal") if _ends(west, "east.checkpoints.internal") else []
    ):
        row = json.loads(value)
        if row.get("group") == group:
            newest[(row["topic"], row["partition"])] = int(row["upstream_offset"])
    return sum(newest.values())


def _config(east: str, west: str, topic: str, group: str) -> dict[str, Any]:
    return {
        "clusters": {"east": {"bootstrap.servers": east}, "west": {"bootstrap.servers": west}},
        "flows": {"drill": {"source": "east", "target": "west", "topics": [topic], "checkpoint_groups": [group]}},
        "mirror": {"commit_interval_s": 1, "checkpoint_interval_s": 1, "offset_sync_every": 100, "metrics_port": None},
        "canary": {"metrics_port": None},
    }


def _tail_file(path: Path) -> list[tuple[bytes, bytes]]:
    """The export, decoded here without the tail module's reader (the format is documented in docs/dr.md)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [(base64.b64decode(r["key"] or ""), base64.b64decode(r["value"] or "")) for r in rows]


def run_unplanned(records: int, rate: int, workdir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    from ...localkafka import LocalClusters

    run_id = str(int(time.time()))
    topic, group = f"drill-{run_id}", f"drill-app-{run_id}"
    clusters = LocalClusters(["east", "west"], workdir / "clusters").start()
    east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
    path = workdir / "drill.yaml"
    path.write_text(yaml.safe_dump(_config(east, west, topic, group)))
    acked: set[bytes] = set()
    mirror = None
    try:
        for bootstrap in (east, west):  # west's own topic of that name gets the producers after the failover
            admin = make_admin(ClusterConfig.model_validate({"bootstrap.servers": bootstrap}), "mirrorwatch-drill")
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        log = (workdir / "mirror.log").open("ab")  # closed with the drill's process
        mirror = subprocess.Popen([str(BIN / "mirror"), "run", "--config", str(path)], stdout=log, stderr=log)
        first = records // 2
        say(f"1. {first} records at {rate}/s to east:{topic}, mirrored; the application (group {group}) reads them")
        _produce(east, topic, 0, first, rate, acked)
        _consume(east, topic, group, first)
        _wait("the mirror to copy them", lambda: _ends(west, f"east.{topic}") >= first)
        _wait("the group's checkpoint at its commit", lambda: _checkpointed(west, group) >= first)
        say(f"2. the mirror falls behind (frozen); {records - first} more records; the application reads half")
        os.kill(mirror.pid, signal.SIGSTOP)
        _produce(east, topic, first, records - first, rate, acked)
        _consume(east, topic, group, (records - first) // 2)
        say("3. the source is killed (SIGKILL, all its brokers), and the mirror")
        clusters["east"].kill()
        mirror.kill()
        mirror.wait(30)
        say(f"4. the group fails over through its checkpoints; the producers move to west ({AFTER} records)")
        applied = _mirror("failover", "translate", "--config", str(path), "--group", group, "--apply", "--json")
        if applied.returncode != 0:
            raise UserError(f"the failover of group {group} failed: {applied.stderr.strip()[-300:]}", 1)
        _produce(west, topic, records, AFTER, rate, acked)
        consume_to_end(west, [f"east.{topic}", topic], group)
        say("5. the old source is restarted")
        clusters["east"].start()
        say("6. mirror failback tail: the records west never received, exported")
        out = workdir / "tail.jsonl"
        tail = _mirror("failback", "tail", "--config", str(path), "--out", str(out), "--json")
        if tail.returncode != 0:
            raise UserError(f"mirror failback tail failed: {tail.stderr.strip()[-300:]}", 1)
        report = json.loads(tail.stdout)
        on_east, on_west = read_values(east, topic), read_values(west, f"east.{topic}")
        home = go_home(path, Path(f"{out}.manifest.json"), group, workdir, say)
        on_home = read_values(east, topic) + read_values(east, f"east.{topic}")
    finally:
        if mirror is not None and mirror.poll() is None:
            mirror.kill()
        clusters.stop()
    return _verdict(report, on_east, on_west, _tail_file(out), acked, on_home, home)


def _verdict(
    report: dict[str, Any],
    on_east: list[tuple[bytes, bytes]],
    on_west: list[tuple[bytes, bytes]],
    exported: list[tuple[bytes, bytes]],
    acked: set[bytes],
    on_home: list[tuple[bytes, bytes]],
    home: dict[str, Any],
) -> dict[str, Any]:
    """The independent reader's counts. The tail: the east records missing from west (before the wipe), by key
    and sequence. Home: every acknowledged record (written to east before the crash, or to west after the
    failover) on east after the failback, or in the export."""
    missing = sorted(set(on_east) - set(on_west))
    accounted = {v for _, v in on_home} | {v for _, v in exported}
    moved = home["switchover"]["groups"]
    result = {
        "mode": "unplanned",
        "produced_acknowledged": len(acked),
        "on_east": len(on_east),
        "on_west": len(on_west),
        "tail_records": report["records"],
        "independent_missing": len(missing),
        "exported": len(exported),
        "export_matches": sorted(exported) == missing,
        "on_home": len(on_home),
        "on_home_distinct": len(set(on_home)),
        "unaccounted": len(acked - accounted),
        "groups_read_into_tail": report["groups_read_into_tail"],
        "wiped_partitions": len(home["plan"]["wiped"]),
        "switched_home": home["switchover"]["switched"],
        "group_home_partitions": sum(len(g["partitions"]) for g in moved),
        "failback_steps": home["plan"]["steps"],
    }
    result["ok"] = (
        result["export_matches"]
        and report["records"] == len(missing) == len(exported)
        and result["unaccounted"] == 0
        and result["switched_home"]
    )
    return result
