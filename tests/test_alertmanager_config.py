"""The shipped Alertmanager configuration (grafana/alertmanager/): amtool's checks, every alert of the rule file
routed by its severity, the notification template, and the inhibition rules against a REAL Alertmanager
(harness/alertmanager.py): one cause, one page. No Kafka, no Prometheus: the alerts are posted to
Alertmanager's API as Prometheus would post them (labels and annotations as the rules give them)."""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from harness.alertmanager import AMTOOL, alertmanager_server, check_config
from harness.webhooks import WebhookReceiver
from mirrorwatch.grafana_build import promql

ROOT = Path(__file__).resolve().parent.parent
AM_DIR = ROOT / "grafana" / "alertmanager"
SHIPPED = AM_DIR / "alertmanager.yml"
RECEIVER_OF_SEVERITY = {"critical": "mirrorwatch-page", "warning": "mirrorwatch-ticket", "none": "mirrorwatch-null"}
RUNBOOK_BASE = "https://mirrorwatch.example.invalid/docs/runbooks/"


def amtool(*args: str) -> str:
    proc = subprocess.run([AMTOOL, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"amtool {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}"
    return proc.stdout


def alert_rules() -> dict[str, dict]:
    return {r["alert"]: r for r in promql.rules_of(promql.load_rules(), "alert")}


def test_amtool_check_config():
    assert check_config(SHIPPED) == ""
    assert "1 templates" in amtool("check-config", str(SHIPPED))  # the template glob, relative to the file, matches


@pytest.mark.parametrize("name", sorted(alert_rules()))
def test_every_alert_routes_by_its_severity(name):
    rule = alert_rules()[name]
    labels = {**rule["labels"], "alertname": name, "flow": "east-west", "source": "east", "target": "west"}
    out = amtool("config", "routes", "test", f"--config.file={SHIPPED}", *(f"{k}={v}" for k, v in labels.items()))
    assert out.split() == [RECEIVER_OF_SEVERITY[rule["labels"]["severity"]]]


def test_seam_severities():
    """The paging split of issue 27 (docs/alerts.md): which alerts page, which open a ticket, which only inhibit."""
    by_severity: dict[str, set[str]] = {}
    for name, rule in alert_rules().items():
        by_severity.setdefault(rule["labels"]["severity"], set()).add(name)
    assert by_severity["none"] == {"MirrorwatchFlowClusterUnreachable"}
    assert {"MirrorwatchFlowInTrouble", "MirrorwatchClusterUnreachable", "MirrorwatchServiceWedged"} <= by_severity[
        "critical"
    ]
    assert {"MirrorwatchCanaryCritical", "MirrorwatchHeartbeatStale", "MirrorwatchEvaluatorError"} <= by_severity[
        "warning"
    ]


def test_every_alert_has_summary_description_and_runbook_url_of_the_documented_form():
    for name, rule in alert_rules().items():
        annotations = rule["annotations"]
        assert {"summary", "description", "runbook_url"} <= set(annotations), name
        assert annotations["runbook_url"] == f"{RUNBOOK_BASE}{name}.md", name


def test_every_runbook_url_names_a_runbook_page():
    """Active once docs/runbooks/ exists (the runbook pages are written beside this work, issue 27)."""
    folder = ROOT / "docs" / "runbooks"
    if not folder.is_dir():
        pytest.skip("docs/runbooks/ is not in this tree yet: the check turns on when it is")
    missing = [
        n
        for n, r in alert_rules().items()
        if not (folder / r["annotations"]["runbook_url"].rsplit("/", 1)[1]).is_file()
    ]
    assert not missing, f"no runbook page docs/runbooks/<alert>.md for: {missing}"


def test_template_names_the_cause_the_first_command_and_the_runbook(tmp_path):
    data = {
        "receiver": "mirrorwatch-page",
        "status": "firing",
        "alerts": [
            {
                "status": "firing",
                "labels": {"alertname": "MirrorwatchFlowInTrouble", "flow": "ew", "mirror": "mirrorwatch"},
                "annotations": {
                    "cause": "mirror down",
                    "summary": "Flow ew (east -> west) is in trouble: its mirror is down",
                    "description": "No live mirror process exports flow ew.",
                    "runbook": "systemctl status 'mirrorwatch-mirror@*'",
                    "runbook_url": RUNBOOK_BASE + "MirrorwatchFlowInTrouble.md",
                },
                "startsAt": "2026-11-26T01:00:00Z",
                "endsAt": "0001-01-01T00:00:00Z",
            }
        ],
        "groupLabels": {"flow": "ew"},
        "commonLabels": {"alertname": "MirrorwatchFlowInTrouble", "flow": "ew", "mirror": "mirrorwatch"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager",
    }
    (tmp_path / "data.json").write_text(json.dumps(data))
    out = amtool(
        "template",
        "render",
        f"--template.glob={AM_DIR / 'templates' / '*.tmpl'}",
        '--template.text={{ template "mirrorwatch.title" . }}\n{{ template "mirrorwatch.text" . }}',
        f"--template.data={tmp_path / 'data.json'}",
    )
    title, text = out.split("\n", 1)
    assert title == "[FIRING] flow ew: Flow ew (east -> west) is in trouble: its mirror is down"
    assert "FIRING: MirrorwatchFlowInTrouble (cause: mirror down) [mirrorwatch]" in text
    assert "First: systemctl status 'mirrorwatch-mirror@*'" in text
    assert f"Runbook: {RUNBOOK_BASE}MirrorwatchFlowInTrouble.md" in text


# ------------------------------------------------------------------------------------- a real Alertmanager
def alert(name: str, **labels: str) -> dict:
    """An alert as Prometheus posts it: the rule's own labels (severity, fixed mirror) plus the series'."""
    rule = alert_rules()[name]
    return {
        "labels": {"alertname": name, **rule["labels"], **labels},
        "annotations": {"summary": f"{name} {labels}", "runbook_url": rule["annotations"]["runbook_url"]},
        "startsAt": datetime.now(UTC).isoformat(),
    }


FLOW = {"source": "east", "target": "west"}
INCIDENTS = [
    # the mirror frozen: the flow page, and every symptom of it (issue 27 counted six alerts firing at once)
    alert("MirrorwatchFlowInTrouble", flow="ew", mirror="mirrorwatch", **FLOW),
    alert("MirrorwatchCanaryCritical", flow="ew", mirror="mirrorwatch", **FLOW),
    alert("MirrorwatchHeartbeatStale", flow="ew", mirror="mirrorwatch", **FLOW),
    alert("MirrorwatchRpoHigh", flow="ew", mirror="mirrorwatch", **FLOW),
    alert("MirrorwatchTrueLagHigh", flow="ew", mirror="mirrorwatch", **FLOW),
    alert("MirrorwatchEvaluatorError", flow="ew", group="mirrorwatch-ew", mirror="mirrorwatch", **FLOW),
    alert("MirrorwatchExporterDown", job="mirrorwatch-mirror"),
    # the target cluster unreachable: the cluster page; each flow touching it inhibited
    alert("MirrorwatchClusterUnreachable", cluster="west"),
    alert("MirrorwatchFlowClusterUnreachable", flow="a", cluster="west", **FLOW),
    alert("MirrorwatchFlowClusterUnreachable", flow="b", cluster="west", **FLOW),
    alert("MirrorwatchRpoHigh", flow="a", **FLOW),
    alert("MirrorwatchHeartbeatStale", flow="a", **FLOW),
    alert("MirrorwatchCanaryUnknown", flow="b", **FLOW),
    alert("MirrorwatchMonitorSampleStale", flow="b", **FLOW),
    # records removed before the mirror read them stop it: the loss pages, not the stall it causes
    alert("MirrorwatchRecordsLost", flow="lost", group="mirrorwatch-lost", topic="orders", partition="0", **FLOW),
    alert("MirrorwatchFlowInTrouble", flow="lost", mirror="mirrorwatch", **FLOW),
    # restarted with on_records_lost: continue, the engine counts what it skipped: still the loss's page only
    alert("MirrorwatchMirrorRecordsLost", flow="skip", topic="orders", partition="0", **FLOW),
    alert("MirrorwatchFlowInTrouble", flow="skip", mirror="mirrorwatch", **FLOW),
    # a service wedged waiting on the unreachable cluster: the cluster page covers it
    alert("MirrorwatchServiceWedged", job="mirrorwatch-canary", service="canary"),
    # only the canary's topic stopped crossing: a ticket, no page
    alert("MirrorwatchCanaryCritical", flow="c", **FLOW),
]
INHIBITED = {
    ("MirrorwatchCanaryCritical", "ew"),
    ("MirrorwatchHeartbeatStale", "ew"),
    ("MirrorwatchRpoHigh", "ew"),
    ("MirrorwatchTrueLagHigh", "ew"),
    ("MirrorwatchEvaluatorError", "ew"),
    ("MirrorwatchExporterDown", ""),
    ("MirrorwatchRpoHigh", "a"),
    ("MirrorwatchHeartbeatStale", "a"),
    ("MirrorwatchCanaryUnknown", "b"),
    ("MirrorwatchMonitorSampleStale", "b"),
    ("MirrorwatchFlowInTrouble", "lost"),
    ("MirrorwatchFlowInTrouble", "skip"),
    ("MirrorwatchServiceWedged", ""),
}


def notified(hook: WebhookReceiver) -> list[tuple[str, list[tuple[str, str]]]]:
    """(status, [(alertname, flow or cluster)]) of each notification received."""
    return [
        (
            b["status"],
            sorted(
                (a["labels"]["alertname"], a["labels"].get("flow") or a["labels"].get("cluster", ""))
                for a in b["alerts"]
            ),
        )
        for b in hook.bodies
    ]


def test_one_cause_one_page_on_a_real_alertmanager():
    """The shipped routes and inhibition rules, with only the receivers' URLs changed and group_wait/group_interval
    shortened to 1 s (so the test waits seconds, not minutes)."""
    doc = yaml.safe_load(SHIPPED.read_text())
    doc["templates"] = [str(AM_DIR / t) for t in doc["templates"]]  # the copy lives in a temporary directory
    hooks = {name: WebhookReceiver() for name in RECEIVER_OF_SEVERITY.values()}
    page, ticket, null = (hooks[n] for n in ("mirrorwatch-page", "mirrorwatch-ticket", "mirrorwatch-null"))
    try:
        with alertmanager_server(
            doc,
            receivers={name: hook.url for name, hook in hooks.items()},
            timings={"group_wait": "1s", "group_interval": "1s"},
        ) as am:
            # the rules make the inhibiting alert fire first (FlowInTrouble's `for:` is the shortest of a flow's,
            # FlowClusterUnreachable and RecordsLost have none): post them first, their symptoms once they are in
            # (posted in one batch, the dispatcher may flush a group before the inhibitor has read its source)
            sources = [a for a in INCIDENTS if (a["labels"]["alertname"], a["labels"].get("flow", "")) not in INHIBITED]
            am.post_alerts(sources)
            am.wait_for(lambda: len(am.alerts()) == len(sources), 30, "the inhibiting alerts")
            am.post_alerts([a for a in INCIDENTS if a not in sources])
            am.wait_for(lambda: len(page.bodies) >= 4 and ticket.bodies and len(null.bodies) >= 2, 30, "notifications")
            time.sleep(2)  # two more group intervals: anything else that would notify has by now

            states = {(a["labels"]["alertname"], a["labels"].get("flow", "")): a["status"] for a in am.alerts()}
            inhibited = {key for key, status in states.items() if status["inhibitedBy"]}
            assert inhibited == INHIBITED
            assert all(states[k]["state"] == "suppressed" for k in INHIBITED)

            # exactly one page per cause, naming it; the canary-only fault is one ticket; nothing else notifies
            assert sorted(notified(page)) == [
                ("firing", [("MirrorwatchClusterUnreachable", "west")]),
                ("firing", [("MirrorwatchFlowInTrouble", "ew")]),
                ("firing", [("MirrorwatchMirrorRecordsLost", "skip")]),
                ("firing", [("MirrorwatchRecordsLost", "lost")]),
            ]
            assert notified(ticket) == [("firing", [("MirrorwatchCanaryCritical", "c")])]
            # severity none goes to the null receiver (the test gave it a webhook to see it; shipped, it has none)
            assert sorted(notified(null)) == [
                ("firing", [("MirrorwatchFlowClusterUnreachable", "a")]),
                ("firing", [("MirrorwatchFlowClusterUnreachable", "b")]),
            ]

            # the fix: every alert of the frozen mirror resolves (FlowInTrouble's keep_firing_for holds it until
            # the others have gone): ONE "resolved" notification for the page. Alertmanager lists in it the flow's
            # critical alerts that resolved with it (they were silenced, never paged); no ticket for the warnings.
            ended = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
            frozen = [
                a
                for a in INCIDENTS
                if a["labels"].get("flow") == "ew" or a["labels"].get("job") == "mirrorwatch-mirror"
            ]
            am.post_alerts([{**a, "endsAt": ended} for a in frozen])
            am.wait_for(lambda: len(page.bodies) >= 5, 30, "the resolved notification")
            time.sleep(2)
            (resolved,) = notified(page)[4:]
            assert resolved[0] == "resolved" and ("MirrorwatchFlowInTrouble", "ew") in resolved[1]
            assert {flow for _, flow in resolved[1]} == {"ew"}
            assert len(ticket.bodies) == 1
    finally:
        for hook in hooks.values():
            hook.close()


def test_documented_timings_are_the_shipped_ones():
    """docs/alerts.md and grafana/alertmanager/README.md quote the shipped route timings; keep them true."""
    route = yaml.safe_load(SHIPPED.read_text())["route"]
    readme = (AM_DIR / "README.md").read_text()
    for key in ("group_wait", "group_interval", "repeat_interval"):
        assert re.search(rf"`{key}: {route[key]}`", readme), key
