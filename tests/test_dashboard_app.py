"""The status page's logic in Streamlit's AppTest, against a stub monitor API and canary endpoint that serve
answers recorded from the real services (tests/fixtures/dashboard/, recorded by test_dashboard_live.py):
``/v1/flows``, ``/v1/flows/<flow>/recent``, ``/v1/analytics`` and the canary's ``/metrics``."""

from __future__ import annotations

import json

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from harness.dashboard_stub import FIXTURES, StubServer, analytics_status, big_flow, recorded_flows
from mirrorwatch.dashboards.settings import CONFIG_ENV

from .support.status_page import PAGE, texts

SECRET = "hunter2-very-secret"


@pytest.fixture
def stub():
    server = StubServer()
    yield server
    server.close()


def closed_port_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # nothing listens once the socket is closed


@pytest.fixture
def page(tmp_path, monkeypatch):
    """Start the page with a config pointing at the given addresses; returns the AppTest after its first run."""

    def start(monitor_url: str, canary_url: str | None, analytics_dir: str | None = None, **dashboard) -> AppTest:
        config = {
            "clusters": {
                "east": {"bootstrap.servers": "127.0.0.1:1", "sasl.username": "mirror", "sasl.password": SECRET},
                "west": {"bootstrap.servers": "127.0.0.1:2"},
            },
            "flows": {"east-west": {"source": "east", "target": "west"}},
            "canary": {"heartbeat_max_age_s": 6},
            "monitor": {"interval_s": 1},
            "dashboard": {
                "monitor_url": monitor_url,
                "canary_url": canary_url or "",
                "refresh_s": 5,
                "analytics_dir": analytics_dir or str(tmp_path / "no-analytics"),
                **dashboard,
            },
        }
        path = tmp_path / "mirrorwatch.yaml"
        path.write_text(yaml.safe_dump(config))
        monkeypatch.setenv(CONFIG_ENV, str(path))
        return AppTest.from_file(str(PAGE), default_timeout=30).run()

    return start


def show(at: AppTest, view: str) -> AppTest:
    return at.sidebar.radio(key="view").set_value(view).run()


def assert_no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


# ------------------------------------------------------------------ live views


def test_healthy_overview_is_green(stub, page):
    stub.serve("healthy")
    at = page(stub.url, f"{stub.url}/metrics")
    assert_no_exception(at)
    text = texts(at)
    assert "Status: OK" in text and "east-west" in text and "east → west" in text
    assert "Evaluator=OK" in text and "Canary=OK" in text and "True lag=0" in text
    assert not at.error and not at.warning


def test_degraded_says_why_in_words(stub, page):
    stub.serve("degraded")
    at = page(stub.url, f"{stub.url}/metrics")
    assert_no_exception(at)
    text = texts(at)
    assert "Status: DOWN" in text and "Status: OK" not in text
    # recorded with the mirror frozen: its partitions STOP, or STALL when its last commits repeated the offset
    assert (
        "evaluator ERR: 3 partitions STOP (the mirror stopped committing while new records arrived)" in text
        or "evaluator ERR: 3 partitions STALL (the mirror commits but its offset does not move)" in text
    ), text
    assert "canary CRITICAL" in text and "Evaluator=ERR" in text and "True lag=90" in text


def test_monitor_unreachable_is_a_banner_naming_the_address(page):
    address = closed_port_url()
    at = page(address, None)
    assert_no_exception(at)
    (banner,) = at.error
    assert "Monitor unreachable" in banner.value and address in banner.value and "Traceback" not in texts(at)
    at = show(at, "Flow detail")
    assert_no_exception(at)
    assert address in at.error[0].value


def test_monitor_answering_garbage_is_a_banner_too(stub, page):
    stub.routes["/v1/flows"] = (502, "text/html", b"<html>bad gateway</html>")
    at = page(stub.url, None)
    assert_no_exception(at)
    assert "HTTP 502" in at.error[0].value and stub.url in at.error[0].value


def test_unexpected_answer_shapes_never_raise(stub, page):
    odd = {
        "error": False,
        "flows": [
            {"flow": "east-west", "status": "ERR", "partitions": "not a list", "totals": 5, "ts_ms": "yesterday"},
            "not a flow",
        ],
    }
    stub.routes["/v1/flows"] = (200, "application/json", json.dumps(odd).encode())
    stub.routes["/metrics"] = (200, "text/plain", b"this is { not prometheus text\n")
    at = page(stub.url, f"{stub.url}/metrics")
    assert_no_exception(at)
    assert "Status: DOWN" in texts(at) and "not Prometheus text" in texts(at)
    at = show(at, "Flow detail")
    assert_no_exception(at)


