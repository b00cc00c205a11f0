"""bench/detection.py's watch: wait for a quiet stack, inject one fault, hold it, undo it, and tell what reached the
webhook receiver (pages, notifications, when) during the fault and after it was undone."""

from __future__ import annotations

import os
import signal
import time

import yaml
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from harness.alertmanager import PAGE_RECEIVER, notification_line, paged_alerts, pages

from .detection_faults import NOTIFYING, metrics_answer, restart_sec
from .detection_floor import duration_s, route_for

QUIET_TIMEOUT_S = 600
# what the services said at the end of each hold (for the notes: did the fault show where the rules look?)
SIGNALS = {
    "canary_status": "max(mirrorwatch_canary_status)",
    "overdue_events": "max(mirrorwatch_canary_overdue_events)",
    "heartbeat_age_s": "min(mirrorwatch_canary_heartbeat_age_seconds)",
    "rpo_s": "max(flow:mirrorwatch_rpo_seconds:max)",
    "true_lag": "max(flow:mirrorwatch_true_lag_records:sum)",
    "trouble_cause": "max(flow:mirrorwatch_flow_trouble:cause)",
}


class Watch:
    def __init__(self, stack, settle_max_s: float):
        self.stack, self.settle_max_s = stack, settle_max_s
        self.prom, self.am, self.hook = stack.prom, stack.am, stack.hook

    # ---------------------------------------------------------------- what Prometheus and Alertmanager hold
    def alerts(self, state: str) -> set[str]:
        """Names of the alerts (severity not none) in ``state`` (pending, firing) in Prometheus now."""
        rows = self.prom.query(f'ALERTS{{alertstate="{state}", severity!="none"}}')
        return {r["metric"]["alertname"] for r in rows}

    def quiet(self, settled: bool = False) -> bool:
        """No alert firing (``settled``: nor pending, e.g. the canary's first probes still UNKNOWN), none active in
        Alertmanager, every exporter up."""
        active = [a for a in self.am.alerts(active=True) if a["labels"].get("severity") != "none"]
        up = {r["metric"]["job"]: float(r["value"][1]) for r in self.prom.query('up{job=~"mirrorwatch-.*"}')}
        held = self.alerts("firing") | (self.alerts("pending") if settled else set())
        return not held and not active and bool(up) and all(v == 1 for v in up.values())

    def wait_quiet(self, settled: bool = False) -> float:
        started = time.monotonic()
        self.prom.wait_for(lambda: self.quiet(settled), QUIET_TIMEOUT_S, "no alert firing and every exporter up")
        return time.monotonic() - started

    def group_interval_s(self) -> float:
        return duration_s(route_for(self.stack.am_config, {"severity": "critical"})["group_interval"])

    # ---------------------------------------------------------------- the healthy run
    def healthy(self, seconds: float) -> dict:
        waited = self.wait_quiet(settled=True)
        since, started = len(self.hook.bodies), time.monotonic()
        pending: set[str] = set()
        while time.monotonic() - started < seconds:
            pending |= {n for n in self.alerts("pending") | self.alerts("firing")}
            time.sleep(self.stack.evaluation_s)
        bodies = self.hook.bodies[since:]
        return {
            "seconds": seconds,
            "waited_quiet_s": waited,
            "pages": len(pages(bodies)),
            "notifications": sum(1 for b in bodies if b["receiver"] in NOTIFYING),
            "alerts_pending_or_firing": sorted(pending),
            "story": [notification_line(b) for b in bodies],
        }

    # ---------------------------------------------------------------- one fault
    def fault(self, name: str, hold_s: float) -> dict:
        quiet_s = self.wait_quiet()
        since = len(self.hook.bodies)
        started = time.monotonic()
        inject, undo = getattr(self, "f_" + name.replace("-", "_"))()
        note = inject() or ""
        while time.monotonic() - started < hold_s:
            time.sleep(1)
        signals = self.signals()
        undone = time.monotonic()
        note = " ".join(x for x in (note, undo() or "", getattr(self.stack, "restart_exited", str)()) if x)
        # after: until nothing fires, then one group_interval of the page route (resolutions are sent on its tick)
        # and two evaluations more; at most settle_max_s
        end = undone + self.settle_max_s
        calm_since = None
        while time.monotonic() < end:
            calm = not self.alerts("firing")
            calm_since = (calm_since or time.monotonic()) if calm else None
            if calm_since and time.monotonic() - calm_since > self.group_interval_s() + 2 * self.stack.evaluation_s:
                break
            time.sleep(1)
        row = self.row(name, since, started, undone, hold_s, note, quiet_s)
        row["signals_at_end_of_hold"] = signals
        return row

    def signals(self) -> dict[str, float | None]:
        said: dict[str, float | None] = {}
        for name, expr in SIGNALS.items():
            rows = self.prom.query(expr)
            said[name] = round(float(rows[0]["value"][1]), 1) if rows else None
        return said

    def row(
        self, name: str, since: int, started: float, undone: float, hold_s: float, note: str, quiet_s: float
    ) -> dict:
        bodies = list(zip(self.hook.bodies[since:], self.hook.received_at[since:], strict=True))
        during = [b for b, at in bodies if at < undone]
        after = [b for b, at in bodies if at >= undone]
        first = next(((b, at) for b, at in bodies if b in pages(during)), None)
        row = {
            "fault": name,
            "hold_s": hold_s,
            "waited_quiet_s": quiet_s,
            "detect_s": first[1] - started if first else None,
            "first_page": None,
            "cause": None,
            "pages_during": len(pages(during)),
            "pages_after": len(pages(after)),
            "notifications_during": sum(1 for b in during if b["receiver"] in NOTIFYING),
            "notifications_after": sum(1 for b in after if b["receiver"] in NOTIFYING),
            "note": note,
            "story": [f"+{at - started:6.1f} s {notification_line(b)}" for b, at in bodies],
        }
        if first:
            alert = paged_alerts(first[0])[0]
            row["first_page"] = alert["labels"]["alertname"]
            row["cause"] = alert["annotations"].get("cause")
        resolved = [at for b, at in bodies if b["receiver"] == PAGE_RECEIVER and b["status"] == "resolved"]
        row["page_resolved_after_undo_s"] = resolved[-1] - undone if resolved and resolved[-1] >= undone else None
        return row

    # ---------------------------------------------------------------- the faults: (inject, undo)
    def _freeze(self, pid_of, what: str):
        """SIGSTOP the process for the hold, SIGCONT after it."""

        def inject():
            os.kill(pid_of(), signal.SIGSTOP)
            return f"{what} SIGSTOP, SIGCONT after the hold."

        def undo():
            os.kill(pid_of(), signal.SIGCONT)

        return inject, undo

    def f_mirror_stop(self):
        return self._freeze(lambda: self.stack.services["mirror"].proc.pid, "mirror")

    def f_target_stop(self):
        return self._freeze(lambda: self.stack.broker_pid("west"), "target broker")

    def f_source_stop(self):
        return self._freeze(lambda: self.stack.broker_pid("east"), "source broker")

    def f_mirror_kill(self):
        def inject():
            old = self.stack.services["mirror"]
            killed = time.monotonic()
            os.kill(old.proc.pid, signal.SIGKILL)
            old.proc.wait()
            old.stop()
            wait = restart_sec()
            time.sleep(wait)  # as systemd's Restart=on-failure with the shipped unit's RestartSec
            self.stack.services["mirror"] = self.stack.service("mirror")
            port = self.stack.jobs["mirrorwatch-mirror"]
            while not metrics_answer(port) and time.monotonic() - killed < 120:
                time.sleep(0.2)
            return (
                f"mirror SIGKILL, restarted after RestartSec={wait:g} s (deploy/systemd); its metrics answered "
                f"again {time.monotonic() - killed:.1f} s after the kill."
            )

        return inject, lambda: None

    def f_retention(self):
        mirror = self.stack.services["mirror"].proc.pid
        topic = "orders"

        def inject():
            os.kill(mirror, signal.SIGSTOP)
            try:
                producer = Producer({"bootstrap.servers": self.stack.east, "acks": "all"})
                for i in range(2000):
                    producer.produce(topic, value=b"lost" * 20, key=str(i).encode())
                producer.flush(30)
                admin = AdminClient({"bootstrap.servers": self.stack.east})
                parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
                futures = admin.delete_records([TopicPartition(topic, p, -1) for p in parts])  # -1: up to the end
                for f in futures.values():
                    f.result(30)
            finally:
                os.kill(mirror, signal.SIGCONT)
            return (
                f"mirror frozen a few seconds while 2,000 records went to {topic!r}, then DeleteRecords to the end of "
                f"every partition (what retention does to records not yet mirrored), mirror thawed."
            )

        def undo():
            # the operator's answer after the hold: accept the loss (mirror.on_records_lost: continue) and restart
            service = self.stack.services["mirror"]
            exited = "" if service.alive() else f"the mirror had exited with {service.proc.returncode}; "
            service.stop()
            config = yaml.safe_load(self.stack.config_path.read_text())
            config["mirror"]["on_records_lost"] = "continue"
            accepted = self.stack.config_path.with_name("mirrorwatch-accept-loss.yaml")
            accepted.write_text(yaml.safe_dump(config, sort_keys=False))
            self.stack.services["mirror"] = self.stack.service("mirror", accepted)
            return f"{exited}after the hold, restarted with on_records_lost: continue (an operator accepting the loss)."

        return inject, undo

    def f_canary_topic(self):
        canary_topic = self.stack.config["canary"].get("topic", "mw.canary")
        target_topic = f"east.{canary_topic}"
        admin = AdminClient({"bootstrap.servers": self.stack.west})

        def alter(op):
            # min.insync.replicas=2 on a 1-replica topic was tried first: these Kafka 4 brokers still accepted acks=all
            # writes (checked by hand), so the canary never noticed; a 64-byte limit refuses every canary event
            entry = ConfigEntry("max.message.bytes", "64", incremental_operation=op)
            resource = ConfigResource(ResourceType.TOPIC, target_topic, incremental_configs=[entry])
            for f in admin.incremental_alter_configs([resource]).values():
                f.result(30)

        def inject():
            alter(AlterConfigOpType.SET)
            return (
                f"target's {target_topic} set max.message.bytes=64: the mirror's writes of canary events to it are "
                f"refused (MSG_SIZE_TOO_LARGE) while the data topics keep flowing; config removed after."
            )

        return inject, lambda: alter(AlterConfigOpType.DELETE)

    def f_mm2_kill(self):
        worker = self.stack.env.worker

        def undo():
            started = time.monotonic()
            worker.start()
            worker.wait_ready()
            return f"Connect worker restarted after the hold (REST up {time.monotonic() - started:.0f} s later)."

        def inject():
            worker.kill()
            return "MM2's Connect worker (the only one) SIGKILLed."

        return inject, undo

    def f_mm2_pause(self):
        worker, name = self.stack.env.worker, self.stack.source_connector

        def inject():
            worker.pause(name)
            return f"PUT /connectors/{name}/pause, resumed after the hold."

        return inject, lambda: worker.resume(name)
