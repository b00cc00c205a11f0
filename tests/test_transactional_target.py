"""A target written in transactions (issue 28), on the real brokers: what its offsets mean to the readers here, and
failover translation landing where it must with commit markers and aborted records between the copies.

The transactional writer is harness/transactional_mirror.py's (the engine's exactly-once mode is written
elsewhere); everything read back goes through the code under test or an independent read_committed consumer.
"""

from __future__ import annotations

import json
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from harness.helpers import create_topic, produce_numbered
from harness.mirror_harness import wait_until
from harness.transactional_mirror import CommittedCounter, TransactionalMirror, ensure_syncs_topic
from mirrorwatch.core.clients import make_consumer
from mirrorwatch.core.config import ClusterConfig
from mirrorwatch.core.naming import offset_syncs_topic
from mirrorwatch.monitor.kafka_io import ClusterReader

from .support.mirror_cli import run_cli
from .support.mirror_flows import consume_and_commit


def _read_all(consumer: Consumer, idle_s: float = 1.0) -> list:
    out, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < idle_s:
        batch = [m for m in consumer.consume(100, 0.2) if not m.error()]
        if batch:
            out += batch
            quiet_since = time.monotonic()
    return out


def test_readers_see_committed_records_and_the_last_stable_offset(target, topic_name):
    """One committed transaction (2 records + marker), one aborted (2 records + marker), one still open (1 record):
    every consumer of ours reads read_committed, even when the cluster's properties ask otherwise; the consumer's
    watermark is the last stable offset (librdkafka under read_committed), the admin's end offset the high
    watermark; the monitor's stable_end_offsets is the former."""
    create_topic(target.bootstrap, topic_name, 1)
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"facts-{topic_name}"})
    producer.init_transactions(30)
    for commit in (True, False, None):
        producer.begin_transaction()
        for i in range(1 if commit is None else 2):
            producer.produce(topic_name, value=f"{commit}-{i}".encode(), partition=0)
        producer.flush(10)
        if commit:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
    # offsets: 0-1 committed, 2 marker, 3-4 aborted, 5 marker, 6 open → LSO 6, HW 7
    cluster = ClusterConfig.model_validate(
        {"bootstrap.servers": target.bootstrap, "isolation.level": "read_uncommitted"}
    )
    consumer = make_consumer(cluster, "facts")
    try:
        tp = TopicPartition(topic_name, 0)
        assert consumer.get_watermark_offsets(tp, timeout=10, cached=False) == (0, 6)
        reader = ClusterReader("west", cluster)
        assert reader.end_offsets([(topic_name, 0)]) == {(topic_name, 0): 7}
        assert reader.stable_end_offsets([(topic_name, 0)]) == {(topic_name, 0): 6}
        consumer.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        assert [m.value() for m in _read_all(consumer)] == [b"True-0", b"True-1"]  # nothing aborted, nothing open
        producer.commit_transaction(30)  # the open one: its record, then its marker at 7
        assert [m.value() for m in _read_all(consumer)] == [b"None-0"]
        # the consumer's position is past the trailing marker (what a drain to the end offset waits for)
        assert consumer.position([tp])[0].offset == 8 == consumer.get_watermark_offsets(tp, timeout=10)[1]
    finally:
        consumer.close()