def test_canary_unreachable_degrades_with_a_warning(stub, page):
    stub.serve("healthy")
    missing = closed_port_url() + "/metrics"
    at = page(stub.url, missing)
    assert_no_exception(at)
    text = texts(at)
    assert "Status: DEGRADED" in text and f"canary metrics unavailable: cannot connect to {missing}" in text


def test_without_a_canary_the_verdict_is_the_evaluator_alone(stub, page):
    stub.serve("healthy")
    at = page(stub.url, None)
    assert "Status: OK" in texts(at) and not at.warning


def charts(at: AppTest) -> list:
    return at.get("vega_lite_chart")


def test_overview_card_rpo_canary_chart_and_status_changes(stub, page):
    stub.serve("degraded")
    at = page(stub.url, f"{stub.url}/metrics")
    assert_no_exception(at)
    text = texts(at)
    for label in (
        "RPO now=",
        "True lag=90",
        "Canary round trip=",
        "Heartbeat age=",
        "Evaluator=ERR",
        "Canary=CRITICAL",
    ):
        assert label in text, label
    assert len(charts(at)) == 1 and "Last 15 min: RPO" in text
    assert "→ ERR" in text  # the recorded run turned ERR when the mirror froze


def test_a_reload_keeps_the_charts(stub, page):
    """The charts come from the monitor's memory, not from this browser session: a new session draws them at once."""
    stub.serve("healthy")
    first = page(stub.url, f"{stub.url}/metrics")
    fresh = page(stub.url, f"{stub.url}/metrics")  # a new AppTest is a new session (a reload)
    assert_no_exception(fresh)
    assert len(charts(first)) == len(charts(fresh)) == 1 and "fills from the monitor" not in texts(fresh)


def test_flow_detail_key_columns_first_sorted_by_rpo_the_rest_behind_an_expander(stub, page):
    stub.serve("degraded")
    at = show(page(stub.url, f"{stub.url}/metrics"), "Flow detail")
    assert_no_exception(at)
    topics, partitions, everything = at.dataframe
    assert list(partitions.value.columns) == [
        "topic",
        "partition",
        "status",
        "time_lag_s",
        "true_lag",
        "committed_lag",
        "forecast",
    ]
    n = len(recorded_flows("degraded")["flows"][0]["partitions"])
    assert len(partitions.value) == len(everything.value) == n and len(topics.value) == 1
    rpo = list(partitions.value["time_lag_s"].dropna())
    assert rpo == sorted(rpo, reverse=True)
    assert {"acked_next", "read_position", "target_end", "read_lag"} <= set(everything.value.columns)
    at = at.selectbox(key="partition_sort").set_value("true lag — largest first").run()
    lags = list(at.dataframe[1].value["true_lag"].dropna())
    assert lags == sorted(lags, reverse=True)
    assert len(charts(at)) == 3  # lags, RPO, canary
    text = texts(at)
    assert (
        "Lost=" in text
        and "Overdue now=15" in text
        and "Duplicates=" in text
        and "Heartbeat age=" in text
        and "Collecting" not in text
    )


def test_a_thousand_partitions_stay_readable(stub, page):
    stub.serve("degraded")
    stub.routes["/v1/flows"] = (200, "application/json", lambda: json.dumps(big_flow(1000)).encode())
    at = page(stub.url, f"{stub.url}/metrics")
    assert_no_exception(at)
    assert "True lag=" in texts(at) and len(at.dataframe) == 0  # the overview lists no partitions at all
    at = show(at, "Flow detail")
    assert_no_exception(at)
    topics, partitions, _ = at.dataframe
    assert len(topics.value) == 20 and len(partitions.value) == 1000
    assert partitions.value["time_lag_s"].iloc[0] == 96.0  # the worst first
    assert "1,000 partitions" in texts(at)


def test_secrets_are_never_rendered(stub, page):
    stub.serve("degraded")
    at = page(stub.url, f"{stub.url}/metrics")
    for view in ("Overview", "Flow detail", "History"):
        at = show(at, view)
        assert SECRET not in texts(at) and "sasl" not in texts(at).lower()


