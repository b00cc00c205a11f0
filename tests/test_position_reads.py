"""Exactly-once: a new owner's positions are read as stable offsets, per partition, without blocking
(mirrorwatch/mirror/positions.py). The rule is pure; the reads run against the real broker, with a real transaction
holding offsets on some partitions of the positions group."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from harness.helpers import create_topic
from mirrorwatch.core.clients import make_consumer
from mirrorwatch.core.config import ClusterConfig
from mirrorwatch.mirror.positions import HELD, PositionReads, sort_answers

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


@pytest.mark.parametrize(
    ("answers", "wanted", "found", "held"),
    [
        # stable partitions start; one a transaction holds waits
        ([(A0, 1, 5, None), (A1, 1, -1, HELD)], {A0: 1, A1: 1}, [(A0, 5)], [A1]),
        # never committed in the group: start from the source group's commit (offset < 0 is passed on)
        ([(A0, 1, -1001, None)], {A0: 1}, [(A0, -1001)], []),
        # revoked while it was asked: dropped
        ([(A0, 1, 5, None), (B0, 1, 7, None)], {B0: 1}, [(B0, 7)], []),
        # revoked and assigned again since it was asked: a new owner may have moved it, ask again
        ([(A0, 1, 5, None)], {A0: 2}, [], []),
        # answered twice before the data loop picked the first up: started once
        (
            [(A0, 1, 5, None), (A0, 1, 5, None), (A1, 1, -1, HELD), (A1, 1, 6, None)],
            {A0: 1, A1: 1},
            [(A0, 5), (A1, 6)],
            [],
        ),
        # asked twice meanwhile: only the answer to the current assignment counts
        ([(A0, 1, 5, None), (A0, 2, 9, None)], {A0: 2}, [(A0, 9)], []),
    ],
)
def test_which_answers_start_a_partition(answers, wanted, found, held):
    assert sort_answers(answers, wanted) == (found, held)


COORDINATOR_MOVING = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError._TIMED_OUT,
}


def commit_offsets(committer: Consumer, offsets: list[TopicPartition]) -> None:
    """Set up the positions: a group coordinator still loading on a fresh broker answers NOT_COORDINATOR (or
    COORDINATOR_LOAD_IN_PROGRESS) at first, retriably."""
    deadline = time.monotonic() + 60
    while True:
        try:
            committer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_MOVING or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def poll_until(reads: PositionReads, want: int, timeout: float = 20) -> list:
    found: list = []
    deadline = time.monotonic() + timeout
    while len(found) < want and time.monotonic() < deadline:
        found += reads.poll()
        time.sleep(0.02)
    return found


def test_an_open_transaction_holds_only_its_own_partitions(target, topic_name):
    """Offsets of partitions 0 and 1 are pending in an open transaction: 2 and 3 start at once, 0 and 1 after the
    abort, at the offsets committed before it (never the aborted ones)."""
    create_topic(target.bootstrap, topic_name, 4)
    group = f"{topic_name}.eos"
    committer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    commit_offsets(committer, [TopicPartition(topic_name, p, 5) for p in range(4)])
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"{topic_name}-holder"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"held", partition=0)
    producer.send_offsets_to_transaction(
        [TopicPartition(topic_name, 0, 9), TopicPartition(topic_name, 1, 9)], committer.consumer_group_metadata()
    )
    cluster = ClusterConfig.model_validate({"bootstrap.servers": target.bootstrap})
    said: list = []
    reads = PositionReads(lambda: make_consumer(cluster, "test-position-reads", group), lambda *args: said.append(args))
    reads.want([(topic_name, p) for p in range(4)])
    try:
        assert sorted(poll_until(reads, 2)) == [((topic_name, 2), 5), ((topic_name, 3), 5)]
        time.sleep(1.5)  # asked again and again meanwhile: still held
        assert reads.poll() == [] and sorted(reads.wanted) == [(topic_name, 0), (topic_name, 1)]
        producer.abort_transaction(30)
        assert sorted(poll_until(reads, 2)) == [((topic_name, 0), 5), ((topic_name, 1), 5)]
        assert not reads.wanted and not said
    finally:
        reads.close()
        committer.close()


def test_positions_are_read_again_after_the_target_restarts(target, topic_name):
    """Asked while the target is away, nothing starts; once it is back, the positions arrive (asked again with a new
    consumer: librdkafka 2.16's long-lived clients kept timing out on group requests after a broker's restart)."""
    if target.local is None:
        pytest.skip("restarts a local broker")
    create_topic(target.bootstrap, topic_name, 2)
    group = f"{topic_name}.eos"
    committer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    commit_offsets(committer, [TopicPartition(topic_name, p, 7) for p in range(2)])
    committer.close()
    cluster = ClusterConfig.model_validate({"bootstrap.servers": target.bootstrap})
    reads = PositionReads(lambda: make_consumer(cluster, "test-position-reads", group), lambda *args: None)
    try:
        target.local.kill()
        try:
            reads.want([(topic_name, p) for p in range(2)])
            assert poll_until(reads, 1, timeout=3) == []  # never a guess while the target is away
        finally:
            target.local.start()
        assert sorted(poll_until(reads, 2, timeout=60)) == [((topic_name, 0), 7), ((topic_name, 1), 7)]
    finally:
        reads.close()


def test_a_transaction_open_on_a_target_partition_holds_it_until_it_ends(target, topic_name, caplog):
    """Records of someone else's transaction are open on target partition 1 (a predecessor's that Kafka left
    hanging, its markers never written, looks the same): what the mirror wrote there would be committed with them
    at its next commit. Partitions 0, 2 and 3 start at once; 1 waits, says at ERROR once that the transaction hangs
    (past the hanging time, 1 s here) with the command to abort it, and starts after the abort."""
    import logging

    from confluent_kafka.admin import AdminClient

    from mirrorwatch.mirror.hanging import HangingWatch, open_transactions

    create_topic(target.bootstrap, topic_name, 4)
    group = f"{topic_name}.eos"
    committer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    commit_offsets(committer, [TopicPartition(topic_name, p, 5) for p in range(4)])
    committer.close()
    plain = Producer({"bootstrap.servers": target.bootstrap})
    plain.produce(topic_name, b"committed", partition=1)  # the last stable offset is then 1, not 0
    plain.flush(30)
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"{topic_name}-dangling"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic_name, b"open", partition=1)
    producer.flush(30)
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    cluster = ClusterConfig.model_validate({"bootstrap.servers": target.bootstrap})
    said: list = []
    reads = PositionReads(
        lambda: make_consumer(cluster, "test-position-reads", group),
        lambda *args: said.append(args),
        lambda keys: open_transactions(admin, keys),
        HangingWatch("the-mirror", 1.0),
    )
    caplog.set_level(logging.ERROR, logger="mirrorwatch.mirror")
    reads.want([(topic_name, p) for p in range(4)])
    try:
        assert sorted(poll_until(reads, 3)) == [((topic_name, p), 5) for p in (0, 2, 3)]
        deadline = time.monotonic() + 20
        while not any("hanging" in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
            assert reads.poll() == []
            time.sleep(0.1)
        (line,) = [r.getMessage() for r in caplog.records if "hanging" in r.getMessage()]
        assert f"--topic {topic_name} --partition 1 --start-offset 1" in line
        assert sorted(reads.wanted) == [(topic_name, 1)]
        producer.abort_transaction(30)
        assert poll_until(reads, 1) == [((topic_name, 1), 5)]
        assert not reads.wanted and not said
    finally:
        reads.close()


def test_an_open_transaction_our_position_claims_is_taken_and_one_another_mirror_claims_is_never_aborted(
    target, topic_name, caplog
):
    """A transaction Kafka committed but left open on two partitions (its markers skipped): the positions committed
    with it claim its records. On partition 0 the claim is ours: the partition starts at once (our next commit there
    ends it as committed). On 1 another mirror's transactional id claims it: it waits, and past the hanging time
    says at ERROR never to abort it. Then a transaction of ours writes to 0 and is aborted, which ends the open one
    aborted too: partition 0, asked again, starts from the claim's earlier position, to mirror the lost records
    again."""
    import logging

    from confluent_kafka.admin import AdminClient

    from mirrorwatch.mirror.hanging import Claim, HangingWatch, claim_metadata, open_transactions

    create_topic(target.bootstrap, topic_name, 2)
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"{topic_name}-left-open"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in (0, 1):
        producer.produce(topic_name, b"committed, markers skipped", partition=p)
    producer.flush(30)  # both at offset 0, open
    group = f"{topic_name}.eos"
    committer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    claims = {0: Claim(0, 3, "the-mirror"), 1: Claim(0, 3, "another-mirror")}
    commit_offsets(committer, [TopicPartition(topic_name, p, 4, metadata=claim_metadata(claims[p])) for p in (0, 1)])
    committer.close()
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    cluster = ClusterConfig.model_validate({"bootstrap.servers": target.bootstrap})
    reads = PositionReads(
        lambda: make_consumer(cluster, "test-position-reads", group),
        lambda *args: None,
        lambda keys: open_transactions(admin, keys),
        HangingWatch("the-mirror", 1.0),
    )
    caplog.set_level(logging.WARNING, logger="mirrorwatch.mirror")
    reads.want([(topic_name, p) for p in (0, 1)])
    try:
        assert poll_until(reads, 1) == [((topic_name, 0), 4)]  # ours, committed: taken at its position
        assert reads.claim_of((topic_name, 0)) == claim_metadata(claims[0])
        deadline = time.monotonic() + 20
        while not any("Do NOT abort" in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
            assert reads.poll() == []
            time.sleep(0.1)
        (line,) = [r.getMessage() for r in caplog.records if "Do NOT abort" in r.getMessage()]
        assert f"{topic_name}[1]" in line and "another-mirror" in line
        # one of ours writes there (the same producer id: it joins the open transaction) and is aborted: its
        # abort marker, perhaps still on its way when asked again, ends the open one aborted
        producer.produce(topic_name, b"ours, aborted", partition=0)
        producer.flush(30)
        producer.abort_transaction(30)
        reads.want([(topic_name, 0)])  # asked again, as after an abort of ours
        # 1 starts at its position: ended, it says nothing more of which way without the read-back of its claimed
        # record, which this PositionReads is not given (the next test gives it)
        assert sorted(poll_until(reads, 2)) == [((topic_name, 0), 3), ((topic_name, 1), 4)]
        assert any("mirroring them again from 3" in r.getMessage() for r in caplog.records)
    finally:
        reads.close()


def test_a_successor_reads_back_what_its_positions_claim_and_mirrors_again_what_ended_aborted(target, topic_name):
    """A successor remembers nothing of what its predecessor took: its own init_transactions can write the abort
    marker that ends a committed transaction left open (issue 34's plan, a fresh-clone run lost 8 records so). The
    records the positions claim are read back with a read_committed reader: on 0 the claimed record ended aborted
    and nothing follows it, on 1 it ended aborted and a committed record follows; both start again from the claim's
    earlier position. On 2 it was committed, and on 3 it is gone by retention (nothing could be mirrored again
    from before the log's start): both start at their positions."""
    from confluent_kafka.admin import AdminClient

    from mirrorwatch.mirror.hanging import CLAIM_READER, Claim, aborted_claims, claim_metadata

    create_topic(target.bootstrap, topic_name, 4)
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"{topic_name}-writer"})
    producer.init_transactions(30)
    for partitions, commit in (((0, 1, 2, 3), True), ((0, 1), False), ((1,), True)):
        producer.begin_transaction()
        for p in partitions:
            producer.produce(topic_name, b"record", partition=p)
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    # offsets: 0 committed, 1 its marker; 2 aborted on 0 and 1, 3 their marker; 4 committed on 1
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    for future in admin.delete_records([TopicPartition(topic_name, 3, 1)]).values():
        future.result(30)
    claims = {0: Claim(2, 1, "w"), 1: Claim(2, 1, "w"), 2: Claim(0, 0, "w"), 3: Claim(0, 0, "w")}
    group = f"{topic_name}.eos"
    committer = Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    commit_offsets(committer, [TopicPartition(topic_name, p, 5, metadata=claim_metadata(c)) for p, c in claims.items()])
    committer.close()
    cluster = ClusterConfig.model_validate({"bootstrap.servers": target.bootstrap})
    reads = PositionReads(
        lambda: make_consumer(cluster, "test-position-reads", group),
        lambda *args: None,
        lambda keys: {},
        aborted_claims=lambda claimed: aborted_claims(
            lambda: make_consumer(cluster, "test-claim-reader", None, **CLAIM_READER), claimed, 20
        ),
    )
    reads.want([(topic_name, p) for p in claims])
    try:
        found = sorted(poll_until(reads, 4, timeout=60))
    finally:
        reads.close()
    assert found == [((topic_name, 0), 1), ((topic_name, 1), 1), ((topic_name, 2), 5), ((topic_name, 3), 5)]
