"""The page's pure parts: settings derivation, the traffic light's rules, the canary parser, the frames drawn
from the monitor's recent figures and partitions, and the start command (argv and bad input). No Streamlit run, no network."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mirrorwatch.core.config_loading import config_from_dict, load_config
from mirrorwatch.dashboards.cli import streamlit_argv
from mirrorwatch.dashboards.frames import partition_frame, recent_frame, sorted_partitions, status_changes, topic_frame
from mirrorwatch.dashboards.health import AMBER, GREEN, GREY, RED, judge_flow
from mirrorwatch.dashboards.settings import page_settings
from mirrorwatch.dashboards.sources import CanaryReading, SourceError, fetch_flows, parse_canary_metrics, read_analytics

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dashboard"
BASE = {
    "clusters": {"east": {"bootstrap.servers": "a:1"}, "west": {"bootstrap.servers": "b:1"}},
    "flows": {"ew": {"source": "east", "target": "west"}},
}
NOW = 1_800_000_000_000


def settings(**sections):
    return page_settings(config_from_dict({**BASE, **sections}))


def test_addresses_default_to_the_monitor_and_canary_sections():
    s = settings(monitor={"host": "0.0.0.0", "http_port": 7001}, canary={"metrics_port": 7002})
    assert s.monitor_url == "http://127.0.0.1:7001" and s.canary_url == "http://127.0.0.1:7002/metrics"
    assert s.analytics_dir == ".cache/analytics" and [f.name for f in s.flows] == ["ew"]


def test_dashboard_section_overrides_and_empty_canary_url_means_none():
    s = settings(dashboard={"monitor_url": "http://mon:1/", "canary_url": "", "analytics_dir": "/a"})
    assert s.monitor_url == "http://mon:1" and s.canary_url is None and s.analytics_dir == "/a"
    assert settings(canary={"metrics_port": None}).canary_url is None


def test_dashboard_settings_take_environment_overrides(tmp_path):
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(BASE))
    config = load_config(path, environ={"MIRRORWATCH__DASHBOARD__PORT": "8600"})
    assert config.dashboard.port == 8600


def flow(status="OK", partitions=("OK",), **extra) -> dict:
    body = {
        "flow": "ew",
        "status": status,
        "ts_ms": NOW,
        "totals": {"true_lag": 0, "rpo_seconds": 0.0},
        "not_catching_up": [],
        "partitions": [{"status": s} for s in partitions],
    }
    body.update(extra)
    return body


HEALTHY_CANARY = CanaryReading(status="OK", heartbeat_age_s=1.0)


def judge(f, canary=HEALTHY_CANARY, configured=True, problem=None, now=NOW):
    return judge_flow(
        f,
        canary,
        canary_configured=configured,
        canary_problem=problem,
        heartbeat_max_age_s=60,
        monitor_interval_s=5,
        now_ms=now,
        warn_time_lag_s=5,
    )


def test_all_good_is_green_and_says_so():
    v = judge(flow())
    assert v.light == GREEN and v.word == "OK" and "evaluator OK" in v.why()


@pytest.mark.parametrize(
    "status, partitions, light, words",
    [
        ("WARN", ("WARN", "OK"), AMBER, "evaluator WARN: 1 partition WARN (lag is not going down)"),
        ("ERR", ("STOP", "STOP"), RED, "2 partitions STOP (the mirror stopped committing while new records arrived)"),
        ("ERR", ("STALL",), RED, "STALL (the mirror commits but its offset does not move)"),
        ("ERR", ("REWIND",), RED, "REWIND (the mirror's committed offset went backwards)"),
        ("NOTFOUND", (), AMBER, "has committed no offsets yet"),
    ],
)
def test_evaluator_statuses_in_words(status, partitions, light, words):
    v = judge(flow(status, partitions))
    assert v.light == light and words in v.why()


def test_a_hanging_transaction_is_said_as_such_not_as_lag():
    row = {"topic": "east.orders", "partition": 0, "open_s": 300.0, "last_stable_offset": 12, "target_end": 40}
    reason = "hanging transaction on target partition east.orders[0]: ... abort it: kafka-transactions.sh ..."
    v = judge(flow("WARN", ("WARN", "OK"), hanging_transactions=[row], reasons=[reason]))
    assert v.light == AMBER and "1 target partition with a hanging transaction" in v.why() and reason in v.why()
    assert "lag is not going down" not in v.why()


def test_unknown_carries_the_monitors_reason():
    v = judge(flow("UNKNOWN", ("UNKNOWN",), reason="cluster east unreachable: timed out"))
    assert v.light == GREY and "cluster east unreachable" in v.why()


def test_canary_and_heartbeat_rules():
    assert judge(flow(), CanaryReading(status="CRITICAL", heartbeat_age_s=1)).light == RED
    late = judge(flow(), CanaryReading(status="CRITICAL", heartbeat_age_s=1, overdue=6, oldest_overdue_s=41.6))
    assert late.light == RED and "6 probe event(s) overdue, still expected (oldest 42 s)" in late.why()
    assert judge(flow(), CanaryReading(status="WARNING", heartbeat_age_s=1)).light == AMBER
    stale = judge(flow(), CanaryReading(status="OK", heartbeat_age_s=75))
    assert stale.light == RED and "heartbeat 75 s old (limit 60 s)" in stale.why()
    assert "no mirrored heartbeat" in judge(flow(), CanaryReading(status="OK", heartbeat_age_s=None)).why()
    quiet = judge_flow(
        flow(),
        CanaryReading(status="OK", heartbeat_age_s=None),
        canary_configured=True,
        canary_problem=None,
        heartbeat_max_age_s=60,
        monitor_interval_s=5,
        now_ms=NOW,
        heartbeats_expected=False,
    )  # mirror.heartbeats: false
    assert quiet.light == GREEN
    assert "reports nothing for this flow" in judge(flow(), None).why()
    assert judge(flow(), None, configured=False).light == GREEN  # no canary configured: evaluator alone
    assert "canary metrics unavailable: boom" in judge(flow(), None, problem="boom").why()


def test_old_sample_and_slow_catch_up_are_amber_but_a_small_steady_lag_is_not():
    assert "last sample is 60 s old" in judge(flow(), now=NOW + 60_000).why()
    steady = flow(not_catching_up=["orders"], totals={"true_lag": 40, "rpo_seconds": 0.4})
    assert judge(steady).light == GREEN
    behind = flow(not_catching_up=["orders"], totals={"true_lag": 4000, "rpo_seconds": 42.0})
    assert (
        judge(behind).light == AMBER and "not catching up on orders (oldest record waiting 42 s)" in judge(behind).why()
    )


def test_canary_parser_reads_the_recorded_real_exposition():
    ((name, reading),) = parse_canary_metrics((FIXTURES / "canary_degraded.txt").read_text()).items()
    assert name == "east-west" and reading.status == "CRITICAL" and reading.overdue >= 1 and reading.lost == 0
    assert reading.oldest_overdue_s > 0 and reading.late == 0
    assert reading.round_trip_count > 0 and reading.mean_round_trip_s() > 0 and reading.heartbeat_age_s is not None
    healthy = parse_canary_metrics((FIXTURES / "canary_healthy.txt").read_text())["east-west"]
    assert healthy.status == "OK" and healthy.lost == healthy.overdue == healthy.oldest_overdue_s == 0


def test_canary_nan_heartbeat_is_none():
    text = 'mirrorwatch_canary_heartbeat_age_seconds{flow="f",source="a",target="b"} NaN\n'
    assert parse_canary_metrics(text)["f"].heartbeat_age_s is None


def test_recent_frame_keeps_the_last_minutes_in_time_order():
    points = [{"ts_ms": NOW - k * 60_000, "true_lag": k, "rpo_seconds": k / 10} for k in range(30)]
    frame = recent_frame(points, minutes=15)
    assert len(frame) == 16 and frame.index.is_monotonic_increasing  # 15 min back from the newest, both ends in
    assert list(frame["true_lag"])[-1] == 0 and frame["canary_round_trip_s"].isna().all()  # unknown stays unknown
    assert recent_frame([]).empty


def test_status_changes_newest_first_in_words():
    changes = [
        {"ts_ms": 1_767_571_200_000, "from": None, "to": "OK"},
        {"ts_ms": 1_767_571_260_000, "from": "OK", "to": "ERR", "reason": None},
        {"ts_ms": 1_767_571_320_000, "from": "ERR", "to": "UNKNOWN", "reason": "cluster east unreachable"},
    ]
    assert status_changes(changes) == [
        "00:02:00 ERR → UNKNOWN (cluster east unreachable)",
        "00:01:00 OK → ERR",
        "00:00:00 first seen OK",
    ]
    assert len(status_changes(changes, limit=2)) == 2


def test_partitions_and_topics_sort_worst_rpo_first():
    rows = [
        {"topic": "a", "partition": 0, "status": "OK", "time_lag_s": 0.0, "true_lag": 0, "committed_lag": 3},
        {"topic": "a", "partition": 1, "status": "STOP", "time_lag_s": 30.0, "true_lag": 50, "committed_lag": 60},
        {"topic": "b", "partition": 0, "status": "OK", "time_lag_s": None, "true_lag": None, "committed_lag": 1},
        {"topic": "b", "partition": 1, "status": "WARN", "time_lag_s": 90.0, "true_lag": 5, "committed_lag": 5},
    ]
    frame = partition_frame(rows)
    by_rpo = sorted_partitions(frame, "RPO (time lag) — worst first")
    assert list(zip(by_rpo["topic"], by_rpo["partition"])) == [("b", 1), ("a", 1), ("a", 0), ("b", 0)]  # unknown last
    by_status = sorted_partitions(frame, "status — worst first")
    assert list(by_status["status"])[:2] == ["STOP", "WARN"]
    topics = topic_frame(frame)
    assert list(topics["topic"]) == ["b", "a"] and list(topics["status"]) == ["WARN", "STOP"]
    assert list(topics["true_lag"]) == [5, 50] and list(topics["partitions"]) == [2, 2]


def test_unreachable_monitor_is_a_source_error_naming_the_url():
    with pytest.raises(SourceError, match=r"cannot connect to http://127\.0\.0\.1:9/v1/flows"):
        fetch_flows("http://127.0.0.1:9", 1)


def test_analytics_reader_empty_and_broken(tmp_path):
    assert read_analytics(str(tmp_path / "nothing")) is None
    (tmp_path / "summary.json").write_text("{}")
    (tmp_path / "incidents").mkdir()
    (tmp_path / "incidents" / "part-0.parquet").write_bytes(b"not parquet")
    result = read_analytics(str(tmp_path))
    assert any("incidents" in p and "unreadable" in p for p in result.problems)
    assert any("slo_by_topic: missing" in p for p in result.problems)


def test_streamlit_argv_is_headless_local_and_private():
    argv = streamlit_argv("/etc/mw.yaml", 8555, "127.0.0.1")
    joined = " ".join(argv)
    assert argv[1:4] == ["-m", "streamlit", "run"] and argv[4].endswith("mirrorwatch/dashboards/app.py")
    for flag in (
        "--server.headless true",
        "--server.address 127.0.0.1",
        "--server.port 8555",
        "--browser.gatherUsageStats false",
    ):
        assert flag in joined
    assert argv[-3:] == ["--", "--config", "/etc/mw.yaml"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--config", "/does/not/exist.yaml"], "cannot read config file"),
        ([], "Missing option '--config'"),
    ],
)
def test_dashboard_command_bad_input_is_one_line(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "mirrorwatch.dashboards.cli", *args], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
