"""Checks shared by the MirrorMaker 2 tests in dedicated mode (tests/test_mm2.py) and in a Connect cluster
(tests/test_mm2_connect.py): the same figures must hold with the same bounds however MM2 is run."""

from __future__ import annotations

import json
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from harness.helpers import admin, end_offsets, produce_numbered
from harness.mirror_harness import wait_until


def connect_offsets(bootstrap: str, topic: str, connector: str, alias: str) -> dict[tuple[str, int], int]:
    """An independent read of MM2's Connect offsets (raw JSON): the next source offset per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused-never-committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    parts = admin(bootstrap).list_topics(topic, timeout=10).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in parts])
    out, eof, deadline = {}, set(), time.monotonic() + 15
    while len(eof) < len(parts) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            eof.add(msg.partition())
            continue
        name, where = json.loads(msg.key())
        if name == connector and msg.value() is not None and where.get("cluster") == alias:
            out[(where["topic"], where["partition"])] = json.loads(msg.value())["offset"] + 1
    consumer.close()
    return out


def check_steady_traffic(sampler, flow: str, source: str, target: str, lag_topic: str, target_topic: str, positions):
    """Under ~600 records/s into ``lag_topic`` (3 partitions, LogAppendTime, empty at the start, MM2 from offset 0):
    true lag within the target ends read just before and after each sample, committed lag from MM2's Connect
    offsets (``positions()``: an independent read), RPO within the ages of the records at the two target ends.
    Then idle: every figure exact. Returns (max true-lag error in records, max RPO error in ms)."""
    produced: dict[tuple[int, int], int] = {}  # (partition, offset) → timestamp ms
    stop = threading.Event()

    def produce():
        producer = Producer({"bootstrap.servers": source, "linger.ms": 5, "acks": "all"})
        i = 0
        while not stop.is_set():
            for _ in range(30):
                producer.produce(
                    lag_topic,
                    b"x" * 100,
                    None,
                    i % 3,
                    on_delivery=lambda err, m: (
                        err is None and produced.__setitem__((m.partition(), m.offset()), m.timestamp()[1])
                    ),
                )
                i += 1
            producer.poll(0)
            time.sleep(0.05)  # ~600 records/s
        producer.flush(30)

    writer = threading.Thread(target=produce)
    writer.start()
    checked, errors, rpo_errors, earlier = 0, [], [], {}
    try:
        wait_until(lambda: all(t.caught_up.is_set() for t in sampler.mm2[flow].all[:2]), 60, 0.5, "trackers caught up")
        # MM2 copying every partition (a busy machine can keep its task from starting for a while) and the monitor
        # seeing it: until then MM2 has neither committed nor synced anything, and true lag is honestly unknown (-1)
        wait_until(lambda: _true_lag_known(sampler, flow, lag_topic), 180, 0.5, "MM2 mirroring every partition")
        time.sleep(1)
        for _ in range(12):
            before = end_offsets(target, target_topic)
            committed_before = positions()
            started_ms = time.time() * 1000  # RPO is measured at some moment between this and view.ts_ms
            view = next(v for v in sampler.sample().flow_views() if v.flow == flow)
            after = end_offsets(target, target_topic)
            committed_after = positions()
            assert view.engine == "mm2" and view.error is None, view.error
            for i, (topic, p) in enumerate(zip(view.topics, view.partitions)):
                if topic != lag_topic:
                    continue
                end, true_lag = int(view.source_end[i]), int(view.true_lag[i])
                # the topic started empty and MM2 from offset 0: target offsets equal source offsets
                assert end - after[p] <= true_lag <= end - before[p], (p, end, before[p], after[p], true_lag)
                errors.append(true_lag - (end - after[p]))
                # MM2's committed position as the monitor's tracker has it: never ahead of the Connect offsets topic,
                # and at most one flush (1 s here) plus the tracker's fetch behind it
                assert earlier.get((topic, p), -1) <= int(view.committed[i]) <= committed_after[(topic, p)]
                # RPO: the oldest source record not on the target is one of the records at before..after
                rpo_ms = view.time_lag_s[i] * 1000
                oldest = produced.get((p, before[p]))
                newest = produced.get((p, after[p]))
                if true_lag > 0 and oldest is not None:
                    low = 0 if newest is None else started_ms - newest
                    assert low - 5 <= rpo_ms <= view.ts_ms - oldest + 5, (p, low, rpo_ms, view.ts_ms - oldest)
                    rpo_errors.append(rpo_ms - low)
                checked += 1
            earlier = committed_before
            time.sleep(0.7)
    finally:
        stop.set()
        writer.join()
    assert checked >= 30
    # idle: every figure is exact, committed lag from MM2's Connect offsets included
    ends = end_offsets(source, lag_topic)
    wait_until(lambda: end_offsets(target, target_topic) == ends, 60, 0.5, "MM2 caught up")
    wait_until(
        lambda: all(positions().get((lag_topic, p)) == e for p, e in ends.items()), 30, 0.5, "MM2 committed everything"
    )
    time.sleep(1.5)
    view = next(v for v in sampler.sample().flow_views() if v.flow == flow)
    rows = [r for r in view.rows() if r["topic"] == lag_topic]
    assert [(r["committed"], r["committed_lag"], r["true_lag"], r["time_lag_s"]) for r in rows] == [
        (ends[p], 0, 0, 0.0) for p in range(3)
    ]
    assert view.heartbeat_age_s is not None and view.heartbeat_age_s < 5
    return max(errors), max(rpo_errors, default=0.0)


def _true_lag_known(sampler, flow: str, topic: str) -> bool:
    view = next(v for v in sampler.sample().flow_views() if v.flow == flow)
    return all(int(lag) >= 0 for t, lag in zip(view.topics, view.true_lag) if t == topic)


def write_config_and_lag(command: str, source_file, out, source: str | None = None) -> dict:
    """`mirrorwatch config <command> SOURCE --out OUT`, then `monitor lag --config OUT --json` as a user would run
    them, each expected to succeed; the one flow's body of the lag report."""
    import subprocess
    import sys
    from pathlib import Path

    bin_dir = Path(sys.executable).parent
    runs = (
        [str(bin_dir / "mirrorwatch"), "config", command, str(source_file), "--out", str(out)],
        # the command's own deadline well above what it needs (seconds): the test checks the figures, not the speed,
        # and a loaded 2-core machine once took over 30 s here
        [str(bin_dir / "monitor"), "lag", "--config", str(out), "--json", "--timeout", "90"],
    )
    for argv in runs:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=150)
        assert done.returncode == 0, (argv[:3], done.stderr)
    flows = json.loads(done.stdout)["flows"]
    if source is not None:  # several flows: the one from that source
        flows = [f for f in flows if f["source"] == source]
    (body,) = flows
    return body


