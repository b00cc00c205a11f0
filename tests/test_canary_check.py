"""`canary check` on the real clusters with the real mirror engine (run as a process)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from harness.helpers import admin, end_offsets
from harness.mirror_harness import BIN, MirrorProcess
from mirrorwatch.canary.events import is_canary
from mirrorwatch.core.records import CanaryEvent

from .support.canary_checks import CRIT_S, canary_config, check_until, delete_records_before, run_check, write
from .support.canary_json import check_json_schema


def groups_on(bootstrap: str) -> set[str]:
    return {g.group_id for g in admin(bootstrap).list_consumer_groups(request_timeout=10).result(15).valid}


@pytest.fixture
def healthy(source, target, mirror_config, topic_name, tmp_path):
    """A running mirror and a canary config whose check already passed once."""
    cfg = canary_config(mirror_config, topic_name)
    path = write(cfg, tmp_path / "canary.yaml")
    mirror = MirrorProcess(cfg, tmp_path / "mirror.yaml").start()
    try:
        check_until(path, 0, 60, alive=mirror)
        yield path, cfg, mirror
    finally:
        try:
            mirror.terminate()
        except subprocess.TimeoutExpired:
            mirror.kill()


def test_ok_while_mirror_runs_with_json_schema_and_no_groups_left(healthy, source, target):
    path, cfg, _ = healthy
    run = run_check(path)
    assert run.rc == 0, run.stdout + run.stderr
    body = run.body
    check_json_schema(body)
    assert body["status"] == "OK" and body["partitions_total"] == 3 and body["partitions_seen"] == 3
    assert body["missing_partitions"] == [] and body["lost"] == body["duplicates"] == body["reordered"] == 0
    assert 0 < body["latency_ms"]["min"] <= body["latency_ms"]["max"] < CRIT_S * 1000
    assert body["latency_basis"] == "log_append_time" and body["target_topic"] == f"east.{cfg['canary']['topic']}"
    assert body["heartbeat_age_s"] is not None and body["heartbeat_age_s"] < 30
    assert body["message"].startswith("OK east→west round trip ") and "(3/3 partitions), heartbeat " in body["message"]
    line = run_check(path, as_json=False)
    assert (
        line.rc == 0 and line.stdout.count("\n") == 1 and line.stdout.startswith("OK east→west") and line.stderr == ""
    )
    print("healthy:", line.stdout.strip())
    for bootstrap in (source.bootstrap, target.bootstrap):  # assign()-only readers: no group anywhere
        assert not [g for g in groups_on(bootstrap) if "canary" in g]


def test_critical_when_mirror_stops_then_ok_after_restart(healthy, source, tmp_path):
    """Stopped mirror: the events are overdue (still expected), not lost. Then a real gap while a check waits: its
    events removed from the source before the mirror read them (DeleteRecords, as retention does), and a later
    canary event (another run's, as the service writes every interval) mirrored: the check says lost."""
    path, cfg, mirror = healthy
    assert mirror.terminate() == 0
    run = run_check(path, timeout_s=CRIT_S)
    assert run.rc == 2, run.stdout
    body = run.body
    # it stopped waiting at its timeout: the check's own clock, which the interpreter's start on a loaded machine
    # does not lengthen (that made the process's wall time 15.8 s at load 47)
    assert body["timings_ms"]["wait"] < (CRIT_S + 5) * 1000, body["timings_ms"]
    assert body["missing_partitions"] == body["overdue_partitions"] == [0, 1, 2] and body["lost_partitions"] == []
    assert (body["lost"], body["overdue"]) == (0, 3) and body["overdue_for_s"] >= CRIT_S
    assert (body["late"], body["late_partitions"], body["late_for_s"]) == (
        3,
        [0, 1, 2],
        body["overdue_for_s"],
    )  # aliases
    assert {p["state"] for p in body["partitions"]} == {"overdue"}
    assert "0/3 canary events mirrored within 6 s (overdue partitions 0, 1, 2: " in body["message"]
    assert " s and counting)" in body["message"]
    print("stopped:", body["message"])

    source_topic = cfg["canary"]["topic"]
    starts = end_offsets(source.bootstrap, source_topic)
    outcome: dict = {}
    checking = threading.Thread(target=lambda: outcome.update(run=run_check(path, as_json=False, timeout_s=20)))
    checking.start()
    ours = _canary_offsets_after(source.bootstrap, source_topic, starts)  # the check's events, on the source
    for partition, offset in ours.items():
        delete_records_before(source.bootstrap, source_topic, partition, offset + 1)
    later = Producer({"bootstrap.servers": source.bootstrap})
    for partition in ours:
        event = CanaryEvent("another-run", 1, int(time.time() * 1000), "east", partition)
        later.produce(source_topic, value=event.to_value(), partition=partition, headers=[("mw.canary", b"1")])
    assert later.flush(10) == 0
    cfg["mirror"]["on_records_lost"] = "continue"  # the engine skips the removed records (counted) and goes on
    restarted = MirrorProcess(cfg, tmp_path / "mirror2.yaml", log_name="mirror2.log").start()
    try:
        checking.join(60)
        line = outcome["run"]
        assert line.rc == 2 and line.stdout.startswith("CRITICAL east→west 0/3 canary events mirrored within 20 s"), (
            line.stdout + line.stderr
        )
        assert "(lost partitions 0, 1, 2: a later event arrived without them)" in line.stdout
        print("gap:", line.stdout.strip())
        check_until(path, 0, 60, alive=restarted)
    finally:
        restarted.terminate()


def _canary_offsets_after(bootstrap: str, topic: str, starts: dict[int, int]) -> dict[int, int]:
    """Source offset of the first canary event at or after ``starts`` on each partition (waits up to 30 s)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "never-committed", "enable.auto.commit": False})
    reader.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
    found: dict[int, int] = {}
    deadline = time.monotonic() + 30
    try:
        while len(found) < len(starts) and time.monotonic() < deadline:
            for m in reader.consume(10, 0.5):
                if not m.error() and is_canary(m):
                    found.setdefault(m.partition(), m.offset())
    finally:
        reader.close()
    assert len(found) == len(starts), found
    return found


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when this returns: connections are refused


def test_unknown_when_source_unreachable(target, mirror_config, topic_name, tmp_path):
    port = closed_port()
    cfg = canary_config(mirror_config, topic_name)
    cfg["clusters"]["east"] = {"bootstrap.servers": f"127.0.0.1:{port}", "sasl.password": "hunter2-secret"}
    path = write(cfg, tmp_path / "c.yaml")
    for as_json in (False, True):
        run = run_check(path, as_json=as_json, timeout_s=CRIT_S)
        assert run.rc == 3 and run.elapsed < CRIT_S + 5
        text = run.stdout if not as_json else run.body["message"]
        assert f"cannot reach source cluster 'east' at 127.0.0.1:{port}" in text and text.startswith("UNKNOWN")
        assert "Traceback" not in run.stdout + run.stderr and "hunter2" not in run.stdout + run.stderr
    print("source down:", run_check(path, as_json=False, timeout_s=CRIT_S).stdout.strip())


def test_unknown_within_bounds_when_a_broker_hangs(source, mirror_config, topic_name, tmp_path):
    """A target that accepts connections and never answers (a hung broker) is UNKNOWN, in bounded time."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list = []
    stop = threading.Event()

    def accept():
        silent.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(silent.accept()[0])
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    try:
        cfg = canary_config(mirror_config, topic_name)
        cfg["clusters"]["west"] = {"bootstrap.servers": f"127.0.0.1:{silent.getsockname()[1]}"}
        run = run_check(write(cfg, tmp_path / "c.yaml"), as_json=False, timeout_s=CRIT_S)
    finally:
        stop.set()
        silent.close()
    assert run.rc == 3 and run.elapsed < CRIT_S + 5, (run.rc, run.elapsed, run.stdout)
    assert run.stdout.startswith("UNKNOWN east→west cannot reach target cluster 'west' at 127.0.0.1:")


def test_bad_input_is_unknown_one_line(tmp_path, mirror_config, topic_name):
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("clusters: [unclosed\n")
    cases = {
        "missing": ["--config", str(tmp_path / "nope.yaml")],
        "yaml": ["--config", str(bad_yaml)],
        "flow": ["--config", write(canary_config(mirror_config, topic_name), tmp_path / "c.yaml"), "--flow", "nope"],
    }
    for name, args in cases.items():
        proc = subprocess.run([str(BIN / "canary"), "check", *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 3, (name, proc.stderr)
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("canary: ") and proc.stdout == "", (
            name,
            proc.stderr,
        )


# ---------------------------------------------------------------- injected duplicates and reorders


def _fake_mirror(
    source_bootstrap, target_bootstrap, src_topic, tgt_topic, starts, before_p0=(), copies_p0=1, aborted_first=False
):
    """Copies the next event of each partition to the target, as a broken mirror would: ``before_p0`` records
    first, then ``copies_p0`` copies of partition 0's event; all in one produce batch per partition.
    ``aborted_first`` (a transactional producer, initialised): as an exactly-once mirror that failed once would, a
    copy of every event in a transaction it aborts (on the target, invisible to read_committed), then the copies
    in one it commits."""
    consumer = Consumer(
        {"bootstrap.servers": source_bootstrap, "group.id": "never-committed", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(src_topic, p, o) for p, o in starts.items()])
    got = {}
    deadline = time.monotonic() + 30
    while len(got) < len(starts) and time.monotonic() < deadline:
        for m in consumer.consume(10, 0.2):
            if not m.error() and is_canary(m):  # not the check's warm-up record
                got[m.partition()] = m
    consumer.close()
    producer = aborted_first or Producer(
        {"bootstrap.servers": target_bootstrap, "linger.ms": 50, "enable.idempotence": True}
    )
    if aborted_first:
        producer.begin_transaction()
        for p, m in sorted(got.items()):
            producer.produce(tgt_topic, value=m.value(), partition=p, headers=m.headers())
        producer.flush(10)
        producer.abort_transaction(30)
        producer.begin_transaction()
    for value in before_p0:
        producer.produce(tgt_topic, value=value, partition=0, headers=[("mw.canary", b"1")])
    for p, m in sorted(got.items()):
        for _ in range(copies_p0 if p == 0 else 1):
            producer.produce(tgt_topic, value=m.value(), partition=p, headers=m.headers())
    producer.flush(10)
    if aborted_first:
        producer.commit_transaction(30)


def _check_through_fake_mirror(source, target, mirror_config, topic_name, tmp_path, **fake):
    """The real mirror runs (heartbeats) but its canary topic is another one; the test copies this check's events."""
    cfg = canary_config(mirror_config, topic_name)
    path = write(cfg, tmp_path / "c.yaml")
    mirror_cfg = json.loads(json.dumps(cfg))
    mirror_cfg["canary"]["topic"] = f"mw.canary.other.{topic_name}"
    with MirrorProcess(mirror_cfg, tmp_path / "m.yaml"):
        # creates both canary topics, so it says so and measures nothing (the first check of a new topic would
        # measure the mirror's discovery, not replication)
        first = run_check(path, timeout_s=3)
        assert first.rc == 3 and "the canary topic is new (this check created" in first.stdout, first.stdout
        # nothing copies its events: CRITICAL (3 s: producing alone can take longer than 1 s on a loaded CI
        # machine, and the check then rightly says UNKNOWN)
        assert run_check(path, timeout_s=3).rc == 2
        src_topic, tgt_topic = cfg["canary"]["topic"], f"east.{cfg['canary']['topic']}"
        if fake.get("aborted_first"):
            # before the check: a cluster's first transactional producer waits seconds for its coordinator
            fake["aborted_first"] = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": tgt_topic})
            fake["aborted_first"].init_transactions(60)
        copier = threading.Thread(
            target=_fake_mirror,
            args=(source.bootstrap, target.bootstrap, src_topic, tgt_topic, end_offsets(source.bootstrap, src_topic)),
            kwargs=fake,
        )
        copier.start()
        run = run_check(path, timeout_s=CRIT_S)
        copier.join(30)
    return run


def test_duplicate_on_target_is_warning(source, target, mirror_config, topic_name, tmp_path):
    """One duplicate, counted once: the copies of every event in a transaction the fake mirror aborted first are on
    the target too, and are no duplicates (the check reads read_committed: a transactional target, issue 28)."""
    run = _check_through_fake_mirror(
        source, target, mirror_config, topic_name, tmp_path, copies_p0=2, aborted_first=True
    )
    assert run.rc == 1, run.stdout
    assert run.body["status"] == "WARNING" and run.body["duplicates"] == 1 and run.body["reordered"] == 0
    assert run.body["partitions_seen"] == 3 and "1 duplicate" in run.body["message"]
    print("duplicate:", run.body["message"])


def test_reordered_pair_on_target_is_warning(source, target, mirror_config, topic_name, tmp_path):
    # two events of another canary run (e.g. the service's) arrive seq 8 before seq 7 on partition 0
    pair = [CanaryEvent("otherrun", seq, int(time.time() * 1000), "east", 0).to_value() for seq in (8, 7)]
    run = _check_through_fake_mirror(source, target, mirror_config, topic_name, tmp_path, before_p0=pair)
    assert run.rc == 1, run.stdout
    assert run.body["status"] == "WARNING" and run.body["reordered"] == 1 and run.body["duplicates"] == 0
    print("reordered:", run.body["message"])


# ---------------------------------------------------------------- latency accuracy


def test_latency_agrees_with_an_independent_reader(healthy, target):
    """The reported round trip is target append time − produced_at; an independent reader sees the same."""
    path, cfg, _ = healthy
    tgt_topic = f"east.{cfg['canary']['topic']}"
    reader = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": "never-committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    reader.assign([TopicPartition(tgt_topic, p, o) for p, o in end_offsets(target.bootstrap, tgt_topic).items()])
    seen: dict = {}
    stop = threading.Event()

    def read():
        while not stop.is_set():
            for m in reader.consume(10, 0.05):
                if not m.error() and is_canary(m):
                    seen.setdefault((CanaryEvent.from_value(m.value()).run_id, m.partition()), (m, time.time() * 1000))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        run = run_check(path)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum(1 for k in seen if k[0] == run.body["run_id"]) < 3:
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join()
        reader.close()
    assert run.rc == 0 and run.body["latency_basis"] == "log_append_time"
    for entry in run.body["partitions"]:
        msg, received_ms = seen[(run.body["run_id"], entry["partition"])]
        event = CanaryEvent.from_value(msg.value())
        independent = msg.timestamp()[1] - event.produced_at_ms
        assert abs(entry["latency_ms"] - independent) <= 5, (entry, independent)
        assert received_ms - event.produced_at_ms >= entry["latency_ms"] - 1  # nobody sees it before it was appended


def test_canary_topics_replace_an_admin_client_that_failed(mirror_config, topic_name, write_config):
    """A long-lived client can stay unable to reach a cluster that answers a new client at once
    (confluentinc/librdkafka#5301 after a broker restart); the canary service's admin clients are replaced after a
    failed request, so the next probe asks with a new one. Here the stuck client is one that points nowhere."""
    from mirrorwatch.canary.topics import ClusterUnreachable, FlowTopics
    from mirrorwatch.core.clients import make_admin
    from mirrorwatch.core.config import ClusterConfig
    from mirrorwatch.core.config_loading import load_config
    from mirrorwatch.localkafka.launcher import free_port

    config = load_config(write_config(canary_config(mirror_config, topic_name)))
    topics = FlowTopics(config, None, "test-canary")
    working = topics._admins["source"]
    topics.partitions("source", topics.source_topic, 5)
    assert topics._admins["source"] is working  # a request that worked keeps its client

    nowhere = ClusterConfig.model_validate({"bootstrap.servers": f"127.0.0.1:{free_port()}"})
    topics._admins["source"] = stuck = make_admin(nowhere, "test-stuck")
    with pytest.raises(ClusterUnreachable):
        topics.partitions("source", topics.source_topic, 1)
    topics.partitions("source", topics.source_topic, 5)  # answers: a new client asked
    assert topics._admins["source"] is not stuck


def test_canary_service_replaces_a_reader_that_stopped_reading(healthy):
    """The service's target reader is swapped for one that never reaches the target (the state librdkafka#5301
    leaves a client in): the reader check sees canary events on the target that stay unread, and a new reader
    takes over where the old one stopped, so no probe counts as lost and the status is OK (with the check every
    2 s here it acts before the 6 s critical timeout; reader_guard.reader_stuck is table-tested in
    test_canary_units)."""
    from confluent_kafka import Consumer as KafkaConsumer
    from prometheus_client import CollectorRegistry

    from mirrorwatch.canary.metrics import CanaryMetrics
    from mirrorwatch.canary.service import FlowCanary
    from mirrorwatch.core.config_loading import load_config
    from mirrorwatch.localkafka.launcher import free_port

    path, _, _ = healthy
    canary = FlowCanary(load_config(path), None, CanaryMetrics(CollectorRegistry()))
    canary.reader_check_every_s = 2.0
    canary.start()
    stop = threading.Event()

    def probing():
        while not stop.wait(1.0):
            canary.probe()

    prober = threading.Thread(target=probing, daemon=True)
    prober.start()
    try:
        wait_for(lambda: canary.status == "OK", 30, "the canary's first OK")
        stuck = KafkaConsumer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "group.id": "stuck", "log_level": 0})
        original, canary.reader = canary.reader, stuck  # the original stays referenced: its thread may be reading
        swapped_at = canary.seq
        wait_for(lambda: canary.reader_replacements == 1, 30, "a new reader")
        # it resumes where the stuck one stopped, so the probes written meanwhile arrive, late at most
        wait_for(lambda: canary.seq > swapped_at + 5 and canary.status == "OK", 60, "OK with the new reader")
        assert canary._retired_readers == [stuck] and canary.tracker.lost == 0
    finally:
        stop.set()
        prober.join(10)
        canary.stop()
    original.close()


def wait_for(predicate, within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {within_s:g} s")
        time.sleep(0.25)
