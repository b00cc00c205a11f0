"""Exactly-once mirroring (``mirror.delivery: exactly_once``) on the real brokers: one transaction per round on
the target holds the records and the positions, a crash re-delivers nothing a read_committed reader sees.
SIGKILLs, a target broker's SIGKILL and a source freeze are in the exactly-once fault soak (tests/test_soak.py)."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from harness.helpers import create_topic, end_offsets
from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from mirrorwatch.core.naming import positions_group, transactional_id
from mirrorwatch.mirror.hanging import Claim, parse_claim

from .support.exactly_once import PacedWriter, delivery, read_committed
from .support.mirror_flows import committed_offsets


def eos_config(mirror_config, topic, group, **settings):
    mirror_config["flows"]["east-west"].update({"topics": [topic], "group": group})
    mirror_config["mirror"] = fast_mirror_settings(delivery="exactly_once", **settings)
    return mirror_config


def positions(bootstrap: str, group: str, topic: str, parts: int) -> dict[int, int]:
    """The positions group's committed offsets on the target ({} while its coordinator is still loading).
    read_uncommitted: what the transactions committed so far, never waiting for one still open on them."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": positions_group(group), "isolation.level": "read_uncommitted"}
    )
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(parts)], timeout=20)
        return {tp.partition: tp.offset for tp in found}
    except KafkaException:
        return {}
    finally:
        consumer.close()


def claims(bootstrap: str, group: str, topic: str, parts: int) -> dict[int, Claim | None]:
    """What each committed position claims on the target (its metadata)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": positions_group(group)})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(parts)], timeout=20)
        return {tp.partition: parse_claim(tp.metadata) for tp in found}
    finally:
        consumer.close()


def committed_total(bootstrap: str, group: str, topic: str, parts: int) -> int:
    """How far the transactions have gone, in source records (the positions' sum)."""
    return sum(max(0, offset) for offset in positions(bootstrap, group, topic, parts).values())


def test_zombie_and_scale_out_never_commit_twice(source, target, topic_name, mirror_config, tmp_path):
    """Two mirrors share the flow. One is frozen past its session (not past its transaction timeout, so only the
    positions group's generation can stop it): the other takes its partitions and goes on. Thawed, the zombie's
    open transaction must not commit. Then the other is SIGKILLed and not restarted: the survivor takes all."""
    parts, group = 6, f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, parts)
    # the freeze (12 s) outlasts the session (6 s) but not the transaction timeout (20 s); a 1 s transaction (also
    # when the mirror has caught up: the min interval) makes a freeze with records written and their positions not
    # yet sent (the zombie's abort) the likely case
    settings = {
        "transaction_timeout_s": 20,
        "transaction_interval_s": 1.0,
        "transaction_min_interval_s": 1.0,
        "consumer": {"session.timeout.ms": 6000},
    }
    mirrored_topic = f"east.{topic_name}"
    first = MirrorProcess(
        eos_config(mirror_config, topic_name, group, instance_id="a", **settings), tmp_path / "a.yaml", log_name="a.log"
    ).start()
    second = MirrorProcess(
        eos_config(mirror_config, topic_name, group, instance_id="b", **settings), tmp_path / "b.yaml", log_name="b.log"
    ).start()
    writer = PacedWriter(source.bootstrap, topic_name, parts, 3_000)
    try:
        wait_until(
            lambda: "assigned" in first.log_text() and "assigned" in second.log_text(),
            60,
            what="both mirrors to own part of the flow",
            alive=second,
        )
        writer.start()
        progress = committed_total(target.bootstrap, group, mirrored_topic, parts)
        wait_until(
            lambda: committed_total(target.bootstrap, group, mirrored_topic, parts) > progress + 3_000, 60, what="flow"
        )
        os.kill(first.proc.pid, signal.SIGSTOP)  # mid-transaction: records flow at 3,000/s
        frozen_at = time.monotonic()
        try:
            # the other goes on meanwhile: its own partitions at once, the frozen one's after the session (6 s)
            # once their positions are stable (a transaction the frozen one holds on them keeps them waiting)
            progress = committed_total(target.bootstrap, group, mirrored_topic, parts)
            wait_until(
                lambda: committed_total(target.bootstrap, group, mirrored_topic, parts) > progress + 3_000,
                10,
                what="the other mirror to go on while one is frozen",
                alive=second,
            )
            time.sleep(max(0.0, 12 - (time.monotonic() - frozen_at)))
        finally:
            os.kill(first.proc.pid, signal.SIGCONT)  # 12 s: never near the transaction timeout (20 s)
        # thawed, it finds its assignment lost: what it wrote since its last commit is aborted (frozen inside a
        # commit whose positions the group had accepted before the session ended, that commit completes: legal)
        wait_until(
            lambda: "assignment was lost" in first.log_text(), 30, what="the zombie to find it was fenced", alive=first
        )
        second.kill()  # scale-out with one killed: the thawed one takes everything after b's session
        progress = committed_total(target.bootstrap, group, mirrored_topic, parts)
        wait_until(
            lambda: committed_total(target.bootstrap, group, mirrored_topic, parts) > progress + 3_000,
            60,
            what="the survivor to go on with every partition",
            alive=first,
        )
        total = writer.finish()
        wait_until(
            lambda: (
                positions(target.bootstrap, group, mirrored_topic, parts) == end_offsets(source.bootstrap, topic_name)
            ),
            90,
            what="everything mirrored by the survivor",
            alive=first,
        )
        # the killed mirror's open transaction holds read_committed readers back until the target aborts it
        reads: list = []
        wait_until(
            lambda: reads.append(read_committed(target.bootstrap, mirrored_topic)) or len(reads[-1]) >= total,
            60,
            interval=3,
            what="the killed mirror's open transaction to be aborted (transaction_timeout_s)",
        )
        # the source group's offsets follow the transactions (kafka-consumer-groups and committed lag)
        wait_until(
            lambda: (
                committed_offsets(source.bootstrap, group, topic_name, parts)
                == end_offsets(source.bootstrap, topic_name)
            ),
            30,
            what="the source group's commits after the transactions",
            alive=first,
        )
    finally:
        first.terminate()
        second.kill()
    seen = delivery(reads[-1], total, parts)
    assert seen.exact and seen.records == total, seen
    # the target holds commit markers (and the zombie's aborted records): end offsets count them as records
    ends = end_offsets(target.bootstrap, mirrored_topic)
    assert sum(ends.values()) > total
    # each position claims a record before the end, written by one of the two (mirror/hanging.py)
    ids = {transactional_id(group, "a"), transactional_id(group, "b")}
    for partition, claim in claims(target.bootstrap, group, mirrored_topic, parts).items():
        assert claim is not None and 0 <= claim.target_offset < ends[partition] and claim.writer in ids, claim