def test_failover_translation_with_markers_between_reads_each_record_once(
    source, target, topic_name, write_config, tmp_path
):
    """A group moving to a transactional target: `mirror failover translate --apply` lands it where a read_committed
    consumer reads every record from the group's commit on exactly once, after no more re-deliveries than the plan
    says, though commit markers and aborted transactions sit between the copies."""
    create_topic(source.bootstrap, topic_name, 2)
    produce_numbered(source.bootstrap, topic_name, 600, partitions=2)
    target_topic = f"east.{topic_name}"
    create_topic(target.bootstrap, target_topic, 2)
    ensure_syncs_topic(target.bootstrap, offset_syncs_topic("east"))
    mirror = TransactionalMirror(
        source.bootstrap,
        target.bootstrap,
        topic_name,
        target_topic,
        2,
        f"mw-mirror-{topic_name}",
        offset_syncs_topic("east"),
        interval_s=0.02,
        abort_every=3,
        max_records=100,  # a sync every ~50 records per partition
    )
    counter = CommittedCounter(target.bootstrap, target_topic, 2)
    mirror.start()
    counter.start()
    try:
        wait_until(lambda: sum(counter.count_below(counter.stable_ends())) == 600, 60, 0.3, "mirrored")
    finally:
        mirror.stop()
        counter.stop()
    ends = counter.stable_ends()
    assert all(end > 300 for end in ends) and mirror.aborted > 0  # markers and aborted records among the copies
    group = f"app-{topic_name}"
    commits = {0: 137, 1: 300}
    for partition, upto in commits.items():
        consume_and_commit(source.bootstrap, topic_name, group, partition, upto)
    path = write_config(
        {
            "clusters": {"east": source.config(), "west": target.config()},
            "flows": {
                "east-west": {
                    "source": "east",
                    "target": "west",
                    "topics": [topic_name],
                    "group": f"mw-mirror-{topic_name}",
                    "checkpoint_groups": [group],
                }
            },
            "mirror": {"delivery": "exactly_once"},
        }
    )
    done = run_cli("failover", "translate", "--config", str(path), "--group", group, "--apply", "--json")
    assert done.returncode == 0, done.stderr
    plan = {r["partition"]: r for r in json.loads(done.stdout)["partitions"]}
    assert {p: r["source_offset"] for p, r in plan.items()} == commits
    # the group on the target, as its consumers would start: from the applied offsets, read_committed
    consumer = Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    try:
        applied = consumer.committed([TopicPartition(target_topic, p) for p in (0, 1)], timeout=10)
        assert {tp.partition: tp.offset for tp in applied} == {p: r["target_offset"] for p, r in plan.items()}
        consumer.assign(applied)
        read = _read_all(consumer)
    finally:
        consumer.close()
    for partition, commit in commits.items():
        sources = [int(m.value()) for m in read if m.partition() == partition]
        again = [s for s in sources if s < commit]
        assert sources[len(again) :] == list(range(commit, 300)), partition  # from the commit on: each once, in order
        assert again == list(range(commit - len(again), commit))  # re-delivered: only the records just before it
        assert len(again) <= plan[partition]["max_duplicates"]


def sampled_flow(source, target, topic_name: str, partitions: int, **monitor) -> tuple[str, dict, dict]:
    """A flow east → west on ``topic_name`` whose topics and offset-syncs topic exist, and a configuration for a
    sampler watching it every second: (target topic, flow, configuration)."""
    create_topic(source.bootstrap, topic_name, partitions)
    target_topic = f"east.{topic_name}"
    create_topic(target.bootstrap, target_topic, partitions)
    ensure_syncs_topic(target.bootstrap, offset_syncs_topic("east"))
    flow = {"source": "east", "target": "west", "topics": [topic_name], "group": f"mw-mirror-{topic_name}"}
    cfg = {
        "clusters": {"east": source.config(), "west": target.config()},
        "flows": {"east-west": {**flow, "checkpoint_groups": []}},
        "monitor": {"interval_s": 1.0, "window": 3, "history": False, **monitor},
    }
    return target_topic, flow, cfg


def test_an_undeclared_transactional_target_is_found_by_its_open_transactions(source, target, topic_name, caplog):
    """A flow whose configuration does not say its target is transactional (MM2 with exactly-once on, say, left
    undeclared): the monitor sees the transactions on the target (an open one, or a partition ending on a marker)
    within a few cycles, says so once, and from then on true lag is never below a read_committed reader's count."""
    from harness.lag_accuracy import RateProducer, measure
    from mirrorwatch.core.config_loading import config_from_dict
    from mirrorwatch.monitor.sampler import Sampler

    target_topic, flow, cfg = sampled_flow(source, target, topic_name, 1)
    sampler = Sampler(config_from_dict(cfg))
    mirror = TransactionalMirror(
        source.bootstrap, target.bootstrap, topic_name, target_topic, 1, flow["group"], offset_syncs_topic("east")
    )
    counter = CommittedCounter(target.bootstrap, target_topic, 1)
    producer = RateProducer(source.bootstrap, topic_name, 300, 1)
    caplog.set_level("WARNING", logger="mirrorwatch.monitor.sampler")
    try:
        mirror.start()
        counter.start()
        producer.start()
        wait_until(
            lambda: sampler.sample() and "written transactionally" in caplog.text,
            30,
            0.1,
            "a transactional target seen",
        )
        m = measure(sampler, source.bootstrap, target.bootstrap, topic_name, target_topic, 1, [0], 8, 0.1, counter)
    finally:
        producer.stop()
        mirror.stop()
        counter.stop()
        sampler.close()
    assert caplog.text.count("written transactionally") == 1
    # -1 is "not known yet" (no offset sync nor commit read so far, as right after the switch on a busy machine), not
    # a low figure; the known ones are never below the truth
    known = [(lag, low) for lag, low in zip(m.true_lag, m.lower) if lag >= 0]
    assert len(known) >= len(m.true_lag) // 2, list(zip(m.true_lag, m.lower))
    assert all(lag >= low for lag, low in known), known


