"""``monitor run`` as a service: HTTP API and metrics over real sockets, an unreachable cluster → UNKNOWN and
recovery, history closed on shutdown, SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime

import pyarrow.parquet as pq
import pytest
import requests

from harness.helpers import create_topic, produce_numbered
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.records import lag_sample_arrow_schema
from mirrorwatch.localkafka import LocalCluster
from mirrorwatch.monitor.history import history_files, read_history
from mirrorwatch.monitor.service import MonitorService

from .support.monitor_service import free_port, metrics, wait_for
from .support.standin_mirror import PARTS, StandInMirror, commit

EXTERNAL = bool(os.environ.get("MIRRORWATCH_TEST_SOURCE_BOOTSTRAP"))


def group_status(api: int, cluster: str, group: str) -> str | None:
    """The group's status, or None before the first sample has reached it (404)."""
    body = requests.get(f"http://127.0.0.1:{api}/v3/kafka/{cluster}/consumer/{group}/status", timeout=5).json()
    return None if body["error"] else body["status"]["status"]


@pytest.mark.skipif(EXTERNAL, reason="starts and stops a private local cluster")
def test_unreachable_cluster_is_unknown_then_recovers(source, target, topic_name, tmp_path):
    flaky = LocalCluster("flaky", tmp_path / "flaky").start()
    try:
        create_topic(flaky.bootstrap, "payments", 2)
        produce_numbered(flaky.bootstrap, "payments", 10, 2)
        commit(flaky.bootstrap, "billing", "payments", {0: 5, 1: 5})
        mirror = StandInMirror(source, target, topic_name)
        produce_numbered(source.bootstrap, topic_name, 30, PARTS)
        mirror.state(committed=10, acked=10, read=10)
        config = config_from_dict(
            {
                "clusters": {
                    "east": source.config(),
                    "west": target.config(),
                    "flaky": {"bootstrap.servers": flaky.bootstrap},
                },
                "flows": {"ew": {"source": "east", "target": "west", "topics": [topic_name], "internal_topics": False}},
                "monitor": {
                    "interval_s": 1,
                    "window": 3,
                    "http_port": 0,
                    "metrics_port": 0,
                    "history_dir": str(tmp_path / "history"),
                    "history_roll_s": 3,
                    "groups": [{"cluster": "flaky", "group": "billing"}],
                },
            }
        )
        service = MonitorService(config).start()
        api, prom = service.api_server.port, service.metrics_server.port
        try:
            wait_for(lambda: group_status(api, "flaky", "billing") in ("OK", "WARN", "ERR"))
            assert metrics(prom)[("mirrorwatch_cluster_up", (("cluster", "flaky"),))] == 1

            flaky.stop()
            wait_for(lambda: group_status(api, "flaky", "billing") == "UNKNOWN")
            # the cycle that first found the group unreadable may have listed the topics just before the stop
            wait_for(lambda: metrics(prom)[("mirrorwatch_cluster_up", (("cluster", "flaky"),))] == 0)
            m = metrics(prom)
            billing = (("flow", ""), ("group", "billing"), ("source", "flaky"), ("target", ""))
            assert m[("mirrorwatch_group_status", billing)] == 7
            assert (
                m[
                    (
                        "mirrorwatch_partition_status",
                        billing[:2] + (("partition", "0"),) + billing[2:3] + (("target", ""), ("topic", "payments")),
                    )
                ]
                == 5
            )
            body = requests.get(f"http://127.0.0.1:{api}/v3/kafka/flaky/consumer/billing/status", timeout=5).json()
            assert "flaky" in body["status"]["reason"]
            # the rest keeps being monitored
            cycles = service.cycles
            wait_for(lambda: service.cycles >= cycles + 2)
            assert group_status(api, "east", "mirrorwatch-ew") == "OK"  # flow "ew": its own default group

            flaky.start()
            wait_for(lambda: group_status(api, "flaky", "billing") != "UNKNOWN", timeout_s=60)
            assert metrics(prom)[("mirrorwatch_cluster_up", (("cluster", "flaky"),))] == 1
        finally:
            service.stop()
        table = read_history(tmp_path / "history")
        assert table.num_rows > 0 and set(table.column("status").to_pylist()) <= {
            "OK",
            "WARN",
            "STOP",
            "STALL",
            "REWIND",
        }
        assert not list((tmp_path / "history").rglob("*.inprogress"))
    finally:
        flaky.stop()


