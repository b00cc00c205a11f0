"""Running `canary check` in tests: per-test canary configs, the command as a process, its JSON answer."""

from __future__ import annotations

import json
import subprocess
import time

import yaml
from confluent_kafka import TopicPartition

from harness.helpers import admin
from harness.mirror_harness import BIN, MirrorProcess, fast_mirror_settings

CRIT_S = 6.0  # the tests' critical timeout (the default is 30 s)


def canary_config(mirror_config: dict, topic_name: str, **canary) -> dict:
    """Per-test canary and heartbeat topics, so tests never see each other's events or heartbeats.

    The flow mirrors no ordinary topic: the mirror always mirrors ``canary.topic`` and the heartbeats topic.
    """
    mirror_config["flows"]["east-west"].update({"topics": [f"{topic_name}-nothing"], "group": f"g-{topic_name}"})
    mirror_config["mirror"] = fast_mirror_settings(heartbeats_topic=f"hb.{topic_name}")
    mirror_config["canary"] = {
        "topic": f"mw.canary.{topic_name}",
        "crit_latency_s": CRIT_S,
        "warn_latency_s": 3.0,
        "interval_s": 1,
        "heartbeat_max_age_s": 30,
        "metrics_port": 0,
        "connect_timeout_s": 3,
        **canary,
    }
    return mirror_config


def write(cfg: dict, path) -> str:
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return str(path)


class CheckRun:
    def __init__(self, proc: subprocess.CompletedProcess, elapsed: float, as_json: bool):
        self.rc, self.elapsed, self.stdout, self.stderr = proc.returncode, elapsed, proc.stdout, proc.stderr
        self.body = json.loads(proc.stdout) if as_json and proc.stdout.strip() else None


def run_check(config_path, *args: str, as_json: bool = True, timeout_s: float | None = None) -> CheckRun:
    cmd = [str(BIN / "canary"), "check", "--config", str(config_path), *args]
    if as_json:
        cmd.append("--json")
    if timeout_s is not None:
        cmd += ["--timeout", str(timeout_s)]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return CheckRun(proc, time.monotonic() - started, as_json)


def check_until(config_path, rc: int, within_s: float, alive: MirrorProcess | None = None) -> CheckRun:
    """Run checks until one exits ``rc`` (the mirror needs a moment to find a new canary topic)."""
    deadline = time.monotonic() + within_s
    while True:
        run = run_check(config_path)
        if run.rc == rc:
            return run
        if alive is not None and not alive.running():
            raise AssertionError(f"mirror exited:\n{alive.log_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no exit {rc} within {within_s}s; last: {run.rc} {run.stdout} {run.stderr}")
        time.sleep(0.5)


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    client = admin(bootstrap)  # kept: a collected client never resolves its futures
    tp = TopicPartition(topic, partition, offset)
    client.delete_records([tp])[tp].result(30)
