"""Fault soak: keyed, sequenced records through the mirror while it and both clusters are broken on purpose.

During the run: SIGKILL the mirror three times (restarting it), restart the target cluster once and the source
cluster once. Then an independent checker reads both sides and reports lost (must be 0), duplicates (and
whether each lies in an in-flight window: between the group's commit and the source end at a kill), per-key
order on the target (the first occurrences of each key's sequence numbers must be increasing), and what the
monitor and canary said during each fault (did they turn non-OK, and recover?).

With ``--delivery exactly_once`` (issue 28) two mirrors share the flow in exactly-once mode and the faults are
theirs (``PLANS``): each mirror SIGKILLed, the source's broker frozen, one mirror frozen past its session (a
zombie when thawed), the target's broker frozen past the transaction timeout, the other mirror killed for good;
a read_committed reader must then see no duplicate at all.

Usage: .venv/bin/python -m bench.soak [--records 1000000] [--rate 20000] [--delivery exactly_once]
Ends with one JSON line (bench/README.md); exit 1 if the soak failed. The suite runs ``run_soak(100_000, ...)`` (tests/test_soak.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorwatch.localkafka import LocalClusters
from mirrorwatch.localkafka.launcher import free_port

from .jsonline import BenchRun
from .soak_check import GROUP, PARTITIONS, QUIET, TOPIC, _committed_and_end, _read, check, wait_settled

BIN = Path(sys.executable).parent
KEYS = 1000


@dataclass
class SoakReport:
    records: int
    delivery: str = "at_least_once"  # exactly_once: two mirrors, its own faults, and no duplicate anywhere
    lost: int = 0
    duplicates: int = 0
    duplicates_outside_windows: int = 0
    order_violations: int = 0
    faults: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    # (seconds since the last fault was repaired, monitor status, canary status) for the observer's last samples:
    # when "recovered" is false these say which of the two stayed non-OK, and for how long
    final_samples: list[tuple[float, str, str]] = field(default_factory=list)
    logs: str = ""
    recovery_s: float | None = None  # from the last repair to the first of three OK/OK samples in a row
    still_open: str | None = None  # exactly-once: transactions still open on the target when it was read

    def ok(self) -> bool:
        return self.lost == 0 and self.duplicates_outside_windows == 0 and self.order_violations == 0


class Producing(threading.Thread):
    """Keyed records "key-N:seq" with per-key sequence numbers, at a bounded rate, surviving a source restart."""

    def __init__(self, bootstrap: str, total: int, rate: int, topic: str = TOPIC):
        super().__init__(name="soak-producer", daemon=True)
        self.topic = topic
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 10,
                "message.timeout.ms": 300_000,
                "queue.buffering.max.messages": 1_000_000,
                **QUIET,
            }
        )
        self.total, self.rate, self.sent, self.failed = total, rate, 0, 0

    def run(self) -> None:
        seq = [0] * KEYS
        started = time.perf_counter()
        for i in range(self.total):
            k = i % KEYS
            while True:
                try:
                    self.producer.produce(
                        self.topic, f"{seq[k]}".encode(), f"key-{k}".encode(), on_delivery=self._delivered
                    )
                    break
                except BufferError:
                    self.producer.poll(0.05)
            seq[k] += 1
            self.sent = i + 1
            if i % 200 == 0:
                self.producer.poll(0)
                ahead = started + i / self.rate - time.perf_counter()
                if ahead > 0:
                    time.sleep(ahead)
        while self.producer.flush(5):
            pass

    def _delivered(self, err, _msg) -> None:
        if err is not None:
            self.failed += 1


class Observer(threading.Thread):
    """Samples the monitor's flow status and the canary's status every second."""

    def __init__(self, api: str, canary_metrics: str):
        super().__init__(name="soak-observer", daemon=True)
        self.api, self.canary_metrics = api, canary_metrics
        self.samples: list[tuple[float, str, str]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.samples.append((time.monotonic(), self._monitor(), self._canary()))

    def _monitor(self) -> str:
        try:
            body = json.loads(urllib.request.urlopen(f"{self.api}/v1/flows/soak", timeout=2).read())
            return body["flow"]["status"]
        except Exception:
            return "unreachable"

    def _canary(self) -> str:
        try:
            text = urllib.request.urlopen(self.canary_metrics, timeout=2).read().decode()
        except Exception:
            return "unreachable"
        for line in text.splitlines():
            if line.startswith("mirrorwatch_canary_status{"):
                return {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}.get(int(float(line.split()[-1])), "?")
        return "no data"

    def between(self, start: float, end: float) -> list[tuple[float, str, str]]:
        return [s for s in self.samples if start <= s[0] <= end]


def _die_with_soak() -> None:
    import ctypes

    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: no orphans if the soak is killed


def _start(name: str, argv: list[str], logs: Path) -> subprocess.Popen:
    return subprocess.Popen(
        argv, stdout=open(logs / f"{name}.log", "ab"), stderr=subprocess.STDOUT, preexec_fn=_die_with_soak
    )


# Faults at fractions of the produced records. At-least-once: the mirror killed three times, each cluster
# restarted. Exactly-once (issue 28): two mirrors share the flow (scale-out), each is killed, the source's broker
# frozen, mirror a frozen past its session (a zombie when thawed), the target's broker frozen, b killed for good.
PLANS = {
    "at_least_once": [
        (0.15, "kill mirror"),
        (0.30, "kill mirror"),
        (0.45, "kill mirror"),
        (0.60, "restart target"),
        (0.75, "restart source"),
    ],
    # The target broker is frozen past the transaction timeout, not SIGKILLed: a SIGKILL of this single-broker
    # target with a transaction open left it hanging in 3 of 4 runs (the restarted coordinator rolled it back but
    # skipped the markers, "Couldn't find leader endpoint ... likely deleted", Kafka 4.4), and read_committed
    # readers stop before it for good; docs/exactly-once.md, "Known limits".
    "exactly_once": [
        (0.08, "kill mirror"),
        (0.16, "kill mirror b"),
        (0.26, "freeze source"),
        (0.38, "freeze mirror past its session"),
        (0.50, "freeze target"),
        (0.70, "kill mirror b for good"),
    ],
}
ZOMBIE_SESSION_S = 6  # the exactly-once soak's session timeout; a mirror frozen twice as long is a zombie


def run_soak(
    records: int, rate: int, workdir: Path | None = None, log=print, delivery: str = "at_least_once"
) -> SoakReport:
    workdir = Path(workdir or tempfile.mkdtemp(prefix="mw-soak-"))
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    report = SoakReport(records, delivery=delivery)
    exactly_once = delivery == "exactly_once"
    started = time.monotonic()
    with LocalClusters(["east", "west"], workdir / "clusters") as clusters:
        east, west = clusters["east"], clusters["west"]
        # keep the admin client referenced until the future resolves
        admin = AdminClient({"bootstrap.servers": east.bootstrap, **QUIET})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        ports = {"api": free_port(), "canary": free_port()}
        config = {
            "clusters": {"east": {"bootstrap.servers": east.bootstrap}, "west": {"bootstrap.servers": west.bootstrap}},
            "flows": {"soak": {"source": "east", "target": "west", "topics": [TOPIC], "group": GROUP}},
            "mirror": {
                "commit_interval_s": 1,
                "refresh_interval_s": 2,
                "metrics_port": None,
                "checkpoint_interval_s": 5,
            },
            "canary": {
                "interval_s": 1,
                "warn_latency_s": 3,
                "crit_latency_s": 6,
                "heartbeat_max_age_s": 10,
                "metrics_port": ports["canary"],
            },
            "monitor": {
                "interval_s": 1,
                "window": 5,
                "history": False,
                "metrics_port": None,
                "http_port": ports["api"],
            },
        }
        path = workdir / "soak.yaml"
        path.write_text(yaml.safe_dump(config))
        paths = {"mirror": path}
        if exactly_once:  # two mirrors, each with its own instance (static membership, transactional id)
            for name, instance in (("mirror", "a"), ("mirror b", "b")):
                mirror_settings = {
                    **config["mirror"],
                    "delivery": "exactly_once",
                    "instance_id": instance,
                    "consumer": {"session.timeout.ms": ZOMBIE_SESSION_S * 1000},
                }
                paths[name] = workdir / f"soak-{instance}.yaml"
                paths[name].write_text(yaml.safe_dump({**config, "mirror": mirror_settings}))

        def start_mirror(name: str) -> subprocess.Popen:
            return _start(name.replace(" ", "-"), [str(BIN / "mirror"), "run", "--config", str(paths[name])], logs)

        mirrors = {name: start_mirror(name) for name in paths}
        services = [
            _start("monitor", [str(BIN / "monitor"), "run", "--config", str(path)], logs),
            _start("canary", [str(BIN / "canary"), "run", "--config", str(path)], logs),
        ]
        observer = Observer(f"http://127.0.0.1:{ports['api']}", f"http://127.0.0.1:{ports['canary']}/metrics")
        observer.start()
        producing = Producing(east.bootstrap, records, rate)
        producing.start()
        windows = []
        for fraction, fault in PLANS[delivery]:
            while producing.sent < fraction * records and producing.is_alive():
                time.sleep(0.2)
            t0, at_record, under_load = time.monotonic(), producing.sent, producing.is_alive()
            if fault.startswith("kill mirror"):
                name = "mirror b" if fault.startswith("kill mirror b") else "mirror"
                mirrors[name].send_signal(signal.SIGKILL)
                mirrors[name].wait()
                if not exactly_once:  # exactly-once: no window, a duplicate anywhere is a failure
                    windows.append(_committed_and_end(east.bootstrap))
                time.sleep(1 if exactly_once else 3)  # at-least-once: long enough for the canary and the monitor
                if fault.endswith("for good"):
                    mirrors.pop(name)
                else:
                    mirrors[name] = start_mirror(name)
            elif fault.startswith("freeze"):
                pid = {"freeze source": east.proc.pid, "freeze target": west.proc.pid}.get(fault, mirrors["mirror"].pid)
                os.kill(pid, signal.SIGSTOP)
                # the target past the transaction timeout (10 s): the coordinator aborts what was open on its thaw
                time.sleep({"freeze source": 5, "freeze target": 12}.get(fault, 2 * ZOMBIE_SESSION_S))
                os.kill(pid, signal.SIGCONT)
            else:
                # a restart can cost the mirror its partitions (the group's session expires): it then re-sends
                # from its last commit, which is an in-flight window like a kill's
                if not exactly_once:
                    windows.append(_committed_and_end(east.bootstrap))
                cluster = west if "target" in fault else east
                if fault == "kill target broker":
                    cluster.kill()
                else:
                    cluster.stop()
                time.sleep(3)
                cluster.start()
            report.faults.append(
                {
                    "fault": fault,
                    "at_record": at_record,
                    "under_load": under_load,  # records still being written when it struck
                    "start": t0,
                    "repaired": time.monotonic(),
                }
            )
            log(f"soak: {fault} at record {at_record}")
        producing.join()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            for name, mirror in mirrors.items():
                if mirror.poll() is not None:  # a crash is a finding, not something to wait out
                    tail = (logs / f"{name.replace(' ', '-')}.log").read_text(errors="replace")[-1500:]
                    raise RuntimeError(f"{name} exited with {mirror.returncode} during the soak:\n{tail}")
            committed, ends = _committed_and_end(east.bootstrap)
            if committed == ends:
                break
            time.sleep(1)
        # let the canary and the monitor see the recovery (seconds here; one CI run had no three OK samples within
        # 90 s, why is not known: the report's final samples and the test's log tails will say next time)
        recovery_deadline = time.monotonic() + 120
        while time.monotonic() < recovery_deadline:
            last = observer.samples[-3:]
            if len(last) == 3 and all(m == "OK" and c == "OK" for _, m, c in last):
                break
            time.sleep(1)
        observer.stop.set()
        for proc in [*mirrors.values(), *services]:
            proc.send_signal(signal.SIGTERM)
        for proc in [*mirrors.values(), *services]:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        still_open = wait_settled(west.bootstrap, f"east.{TOPIC}") if exactly_once else None
        if still_open:
            report.still_open = still_open
            log(f"soak: a transaction stayed open on the target for 120 s ({still_open}); the reader stops before it")
        source_records, target_records = _read(east.bootstrap, TOPIC), _read(west.bootstrap, f"east.{TOPIC}")
    report.lost, report.duplicates, report.duplicates_outside_windows, report.order_violations = check(
        source_records, target_records, windows
    )
    produced = sum(len(v) for v in source_records.values())
    if produced < records:
        log(
            f"soak: note: {records - produced} records were not acknowledged by the source (producer: {producing.failed} failed)"
        )
    last_repaired = report.faults[-1]["repaired"] if report.faults else started
    for i, fault in enumerate(report.faults):
        end = report.faults[i + 1]["start"] if i + 1 < len(report.faults) else time.monotonic()
        during = observer.between(fault["start"], end)
        fault["monitor"] = sorted({m for _, m, _ in during})
        fault["canary"] = sorted({c for _, _, c in during})
        fault["turned_non_ok"] = any(m != "OK" or c != "OK" for _, m, c in during)
        after = observer.samples[-3:]
        fault["recovered"] = bool(after) and all(m == "OK" and c == "OK" for _, m, c in after)
        fault.pop("start"), fault.pop("repaired")
    after_repair = [(t, m == "OK" and c == "OK") for t, m, c in observer.samples if t >= last_repaired]
    for i in range(len(after_repair) - 2):
        if all(ok for _, ok in after_repair[i : i + 3]):
            report.recovery_s = round(after_repair[i][0] - last_repaired, 1)
            break
    report.final_samples = [(round(t - last_repaired, 1), m, c) for t, m, c in observer.samples[-15:]]
    report.logs = str(logs)
    report.seconds = time.monotonic() - started
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=20_000)
    parser.add_argument(
        "--delivery",
        choices=sorted(PLANS),
        default="at_least_once",
        help="exactly_once: two mirrors in mirror.delivery: exactly_once, its own faults (module note)",
    )
    args = parser.parse_args()
    with BenchRun("soak", vars(args)) as run:
        report = run_soak(args.records, args.rate, delivery=args.delivery)
        print(json.dumps(report.__dict__, indent=2))
        run.figures.update(
            {
                "passed": report.ok(),
                "records": report.records,
                "lost_records": report.lost,
                "duplicate_records": report.duplicates,
                "duplicates_outside_windows_records": report.duplicates_outside_windows,
                "order_violations": report.order_violations,
                "seconds": report.seconds,
                "faults": report.faults,
            }
        )
        print(
            f"soak {'PASSED' if report.ok() else 'FAILED'}: {report.records} records, lost {report.lost}, "
            f"duplicates {report.duplicates} ({report.duplicates_outside_windows} outside in-flight windows), "
            f"order violations {report.order_violations}, {report.seconds:.0f} s"
        )
    sys.exit(0 if report.ok() else 1)


if __name__ == "__main__":
    main()
