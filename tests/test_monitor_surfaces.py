"""Exporter, status API, history and webhooks over synthetic snapshots (no Kafka needed)."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.webhooks import WebhookReceiver
from mirrorwatch.core.records import lag_sample_arrow_schema
from mirrorwatch.core.status import GroupStatus, PartitionStatus
from mirrorwatch.monitor.api import make_router
from mirrorwatch.monitor.exporter import MetricsCache
from mirrorwatch.monitor.history import HistoryWriter, history_files, read_history, snapshot_table
from mirrorwatch.monitor.webhooks import Notifier

from .support.monitor_views import mirror_view, snapshot, unknown_view

# -------------------------------------------------------------------------- exporter


def _metrics(snap) -> dict:
    text = MetricsCache(lambda: snap).render().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_exporter_names_labels_and_values():
    m = _metrics(snapshot(mirror_view(), unknown_view()))
    lags = {(l["kind"], l["partition"]): v for l, v in m["mirrorwatch_lag_records"]}
    assert lags == {
        ("committed", "0"): 10,
        ("read", "0"): 2,
        ("true", "0"): 5,
        ("committed", "1"): 10,
        ("read", "1"): 0,
        ("true", "1"): 5,
    }
    labels = m["mirrorwatch_lag_records"][0][0]
    assert set(labels) == {"flow", "source", "target", "group", "topic", "partition", "kind"}
    assert [v for _, v in m["mirrorwatch_time_lag_seconds"]] == [1.5]  # unknown time lag is left out
    assert m["mirrorwatch_catch_up_seconds"][0][1] == math.inf
    statuses = {(l["group"], l["partition"]): v for l, v in m["mirrorwatch_partition_status"]}
    assert statuses == {("mirrorwatch-east-west", "0"): 0, ("mirrorwatch-east-west", "1"): 1, ("billing", "0"): 5}
    groups = {l["group"]: v for l, v in m["mirrorwatch_group_status"]}
    assert groups == {"mirrorwatch-east-west": GroupStatus.OK, "billing": GroupStatus.UNKNOWN}
    assert {l["cluster"]: v for l, v in m["mirrorwatch_cluster_up"]} == {"east": 1, "west": 1, "far": 0}
    assert m["mirrorwatch_window_complete_ratio"] == [
        ({"flow": "ew", "source": "east", "target": "west", "group": "mirrorwatch-east-west"}, 0.5)
    ]
    assert "mirrorwatch_sample_age_seconds" in m


# ------------------------------------------------------------------------------- API


@pytest.fixture
def route():
    snap = snapshot(
        mirror_view(status=GroupStatus.ERR, statuses=(PartitionStatus.STOP, PartitionStatus.OK)), unknown_view()
    )
    r = make_router(lambda: snap, ["east", "west", "far"])

    def get(path):
        status, ctype, body = r(path)
        assert ctype == "application/json"
        return status, json.loads(body)

    return get


def test_api_clusters_groups_status_and_lag(route):
    assert route("/v3/kafka") == (200, route("/v3/kafka")[1])
    assert route("/v3/kafka")[1]["clusters"] == ["east", "far", "west"]
    assert route("/v3/kafka/east/consumer")[1]["consumers"] == ["mirrorwatch-east-west"]
    code, body = route("/v3/kafka/east/consumer/mirrorwatch-east-west/status")
    status = body["status"]
    assert code == 200 and status["status"] == "ERR" and status["partition_count"] == 2
    assert [p["status"] for p in status["partitions"]] == ["STOP"]  # /status lists the partitions not OK
    assert status["maxlag"]["partition"] == 0 and status["totallag"] == 20
    assert status["partitions"][0]["end"] == {"offset": 90, "timestamp": 1_700_000_000_000, "lag": 10}
    lag = route("/v3/kafka/east/consumer/mirrorwatch-east-west/lag")[1]["status"]
    assert len(lag["partitions"]) == 2  # /lag lists them all


def test_api_flows_have_three_lags_time_lag_status_and_forecast(route):
    code, body = route("/v1/flows/ew")
    part = body["flow"]["partitions"][0]
    assert code == 200
    assert (part["committed_lag"], part["read_lag"], part["true_lag"]) == (10, 2, 5)
    assert part["time_lag_s"] == 1.5 and part["status"] == "STOP" and part["forecast"] == "~10.0s"
    assert body["flow"]["partitions"][1]["forecast"] == "not catching up"
    assert body["flow"]["totals"]["true_lag"] == 10
    assert route("/v1/flows")[1]["flows"][0]["flow"] == "ew"


def test_api_unknown_cluster_is_reported_with_reason(route):
    status = route("/v3/kafka/far/consumer/billing/status")[1]["status"]
    assert status["status"] == "UNKNOWN" and "cannot list topics" in status["reason"]
    assert status["partitions"][0]["status"] == "UNKNOWN"


@pytest.mark.parametrize(
    "path,word",
    [
        ("/v3/kafka/nope", "cluster 'nope'"),
        ("/v3/kafka/nope/consumer", "cluster 'nope'"),
        ("/v3/kafka/east/consumer/ghost/status", "group 'ghost'"),
        ("/v3/kafka/east/consumer/ghost/lag", "'ghost'"),
        ("/v1/flows/nope", "flow 'nope'"),
        ("/v3/kafka/east/topic", "no such path"),
        ("/nothing", "no such path"),
        ("/v3/kafka/east/consumer/mirrorwatch-east-west/bogus", "no such path"),
    ],
)
def test_api_unknown_names_are_404_json(route, path, word):
    code, body = route(path)
    assert code == 404 and body["error"] is True and word in body["message"]


# --------------------------------------------------------------------------- history


class FakeClock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def test_history_rows_roll_and_read_back(tmp_path):
    clock = FakeClock(1_700_000_000.0)
    writer = HistoryWriter(tmp_path, roll_s=60, clock=clock)
    for _ in range(3):
        writer.append(snapshot_table(snapshot(mirror_view(ts=int(clock.t * 1000)), unknown_view())))
        clock.t += 25  # the third append is 50 s in: same file; the next one rolls
    assert history_files(tmp_path) == []  # still in progress: hidden from readers
    clock.t += 20
    writer.append(snapshot_table(snapshot(mirror_view(ts=int(clock.t * 1000)))))
    writer.close()
    files = history_files(tmp_path)
    assert len(files) == 2 and all("/lag/date=2023-11-14/" in f for f in files)
    table = read_history(tmp_path)
    assert table.schema == lag_sample_arrow_schema()
    assert table.num_rows == 8  # 2 partitions × 4 samples; the UNKNOWN view adds no rows
    row = table.slice(0, 1).to_pylist()[0]
    assert (row["committed_lag"], row["read_lag"], row["true_lag"], row["status"]) == (10, 2, 5, "OK")
    assert row["time_lag_s"] == 1.5 and table.column("time_lag_s")[1].as_py() is None
    assert pq.read_table(files[0]).num_rows == 6  # readable by plain pyarrow too


def test_history_marks_each_flows_mirror_and_reads_files_from_before_the_column(tmp_path):
    writer = HistoryWriter(tmp_path)
    writer.append(snapshot_table(snapshot(mirror_view(), mirror_view(flow="mm", engine="mm2"))))
    writer.close()
    old = pa.schema([f for f in lag_sample_arrow_schema() if f.name != "mirror"])  # the schema before it
    older = Path(history_files(tmp_path)[0]).with_name("part-0-older.parquet")
    pq.write_table(read_history(tmp_path).select(old.names).slice(0, 1), older)
    table = read_history(tmp_path)
    assert table.schema == lag_sample_arrow_schema()
    by_flow = {(r["flow"], r["mirror"]) for r in table.to_pylist()}
    assert by_flow == {("ew", None), ("ew", "mirrorwatch"), ("mm", "mm2")}  # None: the older file's row


def test_history_rolls_on_date_change_even_within_the_interval(tmp_path):
    clock = FakeClock(1_700_006_390.0)  # 2023-11-14 23:59:50 UTC
    writer = HistoryWriter(tmp_path, roll_s=3600, clock=clock)
    writer.append(snapshot_table(snapshot(mirror_view())))
    clock.t += 20
    writer.append(snapshot_table(snapshot(mirror_view())))
    writer.close()
    assert [f.split("/")[-2] for f in history_files(tmp_path)] == ["date=2023-11-14", "date=2023-11-15"]


def test_history_reader_skips_corrupt_file_naming_it(tmp_path, caplog):
    writer = HistoryWriter(tmp_path)
    writer.append(snapshot_table(snapshot(mirror_view())))
    writer.close()
    good = history_files(tmp_path)[0]
    bad = good.replace("part-", "part-zz-truncated-")
    with open(good, "rb") as f:
        data = f.read()
    with open(bad, "wb") as f:
        f.write(data[: len(data) // 2])
    with caplog.at_level(logging.WARNING, logger="mirrorwatch.monitor.history"):
        table = read_history(tmp_path)
    assert table.num_rows == 2
    assert any(bad in r.getMessage() for r in caplog.records)


# -------------------------------------------------------------------------- webhooks


def test_webhook_one_post_per_change_with_retries():
    receiver = WebhookReceiver(fail_first=1, path="/hook/secret-token")
    notifier = Notifier([receiver.url], timeout_s=2, retries=2, backoff_s=0.01)
    try:
        for status in (
            GroupStatus.OK,
            GroupStatus.OK,
            GroupStatus.ERR,
            GroupStatus.ERR,
            GroupStatus.ERR,
            GroupStatus.OK,
            GroupStatus.NOTFOUND,
        ):
            notifier.observe(snapshot(mirror_view(status=status)))
        notifier.drain()
        deadline = __import__("time").monotonic() + 10
        while len(receiver.bodies) < 3 and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.05)
        assert [(b["previous_status"], b["status"]) for b in receiver.bodies] == [
            ("OK", "ERR"),
            ("ERR", "OK"),
            ("OK", "NOTFOUND"),
        ]
        assert receiver.calls == 4  # the first POST failed (503) and was retried
        assert receiver.bodies[0]["group"] == "mirrorwatch-east-west" and receiver.bodies[0]["flow"] == "ew"
    finally:
        notifier.close()
        receiver.close()


def test_failing_webhook_never_blocks_or_raises(caplog):
    notifier = Notifier(["http://127.0.0.1:9/hook/secret-token"], timeout_s=0.5, retries=1, backoff_s=0.01)
    try:
        with caplog.at_level(logging.WARNING, logger="mirrorwatch.monitor.webhooks"):
            events = notifier.observe(snapshot(mirror_view(status=GroupStatus.ERR)))  # returns at once
            assert len(events) == 1
            notifier.drain()
            deadline = __import__("time").monotonic() + 10
            while notifier.failed < 1 and __import__("time").monotonic() < deadline:
                __import__("time").sleep(0.05)
        assert notifier.failed == 1
        assert not any("secret-token" in r.getMessage() for r in caplog.records)  # URL paths stay out of logs
    finally:
        notifier.close()


def test_text_renderer_escapes_labels_and_reuses_its_label_strings():
    from mirrorwatch.monitor.exporter import _FAMILIES, TextRenderer

    odd = mirror_view(group='we"ird\\group')
    snap = snapshot(mirror_view(), odd, unknown_view())
    clock = lambda: 1_700_000_100.0  # noqa: E731

    def parse(text):
        return sorted(
            (s.name, tuple(sorted(s.labels.items())), s.value)
            for f in text_string_to_metric_families(text)
            for s in f.samples
        )

    renderer = TextRenderer(clock)
    fast = renderer.render(snap).decode()
    samples = parse(fast)
    # the escaped label value comes back whole through prometheus-client's own parser
    assert {dict(l)["group"] for n, l, _ in samples if n == "mirrorwatch_group_status"} == {
        "mirrorwatch-east-west",
        'we"ird\\group',
        "billing",
    }
    # every family is typed and described once, whether it has samples or not
    for name in _FAMILIES:
        assert fast.count(f"# HELP {name} ") == 1 and fast.count(f"# TYPE {name} ") == 1, name
    assert parse(renderer.render(snap).decode()) == samples  # cached label strings reused
    assert parse(TextRenderer(clock).render(snap).decode()) == samples


@pytest.mark.skipif(__import__("shutil").which("promtool") is None, reason="promtool not installed")
def test_exposition_passes_promtool_check_metrics():
    import subprocess

    text = MetricsCache(lambda: snapshot(mirror_view(), unknown_view())).render()
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
