"""The mirror-flows dashboard, built with Grafana's own SDK (grafana-foundation-sdk's typed builders), so the
JSON conforms to Grafana's dashboard schema by construction.

This module assembles it: the dashboard, its variables, and its rows in order. Status panels take their value
mappings from the enums in ``mirrorwatch.core.status``; every panel sits on the 24-column grid where
:class:`~.panels.Layout` puts it (left to right, a new line when a panel does not fit). The building blocks are in
:mod:`.panels`; the rows are built by :mod:`.dashboard_flow` (overview, lag, throughput), :mod:`.dashboard_status`
(RPO and status), :mod:`.dashboard_canary` (canary and heartbeats, SLO and collector health) and
:mod:`.dashboard_mirrors` (mirror and offset translation).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as dm

from .dashboard_canary import canary_row, slo_row
from .dashboard_flow import lag_row, overview_row, throughput_row
from .dashboard_mirrors import mirror_row
from .dashboard_status import rpo_status_row
from .panels import Layout, variable


def flows_dashboard() -> dm.Dashboard:
    dashboard = (
        db.Dashboard("mirrorwatch: mirror flows")
        .uid("mirrorwatch-flows")
        .tags(["mirrorwatch", "kafka"])
        .editable()
        .version(1)
        .refresh("30s")
        .timezone("")
        .time("now-1h", "now")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .with_variable(
            db.DatasourceVariable("datasource").label("Prometheus").type("prometheus").hide(dm.VariableHide.DONT_HIDE)
        )
        .with_variable(variable("mirror", "label_values(mirrorwatch_flow_info, mirror)", "Mirror"))
        .with_variable(variable("flow", 'label_values(mirrorwatch_flow_info{mirror=~"$mirror"}, flow)', "Flow"))
        .with_variable(variable("topic", 'label_values(mirrorwatch_lag_records{flow=~"$flow"}, topic)', "Topic"))
    )
    L = Layout(dashboard)
    overview_row(L)
    lag_row(L)
    throughput_row(L)
    rpo_status_row(L)
    canary_row(L)
    mirror_row(L)
    slo_row(L)
    return dashboard.build()
