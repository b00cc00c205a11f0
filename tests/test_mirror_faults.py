"""The mirror under faults: killed mid-stream, target restarted, a record the target refuses."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from harness.helpers import admin, create_topic, end_offsets, produce_numbered, read_all
from harness.mirror_harness import MirrorProcess, wait_until

from .support.mirror_flows import committed_offsets, config_for, count_on


def local_only(cluster):
    if cluster.local is None:
        pytest.skip("needs the local launcher (stops a cluster)")


def test_sigkill_three_times_loses_nothing(source, target, topic_name, mirror_config, tmp_path):
    total, parts, group = 100_000, 6, f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, parts)
    cfg = config_for(mirror_config, topic_name, group)
    mirror = MirrorProcess(cfg, tmp_path / "m.yaml")
    producing = threading.Thread(
        target=produce_numbered,
        args=(source.bootstrap, topic_name, total),
        kwargs={"partitions": parts, "value_size": 200, "linger.ms": 20, "batch.num.messages": 500},
    )
    windows = []  # per kill: (committed, source end) per partition — duplicates must lie in between
    producing.start()
    mirror.start()
    last_commit = 0
    for kill in range(3):
        # real progress since the last kill: the group committed at least 5000 more records
        floor = min(last_commit + 5000, total)  # or everything, when the mirror has caught up already
        wait_until(
            lambda: sum(committed_offsets(source.bootstrap, group, topic_name, parts).values()) >= floor,
            90,
            what=f"commits before kill {kill}",
            alive=mirror,
        )
        mirror.kill()
        windows.append(
            (committed_offsets(source.bootstrap, group, topic_name, parts), end_offsets(source.bootstrap, topic_name))
        )
        last_commit = sum(max(0, o) for o in windows[-1][0].values())
        mirror.start()
    producing.join()
    wait_until(
        lambda: (
            committed_offsets(source.bootstrap, group, topic_name, parts) == end_offsets(source.bootstrap, topic_name)
        ),
        120,
        what="catching up after the kills",
        alive=mirror,
    )
    assert mirror.terminate() == 0
    seen = Counter(
        (m.partition(), int(m.value()[1:].split(b".")[0])) for m in read_all(target.bootstrap, f"east.{topic_name}")
    )
    assert {i for _, i in seen} == set(range(total)), "lost records"
    duplicates = [key for key, n in seen.items() for _ in range(n - 1)]
    source_offset = {
        (m.partition(), int(m.value()[1:].split(b".")[0])): m.offset() for m in read_all(source.bootstrap, topic_name)
    }
    for partition, i in duplicates:
        offset = source_offset[(partition, i)]
        assert any(c[partition] <= offset < e[partition] for c, e in windows), (
            f"duplicate {i} outside every in-flight window"
        )
    print(f"sigkill x3: {total} records, {len(duplicates)} duplicates, 0 lost")


def test_target_restart_mid_stream_recovers(source, target, topic_name, mirror_config, tmp_path):
    local_only(target)
    total = 30_000
    create_topic(source.bootstrap, topic_name, 3)
    cfg = config_for(mirror_config, topic_name, f"g-{topic_name}")
    producing = threading.Thread(
        target=produce_numbered,
        args=(source.bootstrap, topic_name, total),
        kwargs={"partitions": 3, "value_size": 200, "linger.ms": 20},
    )
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        producing.start()
        wait_until(lambda: count_on(target.bootstrap, f"east.{topic_name}") > 3000, 60, what="mirroring", alive=mirror)
        target.local.stop()
        time.sleep(3)
        target.local.start()
        producing.join()
        wait_until(
            lambda: (
                committed_offsets(source.bootstrap, f"g-{topic_name}", topic_name, 3)
                == end_offsets(source.bootstrap, topic_name)
            ),
            120,
            what="recovery after the target restart",
            alive=mirror,
        )
        assert mirror.running()
    values = {m.value() for m in read_all(target.bootstrap, f"east.{topic_name}")}
    assert len(values) == total


def test_record_too_large_for_target_stops_without_skipping(source, target, topic_name, mirror_config, tmp_path):
    group = f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, 1)
    create_topic(target.bootstrap, f"east.{topic_name}", 1, config={"max.message.bytes": "2000"})
    produce_numbered(source.bootstrap, topic_name, 10, partitions=1)
    produce_numbered(source.bootstrap, topic_name, 1, partitions=1, start=10, value_size=8000)  # offset 10: too large
    produce_numbered(source.bootstrap, topic_name, 10, partitions=1, start=11)
    cfg = config_for(mirror_config, topic_name, group)
    mirror = MirrorProcess(cfg, tmp_path / "m.yaml").start()
    rc = mirror.wait(60)
    assert rc == 1
    errors = [l for l in mirror.log_text().splitlines() if l.startswith("mirror: ")]
    assert len(errors) == 1, mirror.log_text()[-3000:]
    assert f"cannot mirror {topic_name}[0] offset 10 (8003 bytes) to west:east.{topic_name}: " in errors[0]
    assert "MSG_SIZE_TOO_LARGE" in errors[0] and "Traceback" not in mirror.log_text()
    assert committed_offsets(source.bootstrap, group, topic_name, 1)[0] <= 10  # never past the refused record
    # raise the limit on the target and restart: the record is mirrored, nothing skipped
    tgt_admin = admin(target.bootstrap)
    entry = ConfigEntry("max.message.bytes", "1000000", incremental_operation=AlterConfigOpType.SET)
    res = ConfigResource(ConfigResource.Type.TOPIC, f"east.{topic_name}", incremental_configs=[entry])
    tgt_admin.incremental_alter_configs([res])[res].result(30)
    with MirrorProcess(cfg, tmp_path / "m.yaml", log_name="m2.log") as again:
        wait_until(
            lambda: committed_offsets(source.bootstrap, group, topic_name, 1)[0] == 21,
            60,
            what="mirroring after the fix",
            alive=again,
        )
    keys = [m.key() for m in read_all(target.bootstrap, f"east.{topic_name}")]
    assert set(keys) == {f"k{i}".encode() for i in range(21)}
    assert keys.count(b"k10") == 1
