"""The dashboard's building blocks, shared by :mod:`.dashboard` and its row modules (``dashboard_*``, each of which
builds rows of panels from them): the Prometheus data source and the ``$flow`` filters, each status's colour and
the value mappings from a status enum, the histogram quantile query, the :class:`Layout` that places panels on
Grafana's 24-column grid, and the panel kinds with this dashboard's defaults (stat, time series, state timeline)
and its query variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from typing import TypeVar

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import heatmap, prometheus, stat, statetimeline, timeseries
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as pm

from ..core.status import CanaryStatus, GroupStatus, PartitionStatus

Status = TypeVar("Status", bound=IntEnum)

DS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
F = 'flow=~"$flow"'
FT = 'flow=~"$flow",topic=~"$topic"'

# The labels of the monitor's per-partition families (at monitor.series topic/flow some are absent: they group as
# empty). Two monitor replicas (same job, other instance/pod) export every series twice; panels that sum take the
# max per these labels first (one_replica), so two replicas draw one line of the same height as one replica.
PARTITION_LABELS = "flow, source, target, group, topic, partition"


def one_replica(selector: str, labels: str = PARTITION_LABELS) -> str:
    """``selector`` with monitor replicas collapsed: the larger reading per series (the rule file says why ``by``
    and not ``without (instance, pod)``)."""
    return f"max by ({labels}) ({selector})"


# Value mappings: the status enums give code and text, these give each status its colour.
GROUP_COLORS = {
    GroupStatus.OK: "green",
    GroupStatus.WARN: "yellow",
    GroupStatus.ERR: "red",
    GroupStatus.STOP: "red",
    GroupStatus.STALL: "red",
    GroupStatus.REWIND: "orange",
    GroupStatus.NOTFOUND: "purple",
    GroupStatus.UNKNOWN: "text",
}
CANARY_COLORS = {
    CanaryStatus.OK: "green",
    CanaryStatus.WARNING: "yellow",
    CanaryStatus.CRITICAL: "red",
    CanaryStatus.UNKNOWN: "text",
}
PARTITION_COLORS = {
    PartitionStatus.OK: "green",
    PartitionStatus.WARN: "yellow",
    PartitionStatus.STOP: "red",
    PartitionStatus.STALL: "red",
    PartitionStatus.REWIND: "orange",
    PartitionStatus.UNKNOWN: "text",
    PartitionStatus.LOST: "dark-red",
}


def quantile(q: str, metric: str, rng: str = "$__rate_interval", by: str = "flow") -> str:
    return f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{F}}}[{rng}])))"


def mappings(colors: Mapping[Status, str]) -> list[dm.ValueMapping]:
    """One value mapping per status code: its enum name as text, in code order."""
    return [
        dm.ValueMap(
            options={
                str(s.value): dm.ValueMappingResult(text=s.name, color=colors[s], index=s.value) for s in sorted(colors)
            }
        )
    ]


def thresholds(*steps: tuple[float | None, str]) -> db.ThresholdsConfig:
    return (
        db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps([dm.Threshold(value=v, color=c) for v, c in steps])
    )


def target(expr: str, legend: str = "", ref: str = "A", heatmap_format: bool = False) -> prometheus.Dataquery:
    query = prometheus.Dataquery().datasource(DS).ref_id(ref).expr(expr).legend_format(legend or "__auto")
    return query.format(pm.PromQueryFormat.HEATMAP) if heatmap_format else query


class Layout:
    """Places panels left to right on Grafana's 24-column grid and numbers them."""

    def __init__(self, dashboard: db.Dashboard) -> None:
        self.dashboard = dashboard
        self.count = 0
        self.x = self.y = self.row_h = 0

    def row(self, title: str) -> None:
        self._newline()
        self.count += 1
        self.dashboard.with_row(db.Row(title).id(self.count).grid_pos(dm.GridPos(x=0, y=self.y, w=24, h=1)))
        self.y += 1

    def add(self, w: int, h: int, panel: stat.Panel | timeseries.Panel | statetimeline.Panel | heatmap.Panel) -> None:
        if self.x + w > 24:
            self._newline()
        self.count += 1
        self.dashboard.with_panel(
            panel.id(self.count).datasource(DS).grid_pos(dm.GridPos(x=self.x, y=self.y, w=w, h=h))
        )
        self.x, self.row_h = self.x + w, max(self.row_h, h)

    def _newline(self) -> None:
        self.y, self.x, self.row_h = self.y + self.row_h, 0, 0


def stat_panel(
    title: str,
    targets: list[prometheus.Dataquery],
    unit: str = "none",
    steps: tuple[tuple[float | None, str], ...] = ((None, "green"),),
    maps: list[dm.ValueMapping] | None = None,
    description: str = "",
) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .targets(list(targets))  # as the SDK's list[Builder[Dataquery]] (a list is invariant)
        .unit(unit)
        .thresholds(thresholds(*steps))
        .mappings(maps or [])
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS))
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False))
        .color_mode(cm.BigValueColorMode.BACKGROUND)
        .graph_mode(cm.BigValueGraphMode.NONE)
        .text_mode(cm.BigValueTextMode.VALUE_AND_NAME)
    )


def timeseries_panel(
    title: str,
    targets: list[prometheus.Dataquery],
    unit: str = "short",
    description: str = "",
    threshold: float | None = None,
) -> timeseries.Panel:
    steps: list[tuple[float | None, str]] = [(None, "green")] + ([(threshold, "red")] if threshold is not None else [])
    style = cm.GraphThresholdsStyleMode.LINE if threshold is not None else cm.GraphThresholdsStyleMode.OFF
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .targets(list(targets))  # as the SDK's list[Builder[Dataquery]] (a list is invariant)
        .unit(unit)
        .draw_style(cm.GraphDrawStyle.LINE)
        .line_width(1)
        .fill_opacity(0)
        .show_points(cm.VisibilityMode.NEVER)
        .span_nulls(False)
        .thresholds_style(cb.GraphThresholdsStyleConfig().mode(style))
        .thresholds(thresholds(*steps))
        .legend(
            cb.VizLegendOptions()
            .show_legend(True)
            .display_mode(cm.LegendDisplayMode.TABLE)
            .placement(cm.LegendPlacement.BOTTOM)
            .calcs(["lastNotNull", "max"])
        )
        .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING))
    )


def state_timeline_panel(
    title: str, targets: list[prometheus.Dataquery], maps: list[dm.ValueMapping], description: str = ""
) -> statetimeline.Panel:
    return (
        statetimeline.Panel()
        .title(title)
        .description(description)
        .targets(list(targets))  # as the SDK's list[Builder[Dataquery]] (a list is invariant)
        .mappings(maps)
        .color_scheme(db.FieldColor().mode(dm.FieldColorModeId.THRESHOLDS))
        .thresholds(thresholds((None, "text")))
        .show_value(cm.VisibilityMode.NEVER)
        .merge_values(True)
        .row_height(0.9)
        # the SDK writes a legend of its own, hidden; Grafana's default (and ours before) shows it
        .legend(
            cb.VizLegendOptions()
            .show_legend(True)
            .display_mode(cm.LegendDisplayMode.LIST)
            .placement(cm.LegendPlacement.BOTTOM)
        )
    )


def variable(name: str, query: str, label: str) -> db.QueryVariable:
    return (
        db.QueryVariable(name)
        .label(label)
        .datasource(DS)
        .query({"query": query, "refId": name})
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(dm.VariableOption(text="All", value="$__all"))
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
    )
