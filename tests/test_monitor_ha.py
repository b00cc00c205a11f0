"""Two `monitor run` replicas on one config with ``leader.enabled`` (docs/ha.md), as real processes on the real
local cluster, with a real HTTP webhook receiver: one leader, one POST per status change, a SIGKILLed leader
replaced and the change made during the handover delivered, a leader frozen past the session timeout replaced and,
thawed, silent and a follower. One test, so the processes are shared across the steps; and the scheduled Spark
run on the leader only."""

from __future__ import annotations

import signal
import sys
import time
import uuid
from datetime import UTC, datetime

import pyarrow.parquet as pq
import yaml

from harness.helpers import admin, create_topic, produce_numbered
from harness.services import Service
from harness.webhooks import WebhookReceiver
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.records import lag_sample_arrow_schema
from mirrorwatch.monitor.service import MonitorService

from .support.monitor_service import free_port, metrics, wait_for
from .support.standin_mirror import commit

SESSION_S = 6


class Replica:
    """One `monitor run` process on a config file of its own (its own ports)."""

    def __init__(self, name: str, config: dict, tmp_path):
        self.name, self.tmp_path, self.prom = name, tmp_path, free_port()
        body = {**config, "monitor": {**config["monitor"], "metrics_port": self.prom, "http_port": free_port()}}
        self.path = tmp_path / f"{name}.yaml"
        self.path.write_text(yaml.safe_dump(body, sort_keys=False))
        self.service: Service | None = None

    def start(self) -> Replica:
        argv = [sys.executable, "-c", "from mirrorwatch.monitor.cli import main; main()", "run", "-v"]
        self.service = Service(self.name, argv + ["--config", str(self.path)], self.tmp_path)
        return self

    def is_leader(self) -> float | None:
        """The replica's ``mirrorwatch_is_leader``, None while it does not answer."""
        try:
            return metrics(self.prom).get(("mirrorwatch_is_leader", ()))
        except Exception:  # noqa: BLE001 - not listening yet, or frozen
            return None

    def signal(self, signum: int) -> None:
        assert self.service is not None
        self.service.proc.send_signal(signum)
        if signum == signal.SIGKILL:
            self.service.proc.wait()

    def log(self) -> str:
        return self.service.log_text() if self.service else ""


def settle(receiver: WebhookReceiver, replicas: list[Replica], seconds: float = 3.0) -> None:
    """Give every replica a few sampling cycles (1 s) to send what it wrongly would; nothing to wait on but time."""
    time.sleep(seconds)
    assert all(r.service and r.service.alive() for r in replicas), [r.log()[-2000:] for r in replicas]


