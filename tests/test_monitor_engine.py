"""The monitor against the real mirror engine (``mirror run`` as a process): idle, stopped with K records, under
load (the invariant on every sample, the committed view's saw-tooth), paused (SIGSTOP) → STALL, stopped →
STOP, offsets reset backwards → REWIND."""

from __future__ import annotations

import os
import signal
import threading
import time

from confluent_kafka import Producer

from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.monitor.sampler import Sampler
from tests.support.helpers import create_topic, produce_numbered
from tests.support.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from tests.test_monitor_kafka import commit

PARTS = 3


def group_of(topic: str) -> str:
    # a group per test: a killed engine stays a member until its session times out, which would make other
    # tests' commits to a shared group fail
    return f"mw-mirror-{topic}"


def config(source, target, topic, **monitor) -> dict:
    return {
        "clusters": {"east": source.config(), "west": target.config()},
        "flows": {
            "east-west": {
                "source": "east",
                "target": "west",
                "topics": [topic],
                "checkpoint_groups": [],
                "group": group_of(topic),
                # the statuses here are about one topic: the pair's canary topic (left by other tests) stays out
                "internal_topics": False,
            }
        },
        "mirror": fast_mirror_settings(heartbeats=False, metrics_port=None, offset_sync_every=50),
        "monitor": {"interval_s": 1, "window": 3, "history": False, **monitor},
    }


def rows(sampler: Sampler) -> list[dict]:
    return sampler.sample().views[0].rows()


def all_zero(rs) -> bool:
    return all((r["committed_lag"], r["read_lag"], r["true_lag"]) == (0, 0, 0) for r in rs)


def test_idle_then_stopped_with_k_records_then_stop_and_rewind(source, target, topic_name, tmp_path):
    create_topic(source.bootstrap, topic_name, PARTS)
    produce_numbered(source.bootstrap, topic_name, 300, PARTS)
    cfg = config(source, target, topic_name)
    sampler = Sampler(config_from_dict(cfg))
    mirror = MirrorProcess(cfg, tmp_path / "mirror.yaml").start()
    try:
        # idle: the engine's idle flush makes all three lags exactly 0 on every partition
        idle = wait_until(
            lambda: (rs := rows(sampler)) and all_zero(rs) and rs, 90, 0.5, "idle mirror at lag 0", alive=mirror
        )
        assert [r["time_lag_s"] for r in idle] == [0.0] * PARTS
        for _ in range(3):  # alive and caught up: OK, and the window fills
            time.sleep(0.4)
            view = sampler.sample().views[0]
        assert view.status_name == "OK" and all_zero(view.rows())

        assert mirror.terminate() == 0
        k = 45
        produced = time.time()
        produce_numbered(source.bootstrap, topic_name, k, PARTS, start=300)
        view = sampler.sample().views[0]
        rs = view.rows()
        assert sum(r["true_lag"] for r in rs) == k and sum(r["committed_lag"] for r in rs) == k
        assert sum(r["read_lag"] for r in rs) == k  # the engine had read nothing more before it stopped
        for r in rs:
            assert 0.0 <= r["time_lag_s"] <= time.time() - produced + 1.0  # ≈ age of the oldest record

        # stopped: no member, no commits, no syncs → STOP once the silence outlasts the window (group ERR)
        view = wait_until(lambda: (v := sampler.sample().views[0]).status_name == "ERR" and v, 30, 0.5, "STOP")
        assert {r["status"] for r in view.rows()} == {"STOP"}

        # the group's offsets reset backwards → REWIND
        commit(source.bootstrap, group_of(topic_name), topic_name, {p: 10 for p in range(PARTS)})
        view = sampler.sample().views[0]
        assert {r["status"] for r in view.rows()} == {"REWIND"} and view.status_name == "ERR"
    finally:
        try:
            mirror.terminate()
        except Exception:
            mirror.kill()
        sampler.close()


