"""`canary run` on the real clusters with the real mirror: healthy, mirror stopped → CRITICAL, recovery.

The issue asks for 5 healthy minutes at a 1 s interval; the suite observes MIRRORWATCH_CANARY_HEALTHY_S
(default 20 s) to keep CI time down. Run it once with 300 for the full check (docs/canary.md).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from harness.helpers import end_offsets
from harness.mirror_harness import BIN, MirrorProcess

from .support.canary_checks import canary_config, check_until, delete_records_before, write

# 20 s: the healthy stack with bursts is also watched for any alert, pending or firing, in test_alerting_live, and
# for ten minutes by bench/detection.py (docs/canary.md)
HEALTHY_S = float(os.environ.get("MIRRORWATCH_CANARY_HEALTHY_S", "20"))
INTERVAL_S, CRIT_S = 1.0, 6.0


class CanaryProcess:
    def __init__(self, config_path: str, log_path):
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen(
            [str(BIN / "canary"), "run", "--config", config_path], stdout=self._log, stderr=subprocess.STDOUT
        )
        self.port = self._wait_port()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _wait_port(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", self.log_text())
            if found:
                return int(found.group(1))
            assert self.proc.poll() is None, self.log_text()
            time.sleep(0.2)
        raise AssertionError(f"no metrics endpoint:\n{self.log_text()}")

    def metrics(self) -> dict[str, float]:
        """Sample name → value for the canary's own series (one flow, so labels can be dropped)."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5).read().decode()
        out = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if (
                    sample.name.startswith(("mirrorwatch_canary_", "mirrorwatch_is_leader"))
                    and "le" not in sample.labels
                ):
                    out[sample.name] = sample.value
        return out

    def status(self) -> int | None:
        value = self.metrics().get("mirrorwatch_canary_status")  # absent until the first evaluation, just after start
        return None if value is None else int(value)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def wait_status(canary: CanaryProcess, wanted: int, within_s: float, poll_s: float = 0.2) -> float:
    started = time.monotonic()
    while time.monotonic() - started < within_s:
        if canary.status() == wanted:
            return time.monotonic() - started
        assert canary.proc.poll() is None, canary.log_text()[-2000:]
        time.sleep(poll_s)
    raise AssertionError(f"status {wanted} not reached within {within_s}s:\n{canary.log_text()[-2000:]}")


def _ends_after_a_probe(bootstrap: str, topic: str) -> dict[int, int]:
    """The source canary topic's end offsets once every partition has grown (the canary probed again)."""
    before = end_offsets(bootstrap, topic)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ends = end_offsets(bootstrap, topic)
        if all(ends[p] > before[p] for p in before):
            return ends
        time.sleep(0.2)
    raise AssertionError(f"no new canary events on {topic}: {before}")


