"""Grafana dashboards and provisioning files: generated output is checked in, and is provisioning-ready."""

from __future__ import annotations

import json
import re

import yaml

from mirrorwatch.grafana_build import build, promql

DASHBOARD = promql.DASHBOARDS / "mirrorwatch-flows.json"
PROVISIONING = promql.HERE / "provisioning"


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def test_checked_in_files_equal_generated():
    for path, text in build.outputs().items():
        assert path.read_text() == text, f"{path} is stale: run scripts/build-grafana"
    assert build.main(["--check"]) == 0


def test_variables_datasource_flow_topic():
    variables = {v["name"]: v for v in dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("flow", "topic"):
        assert variables[name]["query"]["query"].startswith("label_values(mirrorwatch_")
        assert variables[name]["allValue"] == ".*" and variables[name]["datasource"]["uid"] == "${datasource}"


def test_every_panel_uses_the_datasource_variable_and_fits_the_grid():
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        pos = p["gridPos"]
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= 24, p["title"]
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}", p["title"]
            assert p["targets"] and all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"]), p["title"]
    occupied = set()
    for p in panels:  # no two panels overlap
        pos = p["gridPos"]
        cells = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"]) for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not cells & occupied, p["title"]
        occupied |= cells


def test_required_panels_present():
    panels = [p for p in dashboard()["panels"] if p["type"] != "row"]
    exprs = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in panels}
    all_exprs = " ".join(exprs.values())
    assert "mirrorwatch_mirror_records_total" in all_exprs and "mirrorwatch_rpo_seconds" in all_exprs
    assert "mirrorwatch_canary_heartbeat_age_seconds" in all_exprs
    # the three lags in one panel, so the committed saw-tooth is seen beside the true lag
    three = exprs["Committed, read and true lag per flow"]
    assert "mirrorwatch_lag_records" in three and "kind" in three and "kind=" not in three
    for kind in ("committed", "read", "true"):
        assert f'kind="{kind}"' in all_exprs
    assert re.search(r"histogram_quantile\(0\.99, .*mirrorwatch_canary_round_trip_seconds_bucket", all_exprs)
    heatmaps = [p for p in panels if p["type"] == "heatmap"]
    assert heatmaps and heatmaps[0]["targets"][0]["format"] == "heatmap"
    assert any(p["type"] == "state-timeline" and "mirrorwatch_group_status" in exprs[p["title"]] for p in panels)
    assert any("SLO" in p["title"] for p in panels)


def test_provisioning_examples_agree():
    ds = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())["datasources"][0]
    assert ds["uid"] == build.DATASOURCE_UID and ds["type"] == "prometheus"
    alerts = yaml.safe_load(promql.GRAFANA_ALERTS.read_text())
    uids = {d["datasourceUid"] for g in alerts["groups"] for r in g["rules"] for d in r["data"]}
    assert uids == {build.DATASOURCE_UID, "__expr__"}
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "mirrorwatch.yml").read_text())["providers"]
    assert providers[0]["type"] == "file" and providers[0]["options"]["path"]
    contacts = yaml.safe_load((PROVISIONING / "alerting" / "contact-points.yml").read_text())["contactPoints"]
    policy = yaml.safe_load((PROVISIONING / "alerting" / "notification-policies.yml").read_text())["policies"][0]
    names = {c["name"] for c in contacts}
    assert policy["receiver"] in names and all(r["receiver"] in names for r in policy["routes"])
    # the page route matches the severity the critical alerts carry
    severities = {r["labels"]["severity"] for g in alerts["groups"] for r in g["rules"]}
    assert ["severity", "=", "critical"] in policy["routes"][0]["object_matchers"] and "critical" in severities
    # the same split as grafana/alertmanager/alertmanager.yml: grouped by flow; severity none notifies nobody
    assert {"flow", "cluster"} <= set(policy["group_by"]) and severities == {"critical", "warning", "none"}
    (none_route,) = [r for r in policy["routes"] if ["severity", "=", "none"] in r["object_matchers"]]
    mute_names = {
        m["name"]
        for m in yaml.safe_load((PROVISIONING / "alerting" / "notification-policies.yml").read_text())["muteTimes"]
    }
    assert none_route["mute_time_intervals"] and set(none_route["mute_time_intervals"]) <= mute_names