def check_transactional_traffic(sampler, flow: str, source: str, target: str, topic: str, target_topic: str) -> dict:
    """An MM2 flow with exactly-once source support (its target holds commit markers): under ~600 records/s into
    ``topic`` (3 partitions, empty at the start), true lag is never below an independent read_committed reader's
    count of the records on the target (harness/lag_accuracy.measure with its counter), and above it by at
    most 5 s of one partition's records at p99 (the sync-only bound, as under identity); idle: exactly 0. Returns
    the figures (offsets without a record on the target, p50/p99 above the truth)."""
    import numpy as np

    from harness.lag_accuracy import RateProducer, measure
    from harness.transactional_mirror import CommittedCounter

    rate, parts = 600, 3
    counter = CommittedCounter(target, target_topic, parts)
    producer = RateProducer(source, topic, rate, parts)
    counter.start()
    try:
        wait_until(lambda: all(t.caught_up.is_set() for t in sampler.mm2[flow].all[:2]), 60, 0.5, "trackers caught up")
        # MM2 mirroring (its exactly-once worker fences and starts its tasks first) and the monitor seeing it
        produce_numbered(source, topic, parts, parts)
        wait_until(
            lambda: all(int(v) == 0 for v in next(v for v in sampler.sample().flow_views() if v.flow == flow).true_lag),
            180,
            0.5,
            "MM2 mirroring a first record of each partition",
        )
        producer.start()
        time.sleep(2)
        m = measure(sampler, source, target, topic, target_topic, parts, [0] * parts, 12, 0.3, counter)
        producer.stop()
        ends = end_offsets(source, topic)
        wait_until(
            lambda: counter.count_below(counter.stable_ends()) == [ends[p] for p in range(parts)],
            60,
            0.5,
            "MM2 caught up",
        )
        wait_until(
            lambda: all(int(v) == 0 for v in next(v for v in sampler.sample().flow_views() if v.flow == flow).true_lag),
            30,
            0.5,
            "true lag 0 when idle",
        )
        stable = counter.stable_ends()
        markers = [e - c for e, c in zip(stable, counter.count_below(stable))]
    finally:
        producer.stop_event.set()
        counter.stop()
    true_lag, lower, over = np.asarray(m.true_lag), np.asarray(m.lower), m.over()
    assert all(x > 0 for x in markers), markers  # MM2 really wrote in transactions: commit markers on the target
    assert (true_lag >= lower).all(), list(zip(true_lag[true_lag < lower], lower[true_lag < lower]))
    assert np.percentile(over, 99) <= rate / parts * 5
    return {"markers": markers, "over_p50": float(np.percentile(over, 50)), "over_p99": float(np.percentile(over, 99))}