def test_service_healthy_then_critical_when_mirror_stops_then_recovers(
    source, target, mirror_config, topic_name, tmp_path
):
    cfg = canary_config(mirror_config, topic_name, interval_s=INTERVAL_S, crit_latency_s=CRIT_S)
    path = write(cfg, tmp_path / "canary.yaml")
    mirror = MirrorProcess(cfg, tmp_path / "mirror.yaml").start()
    canary = None
    try:
        check_until(path, 0, 60, alive=mirror)  # the mirror has found the canary topic
        canary = CanaryProcess(path, tmp_path / "canary.log")
        wait_status(canary, 0, 30)

        # healthy: nothing but OK, nothing lost, duplicated or reordered
        seen, started = [], time.monotonic()
        while time.monotonic() - started < HEALTHY_S:
            seen.append(canary.status())
            time.sleep(0.5)
        figures = canary.metrics()
        assert set(seen) == {0}, f"false alarms: {sorted(set(seen))}\n{canary.log_text()[-2000:]}"
        assert figures["mirrorwatch_canary_lost_total"] == 0 and figures["mirrorwatch_canary_duplicates_total"] == 0
        assert figures["mirrorwatch_canary_reordered_total"] == 0
        assert figures["mirrorwatch_canary_probes_total"] >= 0.8 * HEALTHY_S / INTERVAL_S
        assert figures["mirrorwatch_canary_round_trip_seconds_count"] >= 3 * 0.8 * HEALTHY_S / INTERVAL_S
        assert 0 <= figures["mirrorwatch_canary_heartbeat_age_seconds"] < 30
        print(
            f"healthy {HEALTHY_S:.0f} s: {figures['mirrorwatch_canary_probes_total']:.0f} probes, mean round trip "
            f"{1000 * figures['mirrorwatch_canary_round_trip_seconds_sum'] / figures['mirrorwatch_canary_round_trip_seconds_count']:.0f} ms"
        )

        # mirror stopped → CRITICAL within 2 probe intervals after the critical timeout: overdue, not lost
        assert mirror.terminate() == 0
        detection = wait_status(canary, 2, CRIT_S + 2 * INTERVAL_S + 10)
        print(f"mirror stop → CRITICAL in {detection:.2f} s (critical timeout {CRIT_S:g} s, interval {INTERVAL_S:g} s)")
        assert detection <= CRIT_S + 2 * INTERVAL_S
        figures = canary.metrics()
        assert figures["mirrorwatch_canary_overdue_events"] >= 3 and figures["mirrorwatch_canary_lost_total"] == 0
        assert figures["mirrorwatch_canary_oldest_overdue_seconds"] >= CRIT_S

        # mirror back → OK again; the events it missed arrive, counted late; none lost
        mirror = MirrorProcess(cfg, tmp_path / "mirror2.yaml", log_name="mirror2.log").start()
        recovery = wait_status(canary, 0, 60)
        print(f"mirror restart → OK in {recovery:.2f} s")
        figures = canary.metrics()
        assert figures["mirrorwatch_canary_late_total"] >= 3 and figures["mirrorwatch_canary_lost_total"] == 0
        assert figures["mirrorwatch_canary_overdue_events"] == figures["mirrorwatch_canary_oldest_overdue_seconds"] == 0

        # a real gap: events removed from the source before the mirror read them (DeleteRecords, as retention
        # does); the later ones arrive, so the removed ones are lost, counted once each
        assert mirror.terminate() == 0
        canary_topic = cfg["canary"]["topic"]
        ends = _ends_after_a_probe(source.bootstrap, canary_topic)
        for partition, end in ends.items():
            delete_records_before(source.bootstrap, canary_topic, partition, end)
        _ends_after_a_probe(source.bootstrap, canary_topic)  # later events behind the gap
        cfg["mirror"]["on_records_lost"] = "continue"
        mirror = MirrorProcess(cfg, tmp_path / "mirror3.yaml", log_name="mirror3.log").start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and canary.metrics()["mirrorwatch_canary_lost_total"] < 3:
            time.sleep(0.2)
        assert canary.metrics()["mirrorwatch_canary_lost_total"] >= 3, canary.log_text()[-2000:]
        assert "canary event(s) lost: a later one of its partition came first" in canary.log_text()
        wait_status(canary, 0, 60)
        assert canary.metrics()["mirrorwatch_canary_overdue_events"] == 0
        assert canary.stop() == 0  # SIGTERM: a clean exit
        assert "Traceback" not in canary.log_text()
    finally:
        if canary is not None:
            canary.stop()
        mirror.terminate()


def test_service_survives_source_outage_and_recovers(kafka_pair, target, mirror_config, topic_name, tmp_path):
    """A source cluster of its own (the shared one is not stopped): away → UNKNOWN naming it, back → OK."""
    import pytest

    from mirrorwatch.localkafka import LocalCluster

    if target.local is None:
        pytest.skip("external clusters: this test stops a cluster")
    own_source = LocalCluster("canary-east", tmp_path / "kafka").start()
    mirror = canary = None
    try:
        mirror_config["clusters"]["east"] = {"bootstrap.servers": own_source.bootstrap}
        cfg = canary_config(
            mirror_config, topic_name, interval_s=INTERVAL_S, crit_latency_s=CRIT_S, connect_timeout_s=2
        )
        path = write(cfg, tmp_path / "canary.yaml")
        mirror = MirrorProcess(cfg, tmp_path / "mirror.yaml").start()
        check_until(path, 0, 90, alive=mirror)
        canary = CanaryProcess(path, tmp_path / "canary.log")
        wait_status(canary, 0, 30)

        own_source.stop()
        wait_status(canary, 3, CRIT_S + 20)
        assert canary.proc.poll() is None
        assert f"cannot reach source cluster 'east' at {own_source.bootstrap}" in canary.log_text()

        restarted_at = time.monotonic()
        own_source.start()  # same ports (kept in its folder); returns once it answers metadata
        wait_status(canary, 0, 120)
        print(f"source restart begun → OK in {time.monotonic() - restarted_at:.1f} s")
        assert canary.stop() == 0 and "Traceback" not in canary.log_text()
    finally:
        if canary is not None:
            canary.stop()
        if mirror is not None:
            mirror.kill()
        own_source.stop()


