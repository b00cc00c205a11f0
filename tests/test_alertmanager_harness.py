"""The real-Alertmanager harness (harness/alertmanager.py): receivers repointed, route timings overridden,
and an alert posted to its API reaching a webhook once, then resolving. No Kafka; about two seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from harness.alertmanager import alertmanager_server, point_receivers, set_route_timings
from harness.prometheus_server import _config
from harness.webhooks import WebhookReceiver

CONFIG = {
    "route": {
        "receiver": "null",
        "group_by": ["flow"],
        "group_wait": "30s",
        "routes": [{"receiver": "page", "matchers": ['severity="critical"'], "group_interval": "5m"}],
    },
    "receivers": [{"name": "null"}, {"name": "page", "webhook_configs": [{"url": "http://x/", "max_alerts": 3}]}],
}


def test_point_receivers_keeps_the_webhook_settings_and_refuses_unknown_names():
    doc = point_receivers(CONFIG, {"page": "http://127.0.0.1:1/hook", "null": "http://127.0.0.1:2/hook"})
    by_name = {r["name"]: r for r in doc["receivers"]}
    assert by_name["page"]["webhook_configs"] == [{"url": "http://127.0.0.1:1/hook", "max_alerts": 3}]
    assert by_name["null"]["webhook_configs"] == [{"send_resolved": True, "url": "http://127.0.0.1:2/hook"}]
    assert CONFIG["receivers"][1]["webhook_configs"][0]["url"] == "http://x/"  # the input is left alone
    with pytest.raises(ValueError, match="no receiver named pager"):
        point_receivers(CONFIG, {"pager": "http://127.0.0.1:1/"})


def test_set_route_timings_touches_the_top_route_and_children_that_set_their_own():
    doc = set_route_timings(CONFIG, {"group_wait": "1s", "group_interval": "2s"})
    assert (doc["route"]["group_wait"], doc["route"]["group_interval"]) == ("1s", "2s")
    assert doc["route"]["routes"][0] == {
        "receiver": "page",
        "matchers": ['severity="critical"'],
        "group_interval": "2s",
    }
    with pytest.raises(ValueError, match="not a route timing"):
        set_route_timings(CONFIG, {"group_waits": "1s"})


def test_prometheus_config_names_the_alertmanager():
    config = _config({"job": ["127.0.0.1:1"]}, [], "1s", "1s", alertmanager_url="http://127.0.0.1:9093")
    (am,) = config["alerting"]["alertmanagers"]
    assert am["static_configs"] == [{"targets": ["127.0.0.1:9093"]}] and am["api_version"] == "v2"


def test_a_posted_alert_is_notified_once_and_resolves():
    hook = WebhookReceiver()
    try:
        with alertmanager_server(
            CONFIG, receivers={"page": hook.url}, timings={"group_wait": "0s", "group_interval": "1s"}
        ) as am:
            now = datetime.now(UTC)
            alert = {"labels": {"alertname": "X", "flow": "f", "severity": "critical"}, "startsAt": now.isoformat()}
            am.post_alerts([alert])
            am.wait_for(lambda: hook.bodies, 20, "the firing notification")
            assert [a["labels"]["alertname"] for a in am.alerts()] == ["X"]
            am.post_alerts([{**alert, "endsAt": (now + timedelta(milliseconds=1)).isoformat()}])
            am.wait_for(lambda: len(hook.bodies) >= 2, 20, "the resolved notification")
            assert [b["status"] for b in hook.bodies] == ["firing", "resolved"]
    finally:
        hook.close()
