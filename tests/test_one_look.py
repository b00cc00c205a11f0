"""`monitor lag`'s one-look status (monitor/one_look.py) and the reasons every non-OK status carries, on plain
values: the rule table, the threshold shared with the alert rules, and the reasons' words."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import yaml

from mirrorwatch.core.status import NOT_MOVING_AFTER_S, PartitionStatus
from mirrorwatch.grafana_build.promql import RULES
from mirrorwatch.monitor.model import GroupView
from mirrorwatch.monitor.one_look import judge_view
from mirrorwatch.monitor.webhooks import status_event

OK, STOP, UNKNOWN, LOST, REWIND, WARN = (
    PartitionStatus.OK,
    PartitionStatus.STOP,
    PartitionStatus.UNKNOWN,
    PartitionStatus.LOST,
    PartitionStatus.REWIND,
    PartitionStatus.WARN,
)


def view(acked: int, lag: int, rpo: float, evaluator: int = OK, heartbeat: float | None = None, kind="mirror"):
    """A one-partition view as the sampler builds it (the evaluator said ``evaluator``)."""
    return GroupView(
        kind=kind,
        flow="ew" if kind == "mirror" else "",
        cluster="east",
        target="west" if kind == "mirror" else "",
        group="g",
        ts_ms=0,
        group_status=0,
        topics=["t"],
        partitions=[0],
        committed=np.array([acked], np.int64),
        acked_next=np.array([acked], np.int64) if kind == "mirror" else None,
        true_lag=np.array([lag], np.int64) if kind == "mirror" else None,
        committed_lag=np.array([lag], np.int64),
        time_lag_s=np.array([rpo]) if kind == "mirror" else None,
        status=np.array([evaluator], np.int8),
        heartbeat_age_s=heartbeat,
        engine="mm2" if heartbeat is not None else "mirrorwatch",
    )


@pytest.mark.parametrize(
    "case, first_acked, last, expected",
    [
        ("caught up", 10, view(10, 0, 0.0), OK),
        ("caught up, not moving, the evaluator never said otherwise", 10, view(10, 0, 0.0), OK),
        ("lagging but moving", 10, view(50, 30, 2.0), OK),
        ("lagging, moving, RPO old: it is moving", 10, view(50, 30, 90.0), OK),
        ("lagging, not moving, RPO young: cannot tell", 10, view(10, 30, 2.0), UNKNOWN),
        ("lagging, not moving, RPO unknown: cannot tell", 10, view(10, 30, math.nan), UNKNOWN),
        ("lagging, not moving, RPO over the threshold", 10, view(10, 30, NOT_MOVING_AFTER_S + 1), STOP),
        ("the evaluator's OK is not taken on trust", 10, view(10, 30, 2.0, evaluator=OK), UNKNOWN),
        ("MM2: not moving, heartbeats old", 10, view(10, 30, 2.0, heartbeat=NOT_MOVING_AFTER_S + 5), STOP),
        ("MM2: moving, heartbeats old", 10, view(40, 30, 2.0, heartbeat=NOT_MOVING_AFTER_S + 5), OK),
        ("LOST stays", 10, view(50, 0, 0.0, evaluator=LOST), LOST),
        ("REWIND stays", 60, view(10, 30, 1.0, evaluator=REWIND), REWIND),
        ("the evaluator's STOP needs a window one look does not have", 10, view(10, 30, 2.0, evaluator=STOP), UNKNOWN),
        ("plain group: lagging and moving", 10, view(20, 5, 0.0, kind="group"), OK),
        ("plain group: lagging, not moving", 10, view(10, 5, 0.0, kind="group"), UNKNOWN),
    ],
)
def test_one_look_rule_table(case, first_acked, last, expected):
    first = view(first_acked, 0, 0.0, kind=last.kind)
    judged = judge_view(first, last, span_s=2.0, allowed_lag=0)
    assert int(judged.status[0]) == expected, case
    if expected != OK:  # every status but OK says why
        assert judged.reasons, case


def test_one_sample_never_judges_a_lagging_partition_ok():
    only = view(10, 30, 2.0)
    judged = judge_view(only, only, span_s=0.0, allowed_lag=0)
    assert judged.status_name == "UNKNOWN"
    assert any("one sample cannot show movement" in line for line in judged.reasons), judged.reasons


def test_a_view_the_sampler_could_not_read_is_left_as_it_is():
    unread = GroupView("mirror", "ew", "east", "west", "g", 0, 7, error="cannot reach source cluster 'east'")
    assert judge_view(None, unread, 2.0, 0) is unread
    assert unread.reasons == ["cannot reach source cluster 'east'"]


def test_every_non_ok_status_carries_its_reasons_on_the_api_webhooks_and_monitor_lag():
    """A view the evaluator rated ERR (the issue's frozen mirror: STOP on every partition) names the partitions and
    what STOP means, in the list the API, the webhook body and `monitor lag` print."""
    from mirrorwatch.monitor.api import flow_body, group_status_body

    stopped = GroupView(
        "mirror",
        "ew",
        "east",
        "west",
        "g",
        0,
        2,
        topics=["orders"] * 7,
        partitions=list(range(7)),
        status=np.full(7, STOP, np.int8),
    )
    (line,) = stopped.reasons
    assert line == (
        "7 partitions STOP (the mirror stopped committing while new records arrived): "
        "orders-0, orders-1, orders-2, orders-3, orders-4 and 2 more"
    )
    assert flow_body(stopped)["reasons"] == [line]
    assert group_status_body(stopped, all_partitions=False)["reasons"] == [line]
    assert status_event(stopped, 0)["reasons"] == [line]


def test_a_hanging_transaction_explains_its_warn_once():
    from mirrorwatch.monitor.transactions import OpenTransactions

    txns = OpenTransactions(
        np.array([5], np.int64), np.array([300.0]), np.array([True]), [], ["west.t[0]: transaction open 300 s"]
    )
    v = GroupView("mirror", "ew", "east", "west", "g", 0, 1, topics=["t"], partitions=[0], status=np.array([WARN]))
    v = dataclasses.replace(v, transactions=txns)
    assert v.reasons == ["west.t[0]: transaction open 300 s"]


def test_the_not_moving_threshold_is_the_alert_rules():
    rules = yaml.safe_load(RULES.read_text())
    (expr,) = [
        r["expr"]
        for g in rules["groups"]
        for r in g["rules"]
        if r.get("record") == "flow:mirrorwatch_flow_stalled:bool"
    ]
    thresholds = re.findall(r"(?:heartbeat_age_seconds\)|rpo_seconds:max) > (\d+(?:\.\d+)?)", expr)
    assert [float(t) for t in thresholds] == [NOT_MOVING_AFTER_S, NOT_MOVING_AFTER_S], expr