def test_service_counts_injected_duplicate_and_reorder(source, target, mirror_config, topic_name, tmp_path):
    """...and, with ``leader.enabled``, a second canary on the same config (docs/ha.md): one of the two is the
    leader, both probe, and each judges only its own run's events (the injected ones are the first's)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from mirrorwatch.canary.events import is_canary
    from mirrorwatch.core.records import CanaryEvent

    cfg = canary_config(mirror_config, topic_name, interval_s=INTERVAL_S, crit_latency_s=CRIT_S)
    cfg["leader"] = {"enabled": True, "session_timeout_s": 6, "topic": f"mw.leader.{topic_name}"}
    path = write(cfg, tmp_path / "canary.yaml")
    tgt_topic = f"east.{cfg['canary']['topic']}"
    with MirrorProcess(cfg, tmp_path / "mirror.yaml") as mirror:
        check_until(path, 0, 60, alive=mirror)
        starts = end_offsets(target.bootstrap, tgt_topic)
        canary = CanaryProcess(path, tmp_path / "canary.log")
        other = None
        try:
            wait_status(canary, 0, 30)
            reader = Consumer(
                {"bootstrap.servers": target.bootstrap, "group.id": "never-committed", "enable.auto.commit": False}
            )
            reader.assign([TopicPartition(tgt_topic, p, o) for p, o in starts.items()])
            service_event = None
            while service_event is None:  # the first event of the service's run on partition 1
                for m in reader.consume(10, 1.0):
                    if not m.error() and is_canary(m) and m.partition() == 1:
                        service_event = m
            reader.close()
            run_id = CanaryEvent.from_value(service_event.value()).run_id
            # the second canary starts only now, so the event read above is surely the first one's
            other = CanaryProcess(path, tmp_path / "canary-2.log")
            wait_status(other, 0, 30)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                leaders = [c.metrics().get("mirrorwatch_is_leader") for c in (canary, other)]
                if leaders in ([0, 1], [1, 0]):
                    break
                time.sleep(0.2)
            assert leaders in ([0, 1], [1, 0])
            injector = Producer({"bootstrap.servers": target.bootstrap})
            injector.produce(
                tgt_topic, value=service_event.value(), partition=1, headers=service_event.headers()
            )  # duplicate
            # an event of the same run with a sequence below everything it has seen on partition 2: out of order
            below = CanaryEvent(run_id, 0, int(time.time() * 1000), "east", 2)
            injector.produce(tgt_topic, value=below.to_value(), partition=2, headers=[("mw.canary", b"1")])
            injector.flush(10)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                figures = canary.metrics()
                if figures["mirrorwatch_canary_duplicates_total"] and figures["mirrorwatch_canary_reordered_total"]:
                    break
                time.sleep(0.2)
            assert (
                figures["mirrorwatch_canary_duplicates_total"] == 1
                and figures["mirrorwatch_canary_reordered_total"] == 1
            )
            assert figures["mirrorwatch_canary_lost_total"] == 0
            assert "OK → WARNING" in canary.log_text()  # the anomaly shows (for about one probe) ...
            wait_status(canary, 0, 10)  # ... and clears with the next clean probe
            others = other.metrics()
            assert others["mirrorwatch_canary_duplicates_total"] == others["mirrorwatch_canary_reordered_total"] == 0
            assert others["mirrorwatch_canary_probes_total"] > 0 and other.status() == 0
        finally:
            assert other is None or other.stop() == 0
            assert canary.stop() == 0
