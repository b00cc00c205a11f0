"""Item 8 of issue 37: the MM2 connectors' names derived from the source connector's prefix, a connector missing
from Connect is not the REST API down, and the monitor's HTTP API answers an unsupported method with JSON 405.
Pure logic on plain values, and a real HTTP server on a free port."""

from __future__ import annotations

import dataclasses

import pytest
import requests

from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.connect_rest import ConnectorState, ConnectStates, connector_problems, source_mirroring, unknown
from mirrorwatch.core.httpserver import Server
from mirrorwatch.monitor.api import make_router
from mirrorwatch.monitor.model import Snapshot


def mm2_flow(**mirror) -> dict:
    return {
        "clusters": {"src": {"bootstrap.servers": "127.0.0.1:9"}, "dst": {"bootstrap.servers": "127.0.0.1:9"}},
        "flows": {"f": {"source": "src", "target": "dst", "mirror": {"kind": "mm2", **mirror}}},
    }


@pytest.mark.parametrize(
    "mirror, checkpoint, heartbeat",
    [
        ({}, "MirrorCheckpointConnector", "MirrorHeartbeatConnector"),  # dedicated mode: the class names
        (
            {"connector": "src->dst.MirrorSourceConnector"},
            "src->dst.MirrorCheckpointConnector",
            "src->dst.MirrorHeartbeatConnector",
        ),
        ({"connector": "my-mm2"}, "MirrorCheckpointConnector", "MirrorHeartbeatConnector"),  # no prefix to take
        (
            {"connector": "a.MirrorSourceConnector", "checkpoint_connector": "cp"},
            "cp",
            "a.MirrorHeartbeatConnector",
        ),  # a name given is kept
    ],
)
def test_checkpoint_and_heartbeat_connectors_follow_the_source_connectors_prefix(mirror, checkpoint, heartbeat):
    m = config_from_dict(mm2_flow(**mirror)).flows["f"].mirror
    assert (m.checkpoint_connector, m.heartbeat_connector) == (checkpoint, heartbeat)


def running(name: str, role: str) -> ConnectorState:
    return ConnectorState(name=name, role=role, state="RUNNING")


def missing(name: str, role: str) -> ConnectorState:
    state = unknown(name, role, f"HTTP 404: no connector named '{name}' on this Connect cluster")
    return dataclasses.replace(state, missing=True)


def test_a_missing_connector_is_its_own_problem_not_the_rest_api_down():
    one_missing = ConnectStates(1, (running("s", "source"), missing("c", "checkpoint"), running("h", "heartbeat")))
    assert one_missing.up
    assert connector_problems(one_missing.connectors) == [
        "checkpoint connector c: state unknown (HTTP 404: no connector named 'c' on this Connect cluster)"
    ]
    no_answer = ConnectStates(1, (running("s", "source"), unknown("c", "checkpoint", "cannot connect to http://x")))
    assert not no_answer.up
    assert (
        source_mirroring((missing("s", "source"),)) is False
    )  # a source connector Connect does not have mirrors nothing


def test_the_api_answers_other_methods_with_json_405():
    route = make_router(lambda: Snapshot(0, [], {}), ["east"])
    server = Server("127.0.0.1", 0, route, "test").start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            answer = requests.request(method, f"{base}/v1/flows", data=b'{"x": 1}', timeout=10)
            assert answer.status_code == 405 and answer.headers["Allow"] == "GET", (method, answer.text)
            assert answer.json() == {
                "error": True,
                "message": f"method {method} not allowed: this API answers GET only",
            }
        assert requests.get(f"{base}/v3/kafka", timeout=10).json()["clusters"] == ["east"]  # and GET still works
    finally:
        server.close()
