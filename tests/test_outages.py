"""Clusters that freeze (SIGSTOP) or vanish while the mirror runs or starts: no exit, nothing lost.

An independent sequence checker (bench.soak.check: keyed records with per-key sequence numbers, read back whole
from both sides) says what was lost (must be 0) and whether every duplicate lies in the fault's in-flight
window (between the group's commit before the fault and the source end once the mirror had caught up past it).
A frozen broker is always SIGCONTed in a `finally`: other tests share the session clusters.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
import urllib.request

import pytest
import yaml
from confluent_kafka import KafkaError, KafkaException

from bench.soak import PARTITIONS, Producing, _read, check
from harness.helpers import create_topic, end_offsets
from harness.mirror_harness import BIN, MirrorProcess, fast_mirror_settings, wait_until

from .support.outages import committed_offsets, frozen, local_only

FREEZE_S = 12  # longer than the mirror consumer's session (10 s), shorter than the brokers' (20 s, launcher.py)


def cluster_up(mirror: MirrorProcess, role: str) -> float | None:
    match = re.search(r"metrics on http://([\d.]+):(\d+)/metrics", mirror.log_text())
    if not match:
        return None
    try:
        text = urllib.request.urlopen(f"http://{match[1]}:{match[2]}/metrics", timeout=2).read().decode()
    except OSError:
        return None
    pattern = r'^mirrorwatch_mirror_cluster_up\{[^}]*role="' + re.escape(role) + r'"[^}]*\} (\S+)'
    found = re.search(pattern, text, re.M)
    return float(found[1]) if found else None


def caught_up(source, group, topic) -> dict[int, int] | None:
    ends = end_offsets(source.bootstrap, topic)
    return ends if committed_offsets(source.bootstrap, group, topic, PARTITIONS) == ends else None


def verdict(source, target, topic, windows):
    lost, duplicates, outside, order = check(
        _read(source.bootstrap, topic), _read(target.bootstrap, f"east.{topic}"), windows
    )
    print(
        f"{topic}: lost {lost}, duplicates {duplicates} ({outside} outside the in-flight windows), order violations {order}"
    )
    assert lost == 0, f"{lost} records lost"
    assert outside == 0, f"{outside} duplicates outside the faults' in-flight windows"
    assert order == 0


def state_lines(log: str, role: str) -> tuple[int, int]:
    return (
        len(re.findall(rf"{role} cluster '\w+' at \S+ is unreachable", log)),
        len(re.findall(rf"{role} cluster '\w+' at \S+ is reachable again", log)),
    )


def assert_one_line_per_state_change(log: str, role: str) -> None:
    """The watch logs state changes, never retries: "unreachable" and "reachable again" alternate, starting with
    the first and ending with the second. A single-node KRaft cluster whose pause outlasts its broker session
    fences its own broker at the thaw and really goes away a second time (seen in whole-suite runs); the local
    clusters' 20 s broker session keeps the 12 s freezes clear of that, but one or two outages per freeze are
    accepted, since a second one would be real and reported as one."""
    changes = re.findall(rf"{role} cluster '\w+' at \S+ is (unreachable|reachable again)", log)
    outages = len(changes) // 2
    assert changes == ["unreachable", "reachable again"] * outages and 1 <= outages <= 2, (
        f"one line per state change for the {role} (got {changes}):\n{log[-3000:]}"
    )


def test_freeze_of_either_broker_while_running_costs_no_exit_and_loses_nothing(
    source, target, topic_name, mirror_config, tmp_path
):
    local_only(source, target)
    group = f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, PARTITIONS)
    mirror_config["flows"]["east-west"].update({"topics": [topic_name], "group": group})
    mirror_config["mirror"] = fast_mirror_settings()
    producing = Producing(source.bootstrap, total=60_000, rate=1_000, topic=topic_name)
    windows = []
    with MirrorProcess(mirror_config, tmp_path / "m.yaml") as mirror:
        producing.start()
        wait_until(
            lambda: (
                sum(max(0, o) for o in committed_offsets(source.bootstrap, group, topic_name, PARTITIONS).values())
                > 2000
            ),
            60,
            what="mirroring before the faults",
            alive=mirror,
        )
        for role, cluster in (("source", source), ("target", target)):
            before = committed_offsets(source.bootstrap, group, topic_name, PARTITIONS)
            seen_down = False
            with frozen(cluster):
                deadline = time.monotonic() + FREEZE_S
                while time.monotonic() < deadline:
                    seen_down = seen_down or cluster_up(mirror, role) == 0.0
                    time.sleep(0.5)
            assert seen_down, (
                f"mirrorwatch_mirror_cluster_up{{role={role}}} never showed 0 during a {FREEZE_S} s freeze"
            )
            at_resume = end_offsets(source.bootstrap, topic_name)
            wait_until(
                lambda: all(
                    c >= at_resume[p]
                    for p, c in committed_offsets(source.bootstrap, group, topic_name, PARTITIONS).items()
                ),
                90,
                what=f"commits past the {role} freeze",
                alive=mirror,
            )
            windows.append((before, end_offsets(source.bootstrap, topic_name)))
            wait_until(lambda: cluster_up(mirror, role) == 1.0, 30, what=f"{role} reported up again", alive=mirror)
        producing.join(120)
        assert producing.failed == 0
        wait_until(lambda: caught_up(source, group, topic_name), 120, what="catching up", alive=mirror)
        assert mirror.running()
    log = mirror.log_text()
    for role in ("source", "target"):
        assert_one_line_per_state_change(log, role)
    assert "Traceback" not in log and "%3|" not in log and "%4|" not in log
    verdict(source, target, topic_name, windows)


@pytest.mark.parametrize("role", ["source", "target"])
def test_freeze_while_the_mirror_starts_costs_no_exit_and_loses_nothing(
    role, source, target, topic_name, mirror_config, tmp_path
):
    local_only(source, target)
    group = f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, PARTITIONS)
    producing = Producing(source.bootstrap, total=10_000, rate=5_000, topic=topic_name)
    producing.start()
    producing.join(60)
    mirror_config["flows"]["east-west"].update({"topics": [topic_name], "group": group})
    mirror_config["mirror"] = fast_mirror_settings()
    mirror = MirrorProcess(mirror_config, tmp_path / "m.yaml")
    try:
        with frozen(source if role == "source" else target):
            mirror.start()
            time.sleep(FREEZE_S)
            assert mirror.running(), mirror.log_text()[-2000:]
        wait_until(lambda: caught_up(source, group, topic_name), 90, what="mirroring after the freeze", alive=mirror)
        assert mirror.terminate() == 0
    finally:
        mirror.kill()
    log = mirror.log_text()
    assert_one_line_per_state_change(log, role)
    assert "internal error" not in log and "Traceback" not in log
    verdict(source, target, topic_name, [])


def test_gives_up_after_max_unreachable_s_with_one_line_and_exit_3(mirror_config, tmp_path):
    from mirrorwatch.localkafka.launcher import free_port

    nobody = f"127.0.0.1:{free_port()}"  # nothing listens there: a cluster that vanished for good
    mirror_config["clusters"]["east"] = {"bootstrap.servers": nobody}
    mirror_config["mirror"] = fast_mirror_settings(max_unreachable_s=3)
    mirror = MirrorProcess(mirror_config, tmp_path / "m.yaml")
    try:
        mirror.start()
        rc = mirror.wait(60)
    finally:
        mirror.kill()
    log = mirror.log_text()
    assert rc == 3, log
    last = log.strip().splitlines()[-1]
    assert last == (
        f"mirror: source cluster 'east' at {nobody} has been unreachable for "
        f"{last.split('for ')[1].split(' s')[0]} s (mirror.max_unreachable_s = 3); giving up"
    ), last
    assert state_lines(log, "source") == (1, 0), log


def test_one_shot_commands_answer_in_one_line_while_the_source_is_frozen(source, target, mirror_config, tmp_path):
    """`monitor lag`, `mirror failover check` and `canary check` against a frozen source (it accepts connections
    and never answers): each answers (exit 3) with one line naming the cluster and its address, and no client
    library line on stderr."""
    local_only(source)
    mirror_config["canary"] = {"connect_timeout_s": 2, "crit_latency_s": 4, "warn_latency_s": 2}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(mirror_config))
    commands = {
        "monitor lag": [str(BIN / "monitor"), "lag", "--config", str(path), "--timeout", "6"],
        "failover check": [str(BIN / "mirror"), "failover", "check", "--config", str(path), "--timeout", "6"],
        "canary check": [str(BIN / "canary"), "check", "--config", str(path), "--timeout", "4"],
    }
    with frozen(source):
        running = {
            name: subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name, argv in commands.items()
        }
        outputs = {name: proc.communicate(timeout=90) for name, proc in running.items()}
    where = f"source cluster 'east' at {source.bootstrap}"
    for name, (out, err) in outputs.items():
        said = out if name == "canary check" else err
        lines = [line for line in said.splitlines() if line.strip()]
        assert running[name].returncode == 3, (name, out, err)
        assert len(lines) == 1 and where in lines[0], (name, out, err)
        assert "%3|" not in err and "%4|" not in err and "%6|" not in err and "Traceback" not in err, (name, err)
        print(f"{name}: {lines[0]}")


def test_source_killed_and_restarted_while_running_costs_no_exit_and_loses_nothing(
    source, target, topic_name, mirror_config, tmp_path
):
    """The source vanishes (SIGKILL, as a machine crash) for a few seconds and comes back."""
    local_only(source)
    group = f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, PARTITIONS)
    producing = Producing(source.bootstrap, total=10_000, rate=5_000, topic=topic_name)
    producing.start()
    producing.join(60)
    assert producing.failed == 0
    mirror_config["flows"]["east-west"].update({"topics": [topic_name], "group": group})
    mirror_config["mirror"] = fast_mirror_settings()
    with MirrorProcess(mirror_config, tmp_path / "m.yaml") as mirror:
        wait_until(lambda: caught_up(source, group, topic_name), 90, what="mirroring before the crash", alive=mirror)
        before = committed_offsets(source.bootstrap, group, topic_name, PARTITIONS)
        source.local.kill()
        try:
            wait_until(lambda: cluster_up(mirror, "source") == 0.0, 30, what="the source reported down", alive=mirror)
        finally:
            source.local.start()
        wait_until(lambda: cluster_up(mirror, "source") == 1.0, 60, what="the source reported up again", alive=mirror)
        wait_until(lambda: caught_up(source, group, topic_name), 90, what="caught up after the crash", alive=mirror)
        windows = [(before, end_offsets(source.bootstrap, topic_name))]
        assert mirror.running()
    assert mirror.proc.returncode == 0, f"a stop past 15 s (SIGKILL); the log ends:\n{mirror.log_text()[-3000:]}"
    assert state_lines(mirror.log_text(), "source") == (1, 1), mirror.log_text()[-3000:]
    verdict(source, target, topic_name, windows)


@pytest.mark.parametrize(
    "code, transient",
    [
        (KafkaError._TRANSPORT, True),
        (KafkaError._TIMED_OUT, True),
        (KafkaError._ALL_BROKERS_DOWN, True),
        (KafkaError.REQUEST_TIMED_OUT, True),
        (KafkaError.NOT_COORDINATOR, True),
        (KafkaError.LEADER_NOT_AVAILABLE, True),
        (KafkaError._AUTHENTICATION, False),
        (KafkaError._SSL, False),
        (KafkaError.SASL_AUTHENTICATION_FAILED, False),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, False),
        (KafkaError.CLUSTER_AUTHORIZATION_FAILED, False),
        (KafkaError.INVALID_CONFIG, False),
    ],
)
def test_which_errors_are_waited_out(code, transient):
    from mirrorwatch.mirror.outage import is_transient

    assert is_transient(KafkaException(KafkaError(code))) is transient


@pytest.mark.parametrize(
    "message, transient",
    [
        # what KRaft's controller answers a CreateTopics while its only broker is fenced (a whole-suite soak
        # restarted the target just as the mirror started, and the mirror ended with an internal error)
        ("Unable to replicate the partition 1 time(s): All brokers are currently fenced.", True),
        (
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached "
            "because only 1 broker(s) are registered.",
            False,
        ),
    ],
)
def test_a_fenced_cluster_is_waited_out_but_too_few_brokers_is_not(message, transient):
    from mirrorwatch.mirror.outage import is_transient

    error = KafkaError(KafkaError.INVALID_REPLICATION_FACTOR, message)
    assert is_transient(KafkaException(error)) is transient


def _watch_of(bootstrap: str, timeout_s: float = 2.0):
    from mirrorwatch.core.config_loading import config_from_dict
    from mirrorwatch.mirror.outage import ClusterWatch

    cluster = config_from_dict({"clusters": {"west": {"bootstrap.servers": bootstrap}}, "flows": {}}).clusters["west"]
    return ClusterWatch([("target", "west", cluster)], timeout_s=timeout_s)


@pytest.mark.parametrize(
    "answers, up, lines",
    [
        # (asked at, answered) in the order the answers come back
        ([(2.0, True), (1.0, False)], True, []),  # an older probe's late timeout: not an outage
        ([(2.0, False), (1.0, True)], False, ["unreachable"]),  # an older probe's late answer does not end one
        ([(1.0, False), (2.0, True)], True, ["unreachable", "reachable again"]),
        ([(1.0, True), (1.0, False)], False, ["unreachable"]),  # asked at the same moment: the later answer
    ],
)
def test_an_answer_to_an_older_probe_is_not_recorded(answers, up, lines, caplog):
    from mirrorwatch.localkafka.launcher import free_port

    watch = _watch_of(f"127.0.0.1:{free_port()}")
    with caplog.at_level("WARNING", logger="mirrorwatch.mirror"):
        for asked_at, answered in answers:
            watch.mark("target", answered, "Local: Timed out", asked_at)
    assert watch.up["target"] is up
    assert re.findall(r"is (unreachable|reachable again)", caplog.text) == lines


def test_a_late_timeout_of_a_probe_asked_before_an_answered_one_says_nothing(target, caplog):
    """The watch's thread and the start-up steps probe one cluster at once: the probe asked first (while the cluster
    was away) fails only after the one asked second was answered. The cluster stays up, with no "unreachable" line,
    and /readyz is told only the newer answer. (The first probe's answer is a real failure, from a client of an
    address nothing listens on; it is held back until the second probe's answer is recorded.)"""
    from mirrorwatch.localkafka.launcher import free_port

    watch = _watch_of(target.bootstrap)
    own, away = watch._admins["target"], watch._make_probe_admin(_watch_of(f"127.0.0.1:{free_port()}").clusters[0][2])
    told: list[bool] = []
    watch.on_probe = lambda alias, answered: told.append(answered)
    asked, newer_answered = threading.Event(), threading.Event()
    real_ask = watch._ask

    def ask(admin):
        answer = real_ask(admin)
        if admin is away:
            asked.set()
            newer_answered.wait(30)
        return answer

    watch._ask = ask
    watch._admins["target"] = away
    first = threading.Thread(target=watch.probe, args=("target",))
    with caplog.at_level("WARNING", logger="mirrorwatch.mirror"):
        first.start()
        assert asked.wait(30)
        watch._admins["target"] = own
        assert watch.probe("target") is True
        newer_answered.set()
        first.join(30)
    assert not first.is_alive()
    assert watch.up["target"] and "target" not in watch.last_error and told == [True]
    assert "unreachable" not in caplog.text
