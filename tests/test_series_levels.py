"""monitor.series: the exported per-partition families at partition, topic and flow level (synthetic snapshots,
no Kafka needed): how partitions fold (sum / largest / worst), which labels each level keeps, and that the flow
level is the flow's own figures."""

from __future__ import annotations

import math

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.lag import slowest_catch_up
from mirrorwatch.core.status import PARTITION_SEVERITY
from mirrorwatch.core.status import PartitionStatus as P
from mirrorwatch.monitor.exporter import MetricsCache
from mirrorwatch.monitor.series import SERIES_LEVELS, rollup_of

from .support.monitor_views import A, mirror_view, snapshot, unknown_view

NAN = math.nan


@pytest.mark.parametrize(
    "topics,values,sums",
    [
        (["a", "a", "b"], [1, 2, 3], {"a": 3, "b": 3}),
        (["a", "b", "a"], [1, 2, 3], {"a": 4, "b": 2}),  # partitions of a topic need not be adjacent
        (["a", "a", "b"], [-1, 2, -1], {"a": 2, "b": -1}),  # unknown left out; none known = unknown
        (["b", "a"], [5, 7], {"a": 7, "b": 5}),
    ],
)
def test_records_are_summed_over_the_partitions_that_know_them(topics, values, sums):
    r = rollup_of(topics, "topic")
    assert dict(zip(r.keys, r.sum_known(A(*values)).tolist())) == sums


@pytest.mark.parametrize(
    "topics,seconds,largest",
    [
        (["a", "a", "b"], [1.5, 0.5, NAN], {"a": 1.5, "b": None}),
        (["a", "b", "a"], [NAN, 2.0, 3.0], {"a": 3.0, "b": 2.0}),
    ],
)
def test_seconds_are_the_largest_known(topics, seconds, largest):
    r = rollup_of(topics, "topic")
    got = {k: (None if math.isnan(x) else x) for k, x in zip(r.keys, r.max_known(np.array(seconds)).tolist())}
    assert got == largest


@pytest.mark.parametrize(
    "codes,worst",
    [
        ([P.OK, P.OK], P.OK),
        ([P.OK, P.WARN], P.WARN),
        ([P.UNKNOWN, P.WARN], P.UNKNOWN),
        ([P.UNKNOWN, P.STOP], P.STOP),  # a known error is not hidden behind an unknown partition
        ([P.REWIND, P.STALL, P.STOP], P.REWIND),
        ([P.LOST, P.UNKNOWN], P.LOST),
    ],
)
def test_status_is_the_worst_partition(codes, worst):
    r = rollup_of(["t"] * len(codes), "flow")
    assert r.worst_status(np.array(codes, np.int8)).tolist() == [worst]
    assert list(PARTITION_SEVERITY)[-1] == P.LOST and set(PARTITION_SEVERITY) == set(P)


def test_partition_level_folds_nothing():
    assert rollup_of(["a", "b"], "partition") is None


def _samples(level: str, *views) -> dict:
    text = MetricsCache(lambda: snapshot(*views), series=level).render().decode()
    out: dict = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


TWO_TOPICS = dict(
    topics=["orders", "orders", "pay"],
    partitions=[0, 1, 0],
    committed_lag=A(10, 10, 4),
    read_lag=A(2, 0, -1),
    true_lag=A(5, 5, 1),
    time_lag_s=np.array([1.5, NAN, 9.0]),
    records_lost=A(0, 3, -1),
    statuses=(P.OK, P.WARN, P.STOP),
    topic_catch_up_s={"orders": 12.0, "pay": 30.0},
)
PER_PARTITION = ["mirrorwatch_lag_records", "mirrorwatch_rpo_seconds", "mirrorwatch_time_lag_seconds",
                 "mirrorwatch_records_lost", "mirrorwatch_partition_status"]  # fmt: skip
LABELS = {
    "partition": {"flow", "source", "target", "group", "topic", "partition"},
    "topic": {"flow", "source", "target", "group", "topic"},
    "flow": {"flow", "source", "target", "group"},
}


@pytest.mark.parametrize("level", SERIES_LEVELS)
def test_each_level_keeps_the_names_and_its_labels(level):
    m = _samples(level, mirror_view(**TWO_TOPICS), unknown_view())
    for name in PER_PARTITION:
        assert m[name], name
        for labels, _ in m[name]:
            assert set(labels) - {"kind"} == LABELS[level], (name, labels)
    catch_up = {tuple(sorted(l.items())) for l, _ in m["mirrorwatch_catch_up_seconds"]}
    assert {k for key in catch_up for k, _ in key} == LABELS[level] - {"partition"}
    # the families that never were per partition do not change
    assert [v for _, v in m["mirrorwatch_flow_rpo_seconds"]] == [9.0]
    assert {l["group"]: v for l, v in m["mirrorwatch_group_status"]} == {"mirrorwatch-east-west": 0, "billing": 7}


def test_topic_level_values():
    m = _samples("topic", mirror_view(**TWO_TOPICS), unknown_view())
    lags = {(l["topic"], l["kind"]): v for l, v in m["mirrorwatch_lag_records"] if l["group"] != "billing"}
    assert lags == {("orders", "committed"): 20, ("orders", "read"): 2, ("orders", "true"): 10,
                    ("pay", "committed"): 4, ("pay", "true"): 1}  # fmt: skip
    assert {l["topic"]: v for l, v in m["mirrorwatch_rpo_seconds"]} == {"orders": 1.5, "pay": 9.0}
    assert {l["topic"]: v for l, v in m["mirrorwatch_records_lost"]} == {"orders": 3}
    status = {(l["group"], l["topic"]): v for l, v in m["mirrorwatch_partition_status"]}
    assert status == {("mirrorwatch-east-west", "orders"): P.WARN, ("mirrorwatch-east-west", "pay"): P.STOP,
                      ("billing", "t"): P.UNKNOWN}  # fmt: skip


def test_flow_level_is_the_flows_own_figures():
    view = mirror_view(**TWO_TOPICS)
    m = _samples("flow", view)
    f = view.figures
    lags = {l["kind"]: v for l, v in m["mirrorwatch_lag_records"]}
    assert lags == {"committed": f.committed_lag, "read": f.read_lag, "true": f.true_lag} == {
        "committed": 24, "read": 2, "true": 11}  # fmt: skip
    assert [v for _, v in m["mirrorwatch_rpo_seconds"]] == [f.rpo_seconds] == [9.0]
    assert [v for _, v in m["mirrorwatch_records_lost"]] == [f.records_lost] == [3]
    assert [v for _, v in m["mirrorwatch_partition_status"]] == [P.STOP]
    assert [v for _, v in m["mirrorwatch_catch_up_seconds"]] == [slowest_catch_up(view.topic_catch_up_s)] == [30.0]


def test_series_is_a_monitor_setting_and_refuses_other_levels():
    cfg = {"clusters": {"east": {"bootstrap.servers": "x:1"}}}
    assert config_from_dict(cfg).monitor.series == "partition"
    assert config_from_dict({**cfg, "monitor": {"series": "flow"}}).monitor.series == "flow"
    with pytest.raises(Exception, match="monitor.series"):
        config_from_dict({**cfg, "monitor": {"series": "cluster"}})