def test_a_target_whose_transactions_are_all_finished_is_found_by_the_marker_at_its_end(
    source, target, topic_name, caplog
):
    """No transaction is ever open while the monitor looks (a writer that sends a batch and commits at once, as
    MirrorMaker 2 does per poll, is open a few ms of each cycle): the first sample after one was committed finds the
    marker it left at the partition's end and says the target is transactional. Records from a plain producer
    before that are not taken for one."""
    from mirrorwatch.core.config_loading import config_from_dict
    from mirrorwatch.monitor.sampler import Sampler

    target_topic, _, cfg = sampled_flow(source, target, topic_name, 2)
    plain = Producer({"bootstrap.servers": target.bootstrap})
    for partition in (0, 1):
        plain.produce(target_topic, value=b"plain", partition=partition)
    assert plain.flush(10) == 0
    sampler = Sampler(config_from_dict(cfg))
    writer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"burst-{topic_name}"})
    caplog.set_level("WARNING", logger="mirrorwatch.monitor.sampler")
    try:
        sampler.sample()
        sampler.sample()
        assert "written transactionally" not in caplog.text
        writer.init_transactions(30)
        writer.begin_transaction()
        writer.produce(target_topic, value=b"copy", partition=1)
        writer.commit_transaction(30)
        sampler.sample()
        assert "its target has a partition that ends on a transaction marker" in caplog.text
        sampler.sample()
        assert caplog.text.count("written transactionally") == 1
    finally:
        sampler.close()


def test_the_marker_reader_tells_a_trailing_marker_from_a_record(target, topic_name):
    """Partition 0 ends on a plain record, 1 on a commit marker, 2 on an abort marker; 3 was never written."""
    from mirrorwatch.core.config_loading import config_from_dict
    from mirrorwatch.monitor.markers import TrailingMarkerReader

    create_topic(target.bootstrap, topic_name, 4)
    plain = Producer({"bootstrap.servers": target.bootstrap})
    plain.produce(topic_name, value=b"plain", partition=0)
    assert plain.flush(10) == 0
    writer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": f"ends-{topic_name}"})
    writer.init_transactions(30)
    for partition, commit in ((1, True), (2, False)):
        writer.begin_transaction()
        writer.produce(topic_name, value=b"copy", partition=partition)
        writer.flush(10)
        if commit:
            writer.commit_transaction(30)
        else:
            writer.abort_transaction(30)
    cluster = config_from_dict({"clusters": {"west": target.config()}, "flows": {}}).clusters["west"]
    settings = {"enable.partition.eof": True, "auto.offset.reset": "error"}  # as the sampler's
    reader = TrailingMarkerReader(lambda: make_consumer(cluster, "markers", **settings), 10)
    try:
        ends = ClusterReader("west", cluster).end_offsets([(topic_name, p) for p in range(4)])
        assert ends == {(topic_name, 0): 1, (topic_name, 1): 2, (topic_name, 2): 2, (topic_name, 3): 0}
        assert reader.ends_on_a_marker(ends) == {(topic_name, 0): False, (topic_name, 1): True, (topic_name, 2): True}
    finally:
        reader.close()


