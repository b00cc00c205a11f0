"""The Connect REST status parser, the problem lines and the exporter's series: pure, table-driven, on status
answers captured from the real Connect 4.3.1 worker of tests/test_mm2_connect_state.py
(tests/fixtures/connect_status.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mirrorwatch.core.config import ConnectRestSettings
from mirrorwatch.core.connect_rest import (
    STATES,
    ConnectorState,
    ConnectRestClient,
    ConnectStates,
    TaskState,
    connector_problems,
    first_line,
    http_reason,
    parse_status,
    root_cause,
    source_mirroring,
    unknown,
)
from mirrorwatch.core.redact import register_secret
from mirrorwatch.monitor.exporter import connect_series
from mirrorwatch.monitor.model import GroupView

CAPTURED = json.loads((Path(__file__).parent / "fixtures" / "connect_status.json").read_text())


@pytest.mark.parametrize(
    "case, connector_state, task_states, trace_start",
    [
        ("running", "RUNNING", ["RUNNING"], None),
        ("paused", "PAUSED", ["PAUSED"], None),
        ("task_failed", "RUNNING", ["FAILED"], "org.apache.kafka.connect.errors.ConnectException"),
        ("checkpoint_no_tasks", "RUNNING", [], None),
    ],
)
def test_parse_captured_status(case, connector_state, task_states, trace_start):
    body = CAPTURED[case]
    state = parse_status(body["name"], "source", body)
    assert state.state == connector_state and state.error is None
    assert [t.state for t in state.tasks] == task_states
    assert state.worker_id == body["connector"]["worker_id"]
    for task in state.tasks:
        if task.state == "FAILED":
            assert task.trace.startswith(trace_start) and "\n" not in task.trace
            assert task.cause.startswith("org.apache.kafka.common.errors.RecordTooLargeException: ")
        else:
            assert task.trace is None and task.cause is None


@pytest.mark.parametrize(
    "body, reason",
    [
        (None, "no 'connector' object"),
        ([], "no 'connector' object"),
        ({"name": "x"}, "no 'connector' object"),
        ({"name": "x", "connector": "RUNNING"}, "no 'connector' object"),
    ],
)
def test_parse_malformed_is_unknown_with_a_reason(body, reason):
    state = parse_status("x", "source", body)
    assert state.state == "UNKNOWN" and reason in state.error


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"connector": {"state": "SLEEPING"}, "tasks": []}, "UNKNOWN"),  # a state Connect 4.x does not have
        ({"connector": {"state": "STOPPED"}, "tasks": []}, "STOPPED"),
        ({"connector": {"state": "RESTARTING"}, "tasks": [{"id": "0", "state": "RUNNING"}]}, "RESTARTING"),
    ],
)
def test_parse_states(body, expected):
    state = parse_status("x", "source", body)
    assert state.state == expected and state.tasks == ()  # a task without an integer id is left out


@pytest.mark.parametrize(
    "trace, expected",
    [(None, None), ("", None), ("  \n", None), ("a.B: boom\n\tat x\n", "a.B: boom"), (3, None)],
)
def test_first_line(trace, expected):
    assert first_line(trace) == expected


@pytest.mark.parametrize(
    "trace, expected",
    [
        (None, None),
        ("a.B: boom\n\tat x", None),
        ("a.B: boom\n\tat x\nCaused by: c.D: one\n\tat y\nCaused by: e.F: root\n\t... 3 more", "e.F: root"),
    ],
)
def test_root_cause(trace, expected):
    assert root_cause(trace) == expected


SRC = "src->dst.MirrorSourceConnector"


def conn(state="RUNNING", tasks=("RUNNING",), role="source", trace=None, task_trace=None):
    return ConnectorState(
        SRC if role == "source" else f"src->dst.{role}",
        role,
        state,
        "w:8083",
        trace,
        tuple(TaskState(i, s, "w:8083", task_trace if s == "FAILED" else None) for i, s in enumerate(tasks)),
    )


@pytest.mark.parametrize(
    "connectors, lines, mirroring",
    [
        ([conn()], [], True),
        ([conn(tasks=())], [], True),
        ([conn("PAUSED", ("PAUSED",))], [f"source connector {SRC} PAUSED on w:8083", f"source connector {SRC} task 0 PAUSED on w:8083"], False),
        ([conn(tasks=("FAILED",), task_trace="E: big")], [f"source connector {SRC} task 0 FAILED on w:8083: E: big"], False),
        ([ConnectorState(SRC, "source", "RUNNING", None, None, (TaskState(0, "FAILED", None, "E: wrap", "R: root"),))], [f"source connector {SRC} task 0 FAILED: E: wrap (caused by R: root)"], False),
        ([conn(tasks=("FAILED", "RUNNING"), task_trace="E")], [f"source connector {SRC} task 0 FAILED on w:8083: E"], True),
        ([conn("FAILED", (), trace="E: conn")], [f"source connector {SRC} FAILED on w:8083: E: conn"], False),
        ([unknown(SRC, "source", "cannot connect to http://c:8083")], [f"source connector {SRC}: state unknown (cannot connect to http://c:8083)"], None),
        ([conn(role="checkpoint", state="PAUSED", tasks=())], ["checkpoint connector src->dst.checkpoint PAUSED on w:8083"], None),
        ([conn("UNASSIGNED", ())], [f"source connector {SRC} UNASSIGNED on w:8083"], False),
    ],
)  # fmt: skip
def test_problem_lines_and_whether_the_source_can_mirror(connectors, lines, mirroring):
    assert connector_problems(connectors) == lines
    assert source_mirroring(connectors) is mirroring


@pytest.mark.parametrize(
    "code, text, expected",
    [
        (401, "", "HTTP 401: the Connect REST API refused the credentials (mirror.connect.username/password)"),
        (403, "", "HTTP 403: the Connect REST API user may not read connector status"),
        (404, "Connector x not found", "HTTP 404: no connector named 'x' on this Connect cluster"),
        (500, "Request timed out\n  more", "HTTP 500: Request timed out more"),
        (502, "", "HTTP 502"),
    ],
)
def test_http_reasons(code, text, expected):
    assert http_reason(code, "x", text) == expected


def test_client_never_puts_credentials_in_the_url_and_redacts_reasons():
    register_secret("s3cr3t-pass")
    settings = ConnectRestSettings(url="http://127.0.0.1:1", username="u", password="s3cr3t-pass", timeout_s=1)
    client = ConnectRestClient(settings)
    assert client.session.auth == ("u", "s3cr3t-pass") and "s3cr3t" not in settings.url
    assert client._clean("refused for http://u:s3cr3t-pass@h") == "refused for http://u:***@h"
    state = client.status("a->b.MirrorSourceConnector", "source")  # nothing listens on port 1
    assert state.state == "UNKNOWN" and state.error == "cannot connect to http://127.0.0.1:1"


def view(connect):
    return GroupView("mirror", "ew", "east", "west", SRC, 0, 0, engine="mm2", connect=connect)


def test_exporter_series_one_per_state_and_up():
    series = connect_series(view(ConnectStates(1, (conn(tasks=("FAILED",), task_trace="E"),))))
    up = [s for s in series if s[0] == "mirrorwatch_mm2_connect_up"]
    assert up == [("mirrorwatch_mm2_connect_up", [("flow", "ew"), ("source", "east"), ("target", "west")], 1)]
    conn_states = {dict(labels)["state"]: v for name, labels, v in series if name == "mirrorwatch_mm2_connector_state"}
    task_states = {dict(labels)["state"]: v for name, labels, v in series if name == "mirrorwatch_mm2_task_state"}
    assert set(conn_states) == set(task_states) == set(STATES)
    assert [s for s, v in conn_states.items() if v] == ["RUNNING"] and [s for s, v in task_states.items() if v] == [
        "FAILED"
    ]
    down = connect_series(view(ConnectStates(1, (unknown(SRC, "source", "x"),))))
    assert down[0][2] == 0 and not [s for s in down if s[0] == "mirrorwatch_mm2_task_state"]
    assert connect_series(view(None)) == []


@pytest.mark.parametrize(
    "problems, light",
    [
        ([], "green"),
        ([f"source connector {SRC} PAUSED on w:8083"], "amber"),
        ([f"source connector {SRC}: state unknown (cannot connect to http://c:8083)"], "amber"),
        ([f"source connector {SRC} task 0 FAILED on w:8083: E: big (caused by R)"], "red"),
    ],
)
def test_page_verdict_from_the_monitors_connector_lines(problems, light):
    from mirrorwatch.dashboards.health import judge_flow

    flow = {"status": "OK", "connect": {"up": True, "connectors": [], "problems": problems}, "ts_ms": 1000}
    verdict = judge_flow(
        flow,
        None,
        canary_configured=False,
        canary_problem=None,
        heartbeat_max_age_s=60,
        monitor_interval_s=1,
        now_ms=1000,
    )
    assert verdict.light == light and verdict.reasons == problems
