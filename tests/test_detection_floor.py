"""bench/detection_floor.py: Alertmanager's route choice and the floor of a page's time to detect (pure)."""

from __future__ import annotations

import pytest

from bench.detection_floor import duration_s, floor_of, matches, route_for  # duration_s: the tests' own, shared

AM = {
    "route": {
        "receiver": "mirrorwatch-ticket",
        "group_wait": "30s",
        "routes": [
            {"matchers": ['severity="none"'], "receiver": "mirrorwatch-null"},
            {
                "matchers": ['severity="critical"'],
                "receiver": "mirrorwatch-page",
                "group_wait": "10s",
                "routes": [{"match_re": {"alertname": "Mirrorwatch(Cluster).*"}, "group_by": ["cluster"]}],
            },
        ],
    }
}
RULES = {
    "groups": [
        {
            "rules": [
                {"alert": "MirrorwatchFlowInTrouble", "for": "30s", "labels": {"severity": "critical"}},
                {"alert": "MirrorwatchClusterUnreachable", "for": "1m", "labels": {"severity": "critical"}},
                {"alert": "MirrorwatchCanaryCritical", "for": "1m", "labels": {"severity": "warning"}},
            ]
        }
    ]
}
PROMETHEUS = {"global": {"scrape_interval": "5s", "evaluation_interval": "5s"}}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("1m30s", 90), ("500ms", 0.5), ("0m", 0), ("2h", 7200), (5, 5)],
)
def test_duration_s(text, seconds):
    assert duration_s(text) == seconds


@pytest.mark.parametrize("text", ["30", "1.5x", "m", "1m 30s"])
def test_duration_s_refuses_what_is_not_a_duration(text):
    with pytest.raises(ValueError, match="not a duration"):
        duration_s(text)


@pytest.mark.parametrize(
    ("matchers", "labels", "hit"),
    [
        (['severity="critical"'], {"severity": "critical"}, True),
        (['severity="critical"'], {"severity": "warning"}, False),
        (['severity!="none"'], {}, True),
        (['alertname=~"Mirrorwatch.*Lost"'], {"alertname": "MirrorwatchRecordsLost"}, True),
        (['alertname=~"Records"'], {"alertname": "MirrorwatchRecordsLost"}, False),  # anchored
        (['alertname!~"A|B"', "flow=x"], {"alertname": "C", "flow": "x"}, True),
    ],
)
def test_matches(matchers, labels, hit):
    assert matches(matchers, labels) is hit


@pytest.mark.parametrize(
    ("labels", "receiver", "group_wait", "group_by"),
    [
        ({"alertname": "MirrorwatchFlowInTrouble", "severity": "critical"}, "mirrorwatch-page", "10s", None),
        (
            {"alertname": "MirrorwatchClusterUnreachable", "severity": "critical"},
            "mirrorwatch-page",
            "10s",
            ["cluster"],
        ),
        ({"alertname": "MirrorwatchFlowClusterUnreachable", "severity": "none"}, "mirrorwatch-null", "30s", None),
        ({"alertname": "MirrorwatchCanaryCritical", "severity": "warning"}, "mirrorwatch-ticket", "30s", None),
    ],
)
def test_route_for_takes_the_first_matching_child_and_inherits(labels, receiver, group_wait, group_by):
    route = route_for(AM, labels)
    assert (route["receiver"], route["group_wait"], route.get("group_by")) == (receiver, group_wait, group_by)
    assert route["group_interval"] == "5m"  # Alertmanager's default, set nowhere here


@pytest.mark.parametrize(
    ("alert", "total"),
    [
        ("MirrorwatchFlowInTrouble", 30 + 5 + 5 + 2 + 1 + 10),
        ("MirrorwatchClusterUnreachable", 60 + 5 + 5 + 2 + 1 + 10),
        ("MirrorwatchCanaryCritical", 60 + 5 + 5 + 2 + 1 + 30),
    ],
)
def test_floor_of_adds_for_scrape_evaluation_intervals_and_group_wait(alert, total):
    floor = floor_of(alert, RULES, PROMETHEUS, AM, monitor_s=2, canary_s=1)
    assert floor.total_s == total
    assert floor.formula().endswith(f"= {total:g} s")


def test_floor_of_an_unknown_alert_says_so():
    with pytest.raises(ValueError, match="no alert MirrorwatchNope"):
        floor_of("MirrorwatchNope", RULES, PROMETHEUS, AM, 1, 1)