def test_two_monitors_one_leader_webhooks_once_through_kill_and_freeze(source, topic_name, tmp_path):
    create_topic(source.bootstrap, topic_name, 1)
    produce_numbered(source.bootstrap, topic_name, 5, 1)
    group = f"g-{topic_name}"
    receiver = WebhookReceiver()
    config = {
        "clusters": {"east": source.config()},
        "canary": {"metrics_port": None},
        "monitor": {
            "interval_s": 1,
            "window": 3,
            "history": False,
            "webhooks": [receiver.url],
            "webhook_retries": 0,
            "groups": [{"cluster": "east", "group": group}],
        },
        "leader": {"enabled": True, "session_timeout_s": SESSION_S, "topic": f"mw-leader-{uuid.uuid4().hex[:6]}"},
    }
    a, b = Replica("a", config, tmp_path).start(), Replica("b", config, tmp_path).start()
    c = Replica("c", config, tmp_path)
    replicas = [a, b]
    try:
        # exactly one leader, on both /metrics; the group has no commits yet: the leader, and only it, says so
        both = wait_for(lambda: (v := [a.is_leader(), b.is_leader()]) in ([0, 1], [1, 0]) and v, 90)
        leader, follower = (a, b) if both[0] == 1 else (b, a)
        wait_for(lambda: receiver.changes() == [("OK", "NOTFOUND")], 30)
        commit(source.bootstrap, group, topic_name, {0: 5})
        wait_for(lambda: len(receiver.bodies) == 2, 30)
        settle(receiver, replicas)
        assert receiver.changes() == [("OK", "NOTFOUND"), ("NOTFOUND", "OK")]
        assert follower.is_leader() == 0 and leader.is_leader() == 1

        # SIGKILL the leader and change the status at once: the follower leads after the session timeout and
        # sends the change its predecessor never saw, once
        leader.signal(signal.SIGKILL)
        killed = time.monotonic()
        client = admin(source.bootstrap)  # keep a reference: a collected client fails its pending futures
        client.delete_consumer_groups([group])[group].result(10)
        wait_for(lambda: follower.is_leader() == 1, SESSION_S + 30)
        takeover_s = time.monotonic() - killed
        wait_for(lambda: len(receiver.bodies) == 3, 30)
        replicas = [follower]
        settle(receiver, replicas)
        assert receiver.changes()[2:] == [("OK", "NOTFOUND")]

        # a third replica joins as a follower (the leader keeps partition 0); then the leader is frozen past the
        # session timeout: the newcomer takes over and sends the change made meanwhile
        c.start()
        replicas = [follower, c]
        wait_for(lambda: c.is_leader() == 0, 60)
        frozen, newcomer = follower, c
        frozen.signal(signal.SIGSTOP)
        commit(source.bootstrap, group, topic_name, {0: 5})
        wait_for(lambda: newcomer.is_leader() == 1, SESSION_S + 30)
        wait_for(lambda: len(receiver.bodies) == 4, 30)
        # thawed: it says it is not the leader before anything else, and sends nothing of what it now sees
        frozen.signal(signal.SIGCONT)
        assert wait_for(lambda: (v := frozen.is_leader()) is not None and (v,), 30) == (0,)
        settle(receiver, replicas)
        assert receiver.changes() == [("OK", "NOTFOUND"), ("NOTFOUND", "OK"), ("OK", "NOTFOUND"), ("NOTFOUND", "OK")]
        assert frozen.is_leader() == 0 and newcomer.is_leader() == 1
        assert "a follower now" in frozen.log()
        print(f"takeover after SIGKILL: {takeover_s:.1f} s (session timeout {SESSION_S} s)")
    finally:
        for replica in (a, b, c):
            if replica.service is not None:
                replica.service.proc.send_signal(signal.SIGCONT)
                replica.service.stop()
        receiver.close()
    assert all("Traceback" not in r.log() for r in (a, b, c)), [r.log()[-3000:] for r in (a, b, c)]


def test_only_the_leader_runs_the_scheduled_spark_job(source, topic_name, tmp_path):
    """Two monitors in this process, each with its own real election: the scheduled run (a stand-in command in
    place of the Spark job) happens on the leader only; a run asked of the follower (SIGUSR1's path) runs there."""
    # today's: the scheduled run expires raw history past monitor.history_raw_days, and an older day would be gone
    # before the second run looked for it
    earlier = tmp_path / "history" / "lag" / datetime.now(UTC).strftime("date=%Y-%m-%d")
    earlier.mkdir(parents=True)
    pq.write_table(lag_sample_arrow_schema().empty_table(), earlier / "part-000000000000-1.parquet")
    config = config_from_dict(
        {
            "clusters": {"east": source.config()},
            "canary": {"metrics_port": None},
            "monitor": {
                "interval_s": 1,
                "http_port": None,
                "metrics_port": None,
                "history": False,
                "history_dir": str(tmp_path / "history"),
                "groups": [{"cluster": "east", "group": f"g-{topic_name}"}],
                "analytics": {"every_s": 10, "first_delay_s": 0, "out": str(tmp_path / "a")},
            },
            "leader": {"enabled": True, "session_timeout_s": SESSION_S, "topic": f"mw-leader-{uuid.uuid4().hex[:6]}"},
        }
    )
    services = [MonitorService(config), MonitorService(config)]
    for service in services:
        service.analytics.command = lambda settings, history, out, now: [
            sys.executable,
            "-c",
            f"import os; os.makedirs({out!r})",
        ]
        service.start()
    try:
        leader = wait_for(lambda: [s for s in services if s.election.is_leader()], 60)[0]
        follower = services[1] if leader is services[0] else services[0]
        wait_for(lambda: leader.analytics.status().state == "ok", 60)
        assert follower.analytics.status().runs == 0 and not follower.election.is_leader()
        follower.run_analytics_now()
        wait_for(lambda: follower.analytics.status().state == "ok", 60)
        assert follower.analytics.status().runs == 1
    finally:
        for service in services:
            service.stop()