def test_a_hanging_transaction_on_the_target_is_reported_until_it_is_aborted(source, target, topic_name, capsys):
    """A transaction left open on a transactional flow's target partition (a producer that began it, wrote one record
    and went quiet, as a coordinator that lost the markers leaves one): past monitor.hanging_transaction_s the sampler
    names the partition, the flow is WARN with the commands to run, and the exporter, the API and `monitor lag` show
    it; the other partition stays OK. Aborted, it clears at the next sample."""
    from mirrorwatch.core.config_loading import config_from_dict
    from mirrorwatch.core.status import GroupStatus, PartitionStatus
    from mirrorwatch.monitor.api import flow_body
    from mirrorwatch.monitor.commands import print_tables
    from mirrorwatch.monitor.exporter import TextRenderer
    from mirrorwatch.monitor.sampler import Sampler

    target_topic, flow, cfg = sampled_flow(source, target, topic_name, 2, hanging_transaction_s=3)
    cfg["mirror"] = {"delivery": "exactly_once", "transaction_timeout_s": 2}  # declared transactional
    sampler = Sampler(config_from_dict(cfg))
    producer = Producer(
        {
            "bootstrap.servers": target.bootstrap,
            "transactional.id": f"hanging-{topic_name}",
            "transaction.timeout.ms": 60000,  # the broker would abort it after a minute: the test ends before
        }
    )
    try:

        def flow_view():
            return sampler.sample().view("east", flow["group"])

        # the flow sampled once before the transaction opens (a cluster slow to answer after an earlier test's
        # fault makes a first sample UNKNOWN, with its reason, and the clock below is short)
        wait_until(lambda: flow_view().error is None, 30, 0.5, "the flow sampled")
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce(target_topic, value=b"open", partition=1)
        producer.flush(10)
        opened = time.monotonic()

        view = flow_view()
        assert view.transactions is not None and not view.transactions.hanging.any()  # open, not hanging yet
        wait_until(lambda: flow_view().transactions.hanging.any(), 30, 0.5, "a hanging transaction reported")
        view = flow_view()
        assert time.monotonic() - opened > 3
        assert view.transactions.hanging.tolist() == [False, True]
        assert view.group_status == GroupStatus.WARN
        assert [int(s) for s in view.status] == [PartitionStatus.OK, PartitionStatus.WARN]
        (reason,) = view.reasons
        assert f"hanging transaction on target partition {target_topic}[1]" in reason
        assert f"kafka-transactions.sh --bootstrap-server {target.bootstrap} find-hanging --broker-id" in reason
        assert f"abort --topic {target_topic} --partition 1 --start-offset 0" in reason
        # the API's flow answer
        body = flow_body(view)
        (row,) = body["hanging_transactions"]
        assert (row["topic"], row["partition"], row["last_stable_offset"], row["target_end"]) == (target_topic, 1, 0, 1)
        assert row["open_s"] > 3 and body["reasons"] == [reason] and body["status"] == "WARN"
        by_partition = {r["partition"]: r for r in body["partitions"]}
        assert by_partition[1]["open_transaction_s"] > 3 and by_partition[1]["target_stable_end"] == 0
        assert by_partition[0]["open_transaction_s"] == 0 and by_partition[0]["target_stable_end"] == 0
        # the exporter: the flow's count and the partition's age
        text = TextRenderer().render(sampler.sample()).decode()
        labels = f'flow="east-west",source="east",target="west",group="{flow["group"]}"'
        assert f"mirrorwatch_hanging_transactions{{{labels}}} 1" in text
        age = next(
            line
            for line in text.splitlines()
            if line.startswith("mirrorwatch_open_transaction_seconds{") and 'partition="1"' in line
        )
        assert float(age.rsplit(" ", 1)[1]) > 3
        # `monitor lag`: the column and the reason line
        print_tables(sampler.sample())
        out = capsys.readouterr().out
        assert "OPEN-TXN" in out and f"hanging transaction on target partition {target_topic}[1]" in out

        producer.abort_transaction(30)
        view = flow_view()
        assert not view.transactions.hanging.any() and view.transactions.age_s.tolist() == [0.0, 0.0]
        assert view.group_status == GroupStatus.OK and view.reasons == []
        assert flow_body(view)["hanging_transactions"] == []
        assert f"mirrorwatch_hanging_transactions{{{labels}}} 0" in TextRenderer().render(sampler.sample()).decode()
    finally:
        sampler.close()