def test_bad_config_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    path = tmp_path / "bad.yaml"
    path.write_text("clusters: {east: {bootstrap.servers: x}}\ndashboard: {port: 0}\n")
    monkeypatch.setenv(CONFIG_ENV, str(path))
    at = AppTest.from_file(str(PAGE), default_timeout=30).run()
    assert_no_exception(at)
    assert "dashboard.port" in at.error[0].value


# ------------------------------------------------------------------ history (analytics output)


def test_no_analytics_is_an_explained_empty_state(page):
    at = show(page(closed_port_url(), None), "History")
    assert_no_exception(at)
    (info,) = at.info
    assert "No analytics yet" in info.value and "monitor analyze" in info.value and "every_s" in info.value


def test_a_failed_scheduled_run_is_shown_with_its_reason(stub, page):
    stub.routes["/v1/analytics"] = (
        200,
        "application/json",
        analytics_status("failed", reason="monitor: no readable lag history files under /h/lag", failures=1),
    )
    at = show(page(stub.url, None, analytics_dir=str(FIXTURES / "analytics")), "History")
    assert_no_exception(at)
    (error,) = at.error
    assert "last scheduled analytics run failed" in error.value and "no readable lag history files" in error.value
    assert "Sampling is not affected" in error.value and len(charts(at)) == 4  # the last good results stay
    stub.routes["/v1/analytics"] = (
        200,
        "application/json",
        analytics_status("timeout", reason="still running after 900 s (monitor.analytics.timeout_s): killed"),
    )
    at.run()
    assert "timed out" in at.error[0].value and "timeout_s" in at.error[0].value


def test_scheduled_but_not_yet_run_says_so(stub, page):
    stub.routes["/v1/analytics"] = (200, "application/json", analytics_status("never", finished_ms=None))
    at = show(page(stub.url, None), "History")
    assert_no_exception(at)
    assert "first run has not happened yet" in texts(at) and "fills after its first run" in at.info[0].value


def test_analytics_present_compliance_incidents_and_trend(page):
    # a tiny `monitor generate-history --days 3 --interval 120 --topics orders,payments --partitions 2` +
    # `monitor analyze` output, recorded once (Spark is too slow to start for this test)
    at = show(page(closed_port_url(), None, analytics_dir=str(FIXTURES / "analytics")), "History")
    assert_no_exception(at)
    assert [s.value for s in at.subheader] == ["Incidents", "SLO compliance per topic", "Daily p99 trend"]
    assert len(charts(at)) == 4  # the chosen incident's timeline, compliance bars, two daily trends
    told, incidents, compliance = at.dataframe  # behind expanders
    assert sorted(compliance.value["topic"]) == ["orders", "payments"]
    assert compliance.value["compliance"].between(90, 100).all()  # shown in percent
    assert len(incidents.value) == 42 and "18 incidents (42 partition incidents, 0 open)" in texts(at)
    assert len(told.value) == 18 and at.selectbox(key="history_incident").value == 0  # the newest, told first
    story = at.markdown[[m.value.startswith("**Started**") for m in at.markdown].index(True)].value
    assert "**Started** 2026-01-07 21:12:00 UTC; **recovered 2026-01-07 21:22:00 UTC** after 10 min 00 s" in story
    assert "payments[0]" in story and "re-run the analysis" in story  # this fixture predates `statuses`
    assert not at.error and not at.warning


def test_analytics_tables_name_each_flows_mirror(page, tmp_path):
    """Analytics written since the history has its mirror column name what mirrors each flow; the fixture above,
    from before it, still shows (no mirror column)."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "analytics"
    shutil.copytree(FIXTURES / "analytics", folder)
    for name in ("slo_by_topic", "incidents"):
        for path in (folder / name).glob("*.parquet"):
            table = pq.read_table(path)
            table = table.append_column("mirror", pa.array(["mm2"] * table.num_rows))
            if name == "incidents":  # and the evaluator statuses each breach saw, as analytics write them now
                table = table.append_column("statuses", pa.array([["OK", "STOP", "WARN"]] * table.num_rows))
            pq.write_table(table, path)
    at = show(page(closed_port_url(), None, analytics_dir=str(folder)), "History")
    assert_no_exception(at)
    told, incidents, compliance = at.dataframe
    assert set(compliance.value["mirror"]) == {"MirrorMaker 2"}
    assert set(incidents.value["mirror"]) == {"MirrorMaker 2"} and set(told.value["mirror"]) == {"MirrorMaker 2"}
    assert any("**Evaluator statuses** during the breach: **STOP, WARN**." in m.value for m in at.markdown)
