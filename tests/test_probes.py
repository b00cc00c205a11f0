"""core/probes.py: liveness and readiness, table-driven on the pure verdicts and on the state with an injected
clock; and the probe routes of core/httpserver.py (no sockets)."""

from __future__ import annotations

import json

import pytest

from mirrorwatch.core.httpserver import metrics_route, probe_response
from mirrorwatch.core.probes import (
    LIVENESS_FLOOR_S,
    Check,
    ProbeState,
    Verdict,
    judge_liveness,
    judge_readiness,
    stale_after_s,
)


@pytest.mark.parametrize(
    "interval_s,expected",
    [(1.0, LIVENESS_FLOOR_S), (5.0, LIVENESS_FLOOR_S), (10.0, 30.0), (60.0, 180.0), (0.1, LIVENESS_FLOOR_S)],
)
def test_stale_after_is_three_intervals_with_a_floor(interval_s, expected):
    assert stale_after_s(interval_s) == expected


@pytest.mark.parametrize(
    "loops,now,ok,failing",
    [
        ({}, 100.0, True, []),  # nothing watched yet: alive
        ({"sampling": (90.0, 30.0)}, 100.0, True, []),
        ({"sampling": (70.0, 30.0)}, 100.0, True, []),  # exactly at the bound: still alive
        ({"sampling": (69.0, 30.0)}, 100.0, False, ["loop sampling"]),
        ({"probe a": (99.0, 180.0), "reader a": (50.0, 30.0)}, 100.0, False, ["loop reader a"]),
        ({"probe a": (101.0, 30.0)}, 100.0, True, []),  # a tick stamped just after the look
    ],
)
def test_liveness(loops, now, ok, failing):
    v = judge_liveness(loops, now)
    assert v.ok is ok
    assert [name for name, c in v.checks.items() if not c.ok] == failing
    assert all(("wedged" in c.detail) is (not c.ok) for c in v.checks.values())


ALIVE = Verdict({"loop x": Check(True, "ticked 0.1 s ago")})
WEDGED = Verdict({"loop x": Check(False, "wedged")})


@pytest.mark.parametrize(
    "config,clusters,cycles,alive,ok,failing",
    [
        (True, {"east": (True, True), "west": (True, True)}, {"first cycle": True}, ALIVE, True, []),
        (False, {"east": (True, True)}, {"first cycle": True}, ALIVE, False, ["config"]),
        (True, {"east": (True, True), "west": (False, False)}, {"first cycle": True}, ALIVE, False, ["cluster west"]),
        (True, {"east": (True, True)}, {"first cycle": False}, ALIVE, False, ["first cycle"]),
        # answered once, unreachable now: still ready (the metrics say why)
        (True, {"east": (True, False), "west": (True, False)}, {"first cycle": True}, ALIVE, True, []),
        (True, {"east": (True, True)}, {"first cycle": True}, WEDGED, False, ["loop x"]),
        (
            True,
            {"east": (True, True)},
            {"first probe a": True, "first probe b": False},
            ALIVE,
            False,
            ["first probe b"],
        ),
    ],
)
def test_readiness(config, clusters, cycles, alive, ok, failing):
    v = judge_readiness(config, clusters, cycles, alive)
    assert v.ok is ok
    assert [name for name, c in v.checks.items() if not c.ok] == failing


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_state_ready_after_first_cycle_stays_ready_through_an_outage_until_wedged():
    clock = Clock()
    state = ProbeState(["east", "west"], clock=clock)
    steps = [
        # (action, ready, alive)
        (lambda: None, False, True),
        (state.config_loaded, False, True),
        (lambda: state.watch("loop", 30.0), False, True),
        (lambda: state.answered("east"), False, True),
        (lambda: state.answered("west", False), False, True),  # a failed answer is not an answer
        (lambda: state.answered("west"), False, True),
        (lambda: state.answered("north"), False, True),  # not a cluster of this service: ignored
        (state.cycle_done, True, True),
        (lambda: (state.answered("west", False), state.answered("east", False)), True, True),  # outage: ready
        (lambda: setattr(clock, "now", clock.now + 29), True, True),
        (lambda: state.tick("loop"), True, True),
        (lambda: setattr(clock, "now", clock.now + 31), False, False),  # wedged: neither
        (lambda: state.tick("loop"), True, True),  # it came back
        (lambda: state.unwatch("loop"), True, True),
        (lambda: setattr(clock, "now", clock.now + 3600), True, True),  # an unwatched loop is not judged
    ]
    for i, (action, ready, alive) in enumerate(steps):
        action()
        assert (state.readiness().ok, state.liveness().ok) == (ready, alive), f"step {i}"
    assert "not answering now" in state.readiness().checks["cluster west"].detail


def test_probe_routes_answer_200_or_503_with_the_agreed_body():
    clock = Clock()
    state = ProbeState(["east"], clock=clock)
    state.config_loaded()
    state.watch("loop", 30.0)
    route = metrics_route(lambda: b"# metrics\n", state)
    status, ctype, body = route("/readyz")
    assert (status, ctype) == (503, "application/json")
    parsed = json.loads(body)
    assert parsed["status"] == "failing"
    assert parsed["checks"]["cluster east"] == {"ok": False, "detail": "has not answered yet"}
    state.answered("east")
    state.cycle_done()
    assert route("/readyz?verbose=1")[0] == 200 and route("/healthz")[0] == 200
    assert json.loads(route("/healthz")[2]) == {
        "status": "ok",
        "checks": {"loop loop": {"ok": True, "detail": "ticked 0.0 s ago"}},
    }
    clock.now += 31
    assert route("/healthz")[0] == 503 and route("/readyz")[0] == 503
    assert route("/metrics")[:2] == (200, "text/plain; version=0.0.4; charset=utf-8")
    assert route("/nope")[0] == 404
    assert probe_response("/v1/flows", state) is None
