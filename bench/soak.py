"""Fault soak: keyed, sequenced records through the mirror while it and both clusters are broken on purpose.

During the run: SIGKILL the mirror three times (restarting it), restart the target cluster once and the source
cluster once. Then an independent checker reads both sides and reports lost (must be 0), duplicates (and
whether each lies in an in-flight window: between the group's commit and the source end at a kill), per-key
order on the target (the first occurrences of each key's sequence numbers must be increasing), and what the
monitor and canary said during each fault (did they turn non-OK, and recover?).

Usage: .venv/bin/python -m bench.soak [--records 1000000] [--rate 20000]
Ends with one JSON line (bench/README.md); exit 1 if the soak failed. The suite runs ``run_soak(100_000, ...)`` (tests/test_soak.py).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from mirrorwatch.localkafka import LocalClusters
from mirrorwatch.localkafka.launcher import free_port

from .jsonline import BenchRun

BIN = Path(sys.executable).parent
TOPIC, PARTITIONS, KEYS, GROUP = "soak", 6, 1000, "mirrorwatch-soak"
# The soak's own clients see the restarts it causes: their connection-refused lines (one per client per second)
# filled CI's output tail and hid the failure's own message, which says more.
QUIET = {"log_level": 0}


@dataclass
class SoakReport:
    records: int
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


def _committed_and_end(source: str) -> tuple[dict[int, int], dict[int, int]]:
    consumer = Consumer({"bootstrap.servers": source, "group.id": GROUP, "enable.auto.commit": False, **QUIET})
    try:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        for attempt in range(30):  # the coordinator moves while a cluster restarts: retry what is retriable
            try:
                committed = {tp.partition: max(0, tp.offset) for tp in consumer.committed(tps, timeout=30)}
                ends = {
                    p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                    for p in range(PARTITIONS)
                }
                return committed, ends
            except KafkaException as exc:
                if not exc.args[0].retriable() and exc.args[0].code() != KafkaError.NOT_COORDINATOR or attempt == 29:
                    raise
                time.sleep(1)
    finally:
        consumer.close()


def _read(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes, bytes]]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "soak-checker", "enable.auto.commit": False, **QUIET}
    )
    out: dict[int, list] = defaultdict(list)
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        remaining = sum(ends.values())
        deadline = time.monotonic() + 600
        while remaining > 0 and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 1.0):
                if not m.error() and m.offset() < ends[m.partition()]:
                    out[m.partition()].append((m.offset(), m.key(), m.value()))
                    remaining -= 1
    finally:
        consumer.close()
    return out


def check(source_records, target_records, windows) -> tuple[int, int, int, int]:
    """(lost, duplicates, duplicates outside in-flight windows, per-key order violations)."""
    source_offset = {(key, value): (p, off) for p, recs in source_records.items() for off, key, value in recs}
    seen: dict[tuple[bytes, bytes], int] = defaultdict(int)
    order_violations, last_first = 0, {}
    for recs in target_records.values():
        for _, key, value in recs:
            seen[(key, value)] += 1
            if seen[(key, value)] == 1:  # order of first occurrences per key
                seq = int(value)
                if seq <= last_first.get(key, -1):
                    order_violations += 1
                last_first[key] = seq
    lost = sum(1 for record in source_offset if record not in seen)
    duplicates = outside = 0
    for record, count in seen.items():
        if count > 1:
            duplicates += count - 1
            p, off = source_offset[record]
            if not any(c[p] <= off < e[p] for c, e in windows):
                outside += count - 1
    return lost, duplicates, outside, order_violations


def run_soak(records: int, rate: int, workdir: Path | None = None, log=print) -> SoakReport:
    workdir = Path(workdir or tempfile.mkdtemp(prefix="mw-soak-"))
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    report = SoakReport(records)
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
        mirror = _start("mirror", [str(BIN / "mirror"), "run", "--config", str(path)], logs)
        services = [
            _start("monitor", [str(BIN / "monitor"), "run", "--config", str(path)], logs),
            _start("canary", [str(BIN / "canary"), "run", "--config", str(path)], logs),
        ]
        observer = Observer(f"http://127.0.0.1:{ports['api']}", f"http://127.0.0.1:{ports['canary']}/metrics")
        observer.start()
        producing = Producing(east.bootstrap, records, rate)
        producing.start()
        windows = []
        # faults at fractions of the produced records; each waits for its turn, breaks, repairs
        plan = [
            (0.15, "kill mirror"),
            (0.30, "kill mirror"),
            (0.45, "kill mirror"),
            (0.60, "restart target"),
            (0.75, "restart source"),
        ]
        for fraction, fault in plan:
            while producing.sent < fraction * records and producing.is_alive():
                time.sleep(0.2)
            t0 = time.monotonic()
            if fault == "kill mirror":
                mirror.send_signal(signal.SIGKILL)
                mirror.wait()
                windows.append(_committed_and_end(east.bootstrap))
                time.sleep(3)  # long enough to be seen by the canary and the monitor
                mirror = _start("mirror", [str(BIN / "mirror"), "run", "--config", str(path)], logs)
            else:
                # a restart can cost the mirror its partitions (the group's session expires): it then re-sends
                # from its last commit, which is an in-flight window like a kill's
                windows.append(_committed_and_end(east.bootstrap))
                cluster = west if fault == "restart target" else east
                cluster.stop()
                time.sleep(3)
                cluster.start()
            report.faults.append(
                {"fault": fault, "at_record": producing.sent, "start": t0, "repaired": time.monotonic()}
            )
            log(f"soak: {fault} at record {producing.sent}")
        producing.join()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if mirror.poll() is not None:  # a crash is a finding, not something to wait out
                tail = (logs / "mirror.log").read_text(errors="replace")[-1500:]
                raise RuntimeError(f"the mirror exited with {mirror.returncode} during the soak:\n{tail}")
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
        for proc in [mirror, *services]:
            proc.send_signal(signal.SIGTERM)
        for proc in [mirror, *services]:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
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
    args = parser.parse_args()
    with BenchRun("soak", vars(args)) as run:
        report = run_soak(args.records, args.rate)
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