def test_monitor_run_sigterm_closes_history(source, target, topic_name, tmp_path, write_config):
    mirror = StandInMirror(source, target, topic_name)
    produce_numbered(source.bootstrap, topic_name, 12, PARTS)
    mirror.state(committed=2, acked=3, read=4)
    api = free_port()
    path = write_config(
        {
            "clusters": {"east": source.config(), "west": target.config()},
            "flows": {"ew": {"source": "east", "target": "west", "topics": [topic_name], "internal_topics": False}},
            "monitor": {"interval_s": 1, "http_port": api, "metrics_port": 0, "history_dir": str(tmp_path / "h")},
        }
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", "from mirrorwatch.monitor.cli import main; main()", "run", "--config", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def flow():
            body = requests.get(f"http://127.0.0.1:{api}/v1/flows/ew", timeout=2).json()
            return None if body["error"] else body["flow"]

        flows = wait_for(lambda: (f := flow()) and f["partitions"][0]["read_position"] == 4 and f, 60)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "Traceback" not in out and flows["flow"] == "ew"
    assert [(p["committed_lag"], p["true_lag"], p["read_lag"]) for p in flows["partitions"]] == [(2, 1, 0)] * PARTS
    files = history_files(tmp_path / "h")
    assert files and not list((tmp_path / "h").rglob("*.inprogress"))
    table = read_history(tmp_path / "h")
    assert table.num_rows >= PARTS


def test_a_hung_analytics_run_is_killed_and_reported_while_sampling_goes_on(source, target, topic_name, tmp_path):
    """The scheduled Spark job is a child process with a timeout: a run that hangs (a stand-in that sleeps, in
    place of ``python -m mirrorwatch.monitor.analytics.job``) never holds sampling, is killed after
    ``timeout_s`` and shows as ``timeout`` on /v1/analytics; the recent figures keep coming meanwhile."""
    mirror = StandInMirror(source, target, topic_name)
    produce_numbered(source.bootstrap, topic_name, 12, PARTS)
    mirror.state(committed=12, acked=12, read=12)
    config = config_from_dict(
        {
            "clusters": {"east": source.config(), "west": target.config()},
            "flows": {"ew": {"source": "east", "target": "west", "topics": [topic_name], "internal_topics": False}},
            "canary": {"metrics_port": None},
            "monitor": {
                "interval_s": 1,
                "window": 3,
                "http_port": 0,
                "metrics_port": None,
                "history_dir": str(tmp_path / "history"),
                "recent_minutes": 5,
                "analytics": {"every_s": 600, "first_delay_s": 5, "timeout_s": 4, "out": str(tmp_path / "a")},
            },
        }
    )
    # a closed file from an earlier run, so the first scheduled run does not wait for this run's first roll
    # today's: the scheduled run expires raw history past monitor.history_raw_days, and an older day would be gone
    # before the second run looked for it
    earlier = tmp_path / "history" / "lag" / datetime.now(UTC).strftime("date=%Y-%m-%d")
    earlier.mkdir(parents=True)
    pq.write_table(lag_sample_arrow_schema().empty_table(), earlier / "part-000000000000-1.parquet")
    service = MonitorService(config)
    service.analytics.command = lambda settings, history, out, now: [
        sys.executable,
        "-c",
        "import time; time.sleep(300)",
    ]
    service.start()
    api = service.api_server.port

    def analytics() -> dict:
        return requests.get(f"http://127.0.0.1:{api}/v1/analytics", timeout=5).json()["analytics"]

    try:
        wait_for(lambda: analytics()["state"] == "running", 60)
        cycles = service.cycles
        wait_for(lambda: service.cycles >= cycles + 2, 30)  # sampling goes on while the run hangs
        status = wait_for(lambda: (a := analytics())["state"] == "timeout" and a, 60)
        assert "timeout_s" in status["reason"] and status["failures"] == 1 and status["every_s"] == 600
        assert status["duration_s"] >= 4
        # SIGUSR1's path (`monitor run`): a run at once, 600 s before the schedule's next; asked again while it
        # runs, nothing more starts (this run may hang for a minute, so the second ask surely finds it running)
        service.analytics.settings = service.analytics.settings.model_copy(update={"timeout_s": 60})
        service.run_analytics_now()
        again = wait_for(lambda: (a := analytics())["state"] == "running" and a, 30)
        assert again["runs"] == status["runs"] + 1
        service.run_analytics_now()
        time.sleep(1)
        assert analytics()["runs"] == again["runs"] and analytics()["started_ms"] == again["started_ms"]
        recent = requests.get(f"http://127.0.0.1:{api}/v1/flows/ew/recent", timeout=5).json()["recent"]
        assert len(recent["points"]) >= 3 and recent["points"][-1]["true_lag"] == 0
        assert recent["points"][-1]["canary_round_trip_s"] is None  # no canary configured
        assert recent["status_changes"][0]["from"] is None
        since = recent["points"][-1]["ts_ms"]
        later = requests.get(f"http://127.0.0.1:{api}/v1/flows/ew/recent?since_ms={since}", timeout=5).json()
        assert [p["ts_ms"] for p in later["recent"]["points"]][:1] == [since]
        bad = requests.get(f"http://127.0.0.1:{api}/v1/flows/ew/recent?since_ms=yesterday", timeout=5)
        assert bad.status_code == 400 and "since_ms" in bad.json()["message"]
    finally:
        service.stop()