class Load:
    """A producer thread writing ~rate records/s round-robin over the partitions."""

    def __init__(self, bootstrap: str, topic: str, rate: int):
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.rate, self.count = topic, rate, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            start = time.monotonic()
            for _ in range(self.rate // 20):
                self.producer.produce(self.topic, value=b"x" * 100, partition=self.count % PARTS)
                self.count += 1
            self.producer.poll(0)
            self.stop.wait(max(0.0, 0.05 - (time.monotonic() - start)))
        self.producer.flush(30)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)


def test_under_load_invariant_sawtooth_and_pause(source, target, topic_name, tmp_path):
    create_topic(source.bootstrap, topic_name, PARTS)
    cfg = config(source, target, topic_name)
    cfg["mirror"]["commit_interval_s"] = 2.0  # a visible saw-tooth at 0.25 s sampling
    sampler = Sampler(config_from_dict(cfg))
    mirror = MirrorProcess(cfg, tmp_path / "mirror.yaml").start()
    samples = []
    try:
        with Load(source.bootstrap, topic_name, rate=2000):
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline:
                view = sampler.sample().views[0]
                samples.append(view.rows())
                time.sleep(0.25)
            # paused (frozen, still a group member until its session times out) → STALL
            os.kill(mirror.proc.pid, signal.SIGSTOP)
            try:
                # still a member, so every commit interval (2 s) without a new offset counts as a repeated
                # commit of the same offset; a window of them is STALL
                stalled = wait_until(
                    lambda: {r["status"] for r in sampler.sample().views[0].rows()} == {"STALL"},
                    20,
                    0.5,
                    "STALL while paused",
                )
            finally:
                os.kill(mirror.proc.pid, signal.SIGCONT)
        checked = 0
        for rs in samples:
            for r in rs:
                if None in (r["committed_lag"], r["read_lag"], r["true_lag"]):
                    continue
                assert r["read_lag"] <= r["true_lag"] <= r["committed_lag"], r
                checked += 1
        assert checked >= len(samples)  # the invariant held on every sample of every partition
        committed = [sum(r["committed_lag"] or 0 for r in rs) for rs in samples[4:]]
        true = [sum(r["true_lag"] or 0 for r in rs) for rs in samples[4:]]
        # saw-tooth: the committed view rises between commits and drops at each commit...
        drops = sum(1 for a, b in zip(committed, committed[1:]) if b < a - 50)
        assert drops >= 2, committed
        # ...and shows more than the truth, which stays bounded (a few seconds of traffic at most)
        assert max(committed) > max(true) or sum(committed) > sum(true)
        assert max(true) < 2000 * 5, true
        assert stalled
    finally:
        try:
            mirror.terminate()
        except Exception:
            mirror.kill()
        sampler.close()


def test_producer_faster_than_a_throttled_mirror_is_warn(source, target, topic_name, tmp_path):
    create_topic(source.bootstrap, topic_name, PARTS)
    cfg = config(source, target, topic_name)
    # small fetches and few records in flight: far slower than the producer below, but every partition moves
    # (a batch of 1 makes the engine serve partitions in turns, and a partition waiting its turn is a STALL)
    cfg["mirror"].update(batch_size=30, max_in_flight=30, producer={"linger.ms": 20})
    cfg["monitor"]["window"] = 4
    sampler = Sampler(config_from_dict(cfg))
    mirror = MirrorProcess(cfg, tmp_path / "mirror.yaml").start()
    try:
        with Load(source.bootstrap, topic_name, rate=6000):
            view = wait_until(
                lambda: (v := sampler.sample().views[0]).status_name == "WARN" and v,
                40,
                0.5,
                "WARN while the producer outruns the mirror",
                alive=mirror,
            )
        assert "WARN" in {r["status"] for r in view.rows()}
        assert all(r["committed_lag"] > 0 and r["true_lag"] > 0 for r in view.rows())
        assert all(r["forecast"] in ("not catching up", "unknown") or r["catch_up_s"] > 0 for r in view.rows())
    finally:
        try:
            mirror.terminate()
        except Exception:
            mirror.kill()
        sampler.close()
