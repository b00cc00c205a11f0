"""The fault suite's rig (tests/test_faults.py): a pair of three-node clusters, three contestants mirroring side by side
under steady load, each from its own source topic, and the independent oracle reading each target.

Contestants: our engine at-least-once (``alo``), our engine exactly-once (``eos``), MirrorMaker 2 in dedicated mode
(``mm2``). Each fault is applied to the clusters while all three run; after it, the clusters are waited back to full
ISR and every contestant to have mirrored everything the source had acknowledged when the fault ended, then the
oracle's figures so far are recorded against the fault (``Measured``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from confluent_kafka.admin import AdminClient, NewTopic

from harness.mirror_harness import BIN, MirrorProcess, crash_report, fast_mirror_settings, wait_until
from harness.services import Service
from mirrorwatch.localkafka.mm2 import LocalMirrorMaker2, mm2_properties
from mirrorwatch.localkafka.multinode import MultiNodeCluster
from mirrorwatch.localkafka.process import free_port

from .lag_floor import TruthPoller, longest_stall_s
from .monitor_watch import MonitorWatch
from .oracle import NumberedWriter, TargetReader, judge
from .paging_watch import PagingWatch

RATE = 500  # records/s into each contestant's source topic, for the whole plan
PARTITIONS = 3
# The writers send each second's records in this many bursts. A broker's CPU goes with the requests it answers, not
# with the records in them: every burst is a produce request per partition, two follower fetches, and a fetch and a
# produce for each contestant downstream. Four bursts a second keep the load steady with a fifth of the requests of
# twenty, and the rig shares its machine with the rest of the suite (docs/reliability.md, "What the rig itself costs").
BURSTS_PER_S = 4
COMMIT_INTERVAL_S = 1.0  # our engine's commit interval; MM2's offset flush interval alike
CONTESTANTS = ("alo", "eos", "mm2")
EOS_INSTANCE = "faults"  # the exactly-once mirror's instance id: its transactional id is <group>-faults
MM2_RF = {
    k: "3"
    for k in (
        "replication.factor",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset.storage.replication.factor",
        "status.storage.replication.factor",
        "config.storage.replication.factor",
    )
}


MM2_WORKER = {"scheduled.rebalance.max.delay.ms": "10000"}


@dataclass
class Measured:
    """One fault's figures per contestant: duplicates it added, seconds from the fault's end until the contestant had
    mirrored everything acknowledged before then, and (our engine's two, which the truth poller watches) the longest
    time a target partition stood still from the fault's start to that catch-up."""

    fault: str
    duplicates: dict[str, int] = field(default_factory=dict)
    catch_up_s: dict[str, float] = field(default_factory=dict)
    stood_still_s: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0


class Rig:
    def __init__(self, base: Path) -> None:
        run = uuid.uuid4().hex[:6]
        self.base = base
        self.east = MultiNodeCluster("east", base, 3)
        self.west = MultiNodeCluster("west", base, 3)
        self.topics = {name: f"faults-{name}-{run}" for name in CONTESTANTS}
        self.groups = {name: f"mw-{name}-{run}" for name in ("alo", "eos")}
        self.transactional_id = f"{self.groups['eos']}-{EOS_INSTANCE}"
        self.writers: dict[str, NumberedWriter] = {}
        self.readers: dict[str, TargetReader] = {}
        self.mirrors: dict[str, MirrorProcess] = {}
        self.mm2: LocalMirrorMaker2 | None = None
        self.monitor: MonitorWatch | None = None
        self.truth: TruthPoller | None = None  # what the monitor's true lag is checked against (lag_floor.py)
        # the exporters a real Prometheus scrapes (paging_watch.py): both engines, the canary, the monitor
        self.ports = {name: free_port() for name in ("alo", "eos", "canary", "monitor")}
        self.canary: Service | None = None
        self.paging: PagingWatch | None = None
        self.still_alerting: dict[str, tuple[str, ...]] = {}  # clean faults: alerts still active once settled
        self.stalled: dict[str, str] = {}  # contestant -> the fault after which it stopped catching up, and how
        self.current = "start"
        self.monitor_died_during: str | None = None  # the plan goes on without it; its test says so
        self.measured: list[Measured] = []
        self._duplicates = dict.fromkeys(CONTESTANTS, 0)

    # ------------------------------------------------------------ start and stop
    def start(self) -> Rig:
        for cluster in (self.east, self.west):
            cluster.spawn()
        for cluster in (self.east, self.west):
            cluster.wait_ready()
        admin = AdminClient(self.east.client_config())
        futures = admin.create_topics([NewTopic(t, PARTITIONS) for t in self.topics.values()])
        for future in futures.values():
            future.result(60)
        for name in ("alo", "eos"):
            self.mirrors[name] = MirrorProcess(
                self._engine_config(name), self.base / f"{name}.yaml", log_name=f"{name}.log"
            )
            self.mirrors[name].start(wait_ready=False)
        self.mm2 = LocalMirrorMaker2(self.base / "mm2", self._mm2_properties(), heap="-Xms128m -Xmx384m").start()
        for name, topic in self.topics.items():
            self.writers[name] = NumberedWriter(self.east.bootstrap, topic, PARTITIONS, RATE, bursts_per_s=BURSTS_PER_S)
            self.writers[name].start()
        for name in CONTESTANTS:
            self._wait_target_topic(name)
            self.readers[name] = TargetReader(self.west.bootstrap, self.target_topic(name), PARTITIONS)
        self.wait_caught_up(self.acknowledged(), timeout_s=240)
        self._check_mm2_worker_settings()
        self.monitor = MonitorWatch(
            self.base, self._clusters(), self._monitored_flows(), metrics_port=self.ports["monitor"]
        ).begin()
        self.monitor.wait_answering()
        topics = {name: (self.topics[name], self.target_topic(name)) for name in ("alo", "eos")}
        self.truth = TruthPoller(self.east.bootstrap, self.west.bootstrap, topics, PARTITIONS)
        self.truth.start()
        self.canary = Service("canary", [str(BIN / "canary"), "run", "--config", str(self._canary_config())], self.base)
        self.paging = PagingWatch(self.base, self._scraped()).begin()
        self._wait_canary_ok()
        return self

    def _check_mm2_worker_settings(self) -> None:
        """Each herder's worker logs the settings it runs with: the rig's must be there, in both."""
        assert self.mm2 is not None
        log = self.mm2.dir / "logs" / "server.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        for key, value in MM2_WORKER.items():
            said = [line.split("=", 1)[1].strip() for line in text.splitlines() if line.strip().startswith(f"{key} =")]
            assert said and set(said) == {value}, f"MM2's workers run with {key} = {said}, not {value}"

    def _canary_config(self) -> Path:
        """The canary on the at-least-once flow, the one that mirrors the pair's heartbeats and canary topics."""
        config = {
            "clusters": self._clusters(),
            "flows": {"alo": self._engine_config("alo")["flows"]["alo"]},
            "mirror": {"heartbeats_topic": f"hb.{self.groups['alo']}"},
            "canary": {"interval_s": 2, "metrics_port": self.ports["canary"], "replication_factor": 3},
        }
        path = self.base / "canary.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def _scraped(self) -> dict[str, list[str]]:
        at = {name: f"127.0.0.1:{port}" for name, port in self.ports.items()}
        return {
            "mirrorwatch-mirror": [at["alo"], at["eos"]],
            "mirrorwatch-canary": [at["canary"]],
            "mirrorwatch-monitor": [at["monitor"]],
        }

    def _wait_canary_ok(self) -> None:
        """Until the canary says OK, as Prometheus sees it: the plan starts from a healthy stack."""

        def ok() -> bool:
            assert self.canary is not None and self.canary.alive(), f"canary exited:\n{self.canary_log()}"
            assert self.paging is not None
            looks = self.paging.looks[-3:]
            return len(looks) == 3 and all(look.canary_status == 0 for look in looks)

        wait_until(ok, 240, 1.0, "the canary OK in Prometheus before the first fault")

    def canary_log(self) -> str:
        return self.canary.log_tail() if self.canary is not None else "not started"

    def settle_alerts(self, timeout_s: float = 120) -> tuple[str, ...]:
        """After a fault: until no alert is pending or firing; what is still active at the deadline. A condition
        still true when the fault is over could fire later, under the next fault's name: so it is waited out here
        and counted against this one."""
        assert self.paging is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            looks = self.paging.looks[-2:]
            if len(looks) == 2 and all(look.canary_status is not None and not look.alerts for look in looks):
                return ()
            time.sleep(1.0)
        return self.paging.looks[-1].alerts if self.paging.looks else ("no answer",)

    def _clusters(self) -> dict[str, dict[str, str]]:
        return {"east": self.east.client_config(), "west": self.west.client_config()}

    def _monitored_flows(self) -> dict[str, dict[str, object]]:
        """Our engine's two flows (the monitor finds the exactly-once one transactional by its open transactions)."""
        return {
            name: {
                "source": "east",
                "target": "west",
                "topics": [self.topics[name]],
                "group": self.groups[name],
                "checkpoint_groups": [],
                "internal_topics": False,
            }
            for name in ("alo", "eos")
        }

    def stop(self) -> None:
        if self.paging is not None:
            self.paging.finish()
        if self.canary is not None:
            self.canary.stop()
        if self.monitor is not None:
            self.monitor.finish()
        if self.truth is not None:
            self.truth.finish()
        for writer in self.writers.values():
            if writer.is_alive():
                writer.finish()
        for mirror in self.mirrors.values():
            mirror.kill() if not mirror.running() else mirror.terminate(30)
        if self.mm2 is not None:
            self.mm2.stop(30)
        for reader in self.readers.values():
            reader.close()
        self.east.stop()
        self.west.stop()

    def _engine_config(self, name: str) -> dict[str, object]:
        mirror = fast_mirror_settings(
            commit_interval_s=COMMIT_INTERVAL_S,
            heartbeats_topic=f"hb.{self.groups[name]}",
            metrics_port=self.ports[name],
        )
        if name == "eos":
            mirror.update({"delivery": "exactly_once", "instance_id": EOS_INSTANCE})
        return {
            "clusters": self._clusters(),
            "flows": {
                # named as the monitor names them: the shipped rules join the engines' and the monitor's series by flow
                name: {
                    "source": "east",
                    "target": "west",
                    "topics": [self.topics[name]],
                    "group": self.groups[name],
                    # no group checkpoints: the suite measures delivery, and the checkpointer's admin calls are the
                    # ones librdkafka 2.16 crashed in while coordinators moved (docs/reliability.md, "Crashes found")
                    "checkpoint_groups": [],
                    # the at-least-once flow mirrors the pair's heartbeats and canary topics, for the canary
                    "internal_topics": name == "alo",
                }
            },
            "mirror": mirror,
        }

    def _mm2_properties(self) -> dict[str, str]:
        return mm2_properties(
            {"east": self.east.bootstrap, "west": self.west.bootstrap},
            "east",
            "west",
            self.topics["mm2"],
            **MM2_RF,
            **{
                "refresh.topics.interval.seconds": "1",
                "tasks.max": "1",
                # MM2's internal topics hold little here; every partition is one more that each follower fetches
                "offset.storage.partitions": "3",
                "status.storage.partitions": "1",
                "sync.topic.configs.enabled": "false",
                "west.offset.flush.interval.ms": str(int(COMMIT_INTERVAL_S * 1000)),
                # One worker per herder: a worker that lost its coordinator rejoins as a new member, and Connect's
                # incremental cooperative protocol held the old member's tasks for this delay (5 minutes by
                # default) before giving them back: MM2 copied nothing for the rest of a fresh-clone run's plan.
                # A worker setting takes the target cluster's prefix in MM2's dedicated mode (MirrorMakerConfig's
                # workerConfig); without one it is silently ignored. _check_mm2_worker_settings reads it back.
                **{f"{cluster}.{key}": value for cluster in ("east", "west") for key, value in MM2_WORKER.items()},
            },
            listeners=f"http://127.0.0.1:{free_port()}",
        )

    def target_topic(self, name: str) -> str:
        return f"east.{self.topics[name]}"

    def _wait_target_topic(self, name: str) -> None:
        admin = AdminClient(self.west.client_config())

        def there() -> bool:
            md = admin.list_topics(timeout=10).topics.get(self.target_topic(name))
            return md is not None and md.error is None and len(md.partitions) == PARTITIONS

        wait_until(there, 240, 0.5, f"{name}: the target topic {self.target_topic(name)}", alive=self.mirrors.get(name))

    # ------------------------------------------------------------ what the oracle sees
    def acknowledged(self) -> dict[str, dict[str, int]]:
        return {name: dict(writer.acknowledged) for name, writer in self.writers.items()}

    def wait_caught_up(self, acknowledged: dict[str, dict[str, int]], timeout_s: float = 180) -> dict[str, float]:
        """Until each contestant's target holds every record ``acknowledged`` counts; seconds each took. A contestant
        still short at the deadline is recorded in ``stalled`` (with the fault under way) and no longer waited for:
        the plan goes on for the others, and the final verdict counts what it never delivered as lost."""
        started = time.monotonic()
        took: dict[str, float] = {}
        waiting = [name for name in CONTESTANTS if name not in self.stalled]
        while True:
            for name in waiting:
                if name in took:
                    continue
                self.readers[name].advance()
                if self.readers[name].holds_all(acknowledged[name]):
                    took[name] = time.monotonic() - started
            if len(took) == len(waiting):
                return took
            self.check_mirrors_alive()
            if time.monotonic() > started + timeout_s:
                for name in waiting:
                    if name not in took:
                        verdict = judge(acknowledged[name], self.readers[name].all())
                        self.stalled[name] = f"{self.current}: not caught up within {timeout_s:.0f} s ({verdict})"
                return took
            time.sleep(0.5)

    def check_mirrors_alive(self) -> None:
        for name, mirror in self.mirrors.items():
            if not mirror.running():
                code = mirror.proc.returncode if mirror.proc is not None else None
                raise AssertionError(
                    f"{name} mirror exited with {code}:\n{mirror.log_text()[-3000:]}"
                    + crash_report(code, mirror.workdir)
                )

    def run_fault(self, name: str, fault: Callable[[], None]) -> Measured:
        started, started_ms = time.monotonic(), int(time.time() * 1000)
        self.current = name
        if self.monitor is not None:
            self.monitor.fault = name
        if self.paging is not None:
            self.paging.fault = name
        fault()
        acknowledged = self.acknowledged()
        self.east.wait_in_sync(180)
        self.west.wait_in_sync(180)
        measured = Measured(name, catch_up_s=self.wait_caught_up(acknowledged))
        measured.seconds = time.monotonic() - started
        if self.truth is not None:
            ended_ms = int(time.time() * 1000)
            for contestant, stables in self.truth.stables.items():
                measured.stood_still_s[contestant] = longest_stall_s(list(stables), started_ms, ended_ms)
        for contestant in [c for c in CONTESTANTS if c not in self.stalled]:
            total = judge(self.writers[contestant].acknowledged, self.readers[contestant].all()).duplicates
            measured.duplicates[contestant] = total - self._duplicates[contestant]
            self._duplicates[contestant] = total
        self.measured.append(measured)
        if self.monitor is not None:
            if not self.monitor.alive() and self.monitor_died_during is None:
                self.monitor_died_during = name
            self.monitor.fault = f"after {name}"
        if self.paging is not None:
            if name.startswith("rolling restart"):  # clean: nothing may page, not even later (settle_alerts)
                self.still_alerting[name] = self.settle_alerts()
            self.paging.ended(name)
            self.paging.fault = f"after {name}"
        return measured
