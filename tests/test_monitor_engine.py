"""The monitor against the real mirror engine (``mirror run`` as a process): idle, stopped with K records, under
load (the invariant on every sample, the committed view's saw-tooth), paused (SIGSTOP) → STALL, stopped →
STOP, offsets reset backwards → REWIND."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

from confluent_kafka import Producer

from harness.helpers import create_topic, produce_numbered
from harness.mirror_harness import BIN, MirrorProcess, fast_mirror_settings, wait_until
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.status import NOT_MOVING_AFTER_S
from mirrorwatch.monitor.sampler import Sampler

from .support.standin_mirror import commit

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


def all_stop(view):
    """The view, once every partition is STOP (else None)."""
    return view if {r["status"] for r in view.rows()} == {"STOP"} else None


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
        # alive and caught up: OK once the window has filled
        view = wait_until(
            lambda: (v := sampler.sample().views[0]).complete == 1.0 and v, 30, 0.4, "a full window", alive=mirror
        )
        assert view.status_name == "OK" and all_zero(view.rows()) and view.reasons == []

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

        # stopped: no member, no commits, no syncs → STOP on every partition once the silence outlasts the window
        # (each partition's window ends at its own newest commit: they turn STOP one by one, the group ERR at the
        # first)
        view = wait_until(lambda: all_stop(sampler.sample().views[0]), 30, 0.5, "STOP on every partition")
        assert view.status_name == "ERR"
        # the reasons say it, on the list the API, the webhooks and `monitor lag` print
        (reason,) = view.reasons
        assert reason.startswith(f"{PARTS} partitions STOP (the mirror stopped committing"), reason

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


def monitor_lag(path) -> dict:
    """`monitor lag --json` as a person runs it (its default three samples a second apart): the one flow's body."""
    done = subprocess.run(
        [str(BIN / "monitor"), "lag", "--config", str(path), "--json", "--timeout", "30"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    body = json.loads(done.stdout)
    assert body["judged"]["by"] == "one look" and body["judged"]["samples"] == 3, body["judged"]
    (flow,) = body["flows"]
    return flow


def test_monitor_lag_never_says_ok_while_the_mirror_is_frozen(source, target, topic_name, tmp_path):
    """The issue's run: a mirror frozen (SIGSTOP) under traffic. `monitor lag` says OK while it mirrors, never OK while
    it is frozen (UNKNOWN, "cannot tell stopped from slow", until the RPO passes the rules' 30 s; then ERR, STOP on
    every partition), and every status that is not OK carries its reasons."""
    create_topic(source.bootstrap, topic_name, PARTS)
    cfg = config(source, target, topic_name)
    mirror = MirrorProcess(cfg, tmp_path / "mirror.yaml").start()
    frozen = []
    try:
        with Load(source.bootstrap, topic_name, rate=300):
            wait_until(lambda: monitor_lag(mirror.path)["status"] == "OK", 90, 0.5, "OK while mirroring", alive=mirror)
            os.kill(mirror.proc.pid, signal.SIGSTOP)
            try:
                while not frozen or frozen[-1]["status"] != "ERR":
                    frozen.append(flow := monitor_lag(mirror.path))
                    statuses = [p["status"] for p in flow["partitions"]]
                    print(flow["status"], statuses, flow["totals"]["rpo_seconds"], flow["reasons"])
                    assert flow["status"] != "OK" and "OK" not in statuses, flow
                    assert flow["reasons"], flow
                    assert len(frozen) < 30, "no STOP after 30 looks"
            finally:
                os.kill(mirror.proc.pid, signal.SIGCONT)
        stopped = frozen[-1]
        assert {p["status"] for p in stopped["partitions"]} == {"STOP"}, stopped
        assert stopped["totals"]["rpo_seconds"] > NOT_MOVING_AFTER_S
        assert any("not seen moving with RPO over 30 s" in line for line in stopped["reasons"]), stopped["reasons"]
        assert frozen[0]["status"] == "UNKNOWN", frozen[0]  # the first look, seconds after the freeze
        assert any("cannot tell stopped from slow" in line for line in frozen[0]["reasons"]), frozen[0]["reasons"]
    finally:
        try:
            mirror.terminate()
        except Exception:
            mirror.kill()


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