def test_the_target_broker_killed_doubles_nothing(source, target, topic_name, mirror_config, tmp_path):
    """Issue 34's finding: the single target broker SIGKILLed under exactly-once (then the mirror killed and
    restarted) doubled a round of records. The
    restarted broker's coordinator can end a transaction open at the kill without writing its markers ("Couldn't
    find leader endpoint ... likely deleted"), leaving it hanging; the mirror's next commit on that partition, with
    the same producer id, used to end the hanging one as committed too (docs/exactly-once.md, "Known limits"). Now
    the mirror does not write to a partition with a transaction open on it, unless its committed position claims
    that transaction's records (it was committed: on-call aborting it lost a round of records in a fresh-clone run;
    the mirror's next commit there ends it as committed). The test plays on-call: it runs the abort command the
    engine's ERROR line gives (Kafka's own kafka-transactions.sh), and nothing else. A read_committed reader then
    sees every record once, in order."""
    if target.local is None:
        pytest.skip("kills a local broker")
    parts, group = 6, f"g-{topic_name}"
    mirrored = f"east.{topic_name}"
    create_topic(source.bootstrap, topic_name, parts)
    cfg = eos_config(mirror_config, topic_name, group, transaction_timeout_s=10)
    writer = PacedWriter(source.bootstrap, topic_name, parts, rate=1000)
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        on_call = OnCall(target.bootstrap, mirror)
        writer.start()
        wait_until(
            lambda: committed_total(target.bootstrap, group, mirrored, parts) >= 4000, 90, what="flow", alive=mirror
        )
        before = committed_total(target.bootstrap, group, mirrored, parts)
        target.local.kill()  # mid-transaction: records flow, a transaction every 0.1 s
        # down past the transaction timeout: the restarted coordinator finds the open transaction expired and ends
        # it while it loads, before it knows the partitions' leader (the soak's "3 of 4 runs")
        time.sleep(12)
        target.local.start()
        wait_until(
            lambda: on_call.tend() or committed_total(target.bootstrap, group, mirrored, parts) >= before + 3000,
            240,  # the broker's restart, the transaction timeout, on-call's aborts (a JVM each): minutes under load
            what="the flow going on after the target's restart",
            alive=mirror,
        )
        mirror.kill()  # then the mirror too, as in the plan: its successor fences what it left open
        mirror.start()
        produced = writer.finish()
        wait_until(
            lambda: on_call.tend() or committed_total(target.bootstrap, group, mirrored, parts) >= produced,
            240,
            what="every record committed",
            alive=mirror,
        )
    seen = delivery(read_committed(target.bootstrap, mirrored), produced, parts)
    log = target.local.dir / "logs" / "server.log"
    skipped = log.read_text(errors="replace").count("Couldn't find leader endpoint") if log.exists() else 0
    print(
        f"\ntarget killed under exactly-once: {produced} records; the restarted coordinator skipped markers {skipped} "
        f"time(s); hanging transactions aborted by on-call {on_call.aborted}: {seen}"
    )
    assert seen.exact and seen.records == produced, seen


class OnCall:
    """On-call's part, as the runbook says: run the abort command the engine's ERROR line gives for a transaction
    hanging on a partition, and nothing else (a committed one left open, the engine ends itself or says never to
    abort). Kafka's own kafka-transactions.sh does the abort."""

    def __init__(self, bootstrap: str, mirror: MirrorProcess) -> None:
        self.bootstrap, self.mirror = bootstrap, mirror
        self.aborted: list[tuple[int, int]] = []

    def tend(self) -> bool:
        """Look once, abort what the engine said hangs; always False (a step inside a wait, never its goal)."""
        from mirrorwatch.localkafka.tools import kafka_transactions

        for topic, partition, offset in ABORT_ADVICE.findall(self.mirror.log_text()):
            if (int(partition), int(offset)) in self.aborted:
                continue
            out = kafka_transactions(
                self.bootstrap, "abort", "--topic", topic, "--partition", partition, "--start-offset", offset
            )
            assert out.returncode == 0, out.stdout + out.stderr
            self.aborted.append((int(partition), int(offset)))
        return False


ABORT_ADVICE = re.compile(r"abort --topic (\S+) --partition (\d+) --start-offset (\d+)")
