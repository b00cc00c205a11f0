"""The mirror-flows dashboard, built with Grafana's own SDK (grafana-foundation-sdk's typed builders), so the
JSON conforms to Grafana's dashboard schema by construction.

Status panels take their value mappings from the enums in ``mirrorwatch.core.status``; every panel sits on
the 24-column grid where :class:`~.panels.Layout` puts it (left to right, a new line when a panel does not fit).
The building blocks are in :mod:`.panels`; the "Mirror and offset translation" row is in :mod:`.dashboard_mirrors`.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import heatmap
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as hm

from ..core.status import CanaryStatus, GroupStatus, PartitionStatus
from .dashboard_mirrors import mirror_row
from .panels import (
    FT,
    F,
    Layout,
    mappings,
    stat_panel,
    state_timeline_panel,
    target,
    timeseries_panel,
    variable,
)

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


def lag_by_kind(kind: str) -> str:
    return f'sum by (flow, topic) (mirrorwatch_lag_records{{kind="{kind}",{FT}}})'


def quantile(q: str, metric: str, rng: str = "$__rate_interval", by: str = "flow") -> str:
    return f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{F}}}[{rng}])))"


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
    L.row("Overview")
    L.add(
        6,
        5,
        stat_panel(
            "Evaluator status (worst group)",
            [target(f"max by (flow) (mirrorwatch_group_status{{{F}}})", "{{flow}}")],
            maps=mappings(GROUP_COLORS),
        ),
    )
    L.add(
        6,
        5,
        stat_panel(
            "Canary status",
            [target(f"max by (flow) (mirrorwatch_canary_status{{{F}}})", "{{flow}}")],
            maps=mappings(CANARY_COLORS),
        ),
    )
    L.add(
        4,
        5,
        stat_panel(
            "True lag",
            [target(f'sum by (flow) (mirrorwatch_lag_records{{kind="true",{F}}})', "{{flow}}")],
            steps=((None, "green"), (10000, "red")),
            description="Alert threshold: 10000 records for 5m.",
        ),
    )
    L.add(
        4,
        5,
        stat_panel(
            "RPO",
            [target(f"max by (flow) (mirrorwatch_flow_rpo_seconds{{{F}}})", "{{flow}}")],
            unit="s",
            steps=((None, "green"), (60, "red")),
            description="Age of the oldest source record not yet on the target. Alert: above 60 s for 2m.",
        ),
    )
    L.add(
        4,
        5,
        stat_panel(
            "Heartbeat age",
            [target(f"max by (flow) (mirrorwatch_canary_heartbeat_age_seconds{{{F}}})", "{{flow}}")],
            unit="s",
            steps=((None, "green"), (60, "red")),
        ),
    )

    L.row("Lag: committed vs read vs true")
    # One panel with all three so the committed saw-tooth sits right beside the flat true lag.
    L.add(
        24,
        9,
        timeseries_panel(
            "Committed, read and true lag per flow",
            [target(f"sum by (flow, kind) (mirrorwatch_lag_records{{{FT}}})", "{{flow}} {{kind}}")],
            description="Committed lag saw-tooths with the mirror's commit interval and is not alerted on; "
            "true lag (from offset syncs) is what the target is really missing. Read lag under-reports.",
            threshold=10000,
        )
        .override_by_regexp(
            ".* committed",
            [
                dm.DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
                dm.DynamicConfigValue(id_val="custom.fillOpacity", value=10),
            ],
        )
        .override_by_regexp(".* true", [dm.DynamicConfigValue(id_val="custom.lineWidth", value=3)]),
    )
    for kind in ("committed", "read", "true"):
        L.add(
            8,
            8,
            timeseries_panel(
                f"{kind.capitalize()} lag by topic",
                [target(lag_by_kind(kind), "{{flow}} {{topic}}")],
                threshold=10000 if kind == "true" else None,
            ),
        )

    L.row("Throughput")
    L.add(
        12,
        8,
        timeseries_panel(
            "Mirrored records/s by topic",
            [
                target(
                    f"sum by (flow, topic) (rate(mirrorwatch_mirror_records_total{{{FT}}}[$__rate_interval]))",
                    "{{flow}} {{topic}}",
                )
            ],
            unit="rps",
        ),
    )
    L.add(
        12,
        8,
        timeseries_panel(
            "Mirrored bytes/s by topic",
            [
                target(
                    f"sum by (flow, topic) (rate(mirrorwatch_mirror_bytes_total{{{FT}}}[$__rate_interval]))",
                    "{{flow}} {{topic}}",
                )
            ],
            unit="Bps",
        ),
    )
    L.add(
        8,
        7,
        timeseries_panel(
            "Replication latency (ack − record time)",
            [
                target(
                    quantile(q, "mirrorwatch_mirror_replication_latency_seconds"),
                    f"{{{{flow}}}} p{int(float(q) * 100)}",
                    ref,
                )
                for q, ref in (("0.5", "A"), ("0.99", "B"))
            ],
            unit="s",
        ),
    )
    L.add(
        8,
        7,
        timeseries_panel(
            "Produce errors/s",
            [
                target(
                    f"sum by (flow, retriable) (rate(mirrorwatch_mirror_produce_errors_total{{{FT}}}[$__rate_interval]))",
                    "{{flow}} retriable={{retriable}}",
                )
            ],
            unit="rps",
        ),
    )
    L.add(
        8,
        7,
        timeseries_panel(
            "In-flight records and rebalances",
            [
                target(f"sum by (flow) (mirrorwatch_mirror_in_flight_records{{{F}}})", "{{flow}} in flight"),
                target(
                    f"sum by (flow) (increase(mirrorwatch_mirror_rebalances_total{{{F}}}[$__rate_interval]))",
                    "{{flow}} rebalances",
                    "B",
                ),
            ],
        ),
    )

    L.row("RPO and status")
    L.add(
        12,
        8,
        timeseries_panel(
            "RPO by topic (oldest record not yet on the target)",
            [target(f"max by (flow, topic) (mirrorwatch_rpo_seconds{{{FT}}})", "{{flow}} {{topic}}")],
            unit="s",
            threshold=120,
        ),
    )
    L.add(
        12,
        8,
        timeseries_panel(
            "Catch-up forecast",
            [target(f"max by (flow, topic) (mirrorwatch_catch_up_seconds{{{FT}}})", "{{flow}} {{topic}}")],
            unit="s",
            description="+Inf: not catching up.",
        ),
    )
    L.add(
        12,
        8,
        timeseries_panel(
            "RPO seconds and the canary's round trip",
            [
                target(f"max by (flow) (mirrorwatch_flow_rpo_seconds{{{F}}})", "{{flow}} RPO"),
                target(quantile("0.5", "mirrorwatch_canary_round_trip_seconds"), "{{flow}} canary round trip p50", "B"),
            ],
            unit="s",
            threshold=120,
            description="RPO: the age of the oldest source record not yet on the target (the flow's worst partition), "
            "measured from the clusters every monitor cycle — it pages above 120 s (the SLO objective is 60 s). "
            "The canary's round trip is its own probes' write-to-read time; on a healthy mirror the two agree "
            "within a few hundred ms.",
        ),
    )
    L.add(
        12,
        8,
        timeseries_panel(
            "Records lost before they were mirrored or consumed",
            [
                target(
                    f"sum by (flow, group, topic) (mirrorwatch_records_lost{{{F}}})", "{{group}} {{topic}} (monitor)"
                ),
                target(
                    f"sum by (flow, topic) (mirrorwatch_mirror_records_lost_total{{{F}}})",
                    "{{flow}} {{topic}} (engine skipped)",
                    "B",
                ),
            ],
            threshold=1,
            description="Source log start past a group's committed offset (retention, DeleteRecords, a recreated "
            "topic). Any value above 0 pages (MirrorwatchRecordsLost).",
        ),
    )
    L.add(
        12,
        8,
        state_timeline_panel(
            "Group status",
            [target(f"max by (flow, group) (mirrorwatch_group_status{{{F}}})", "{{flow}} {{group}}")],
            mappings(GROUP_COLORS),
        ),
    )
    L.add(
        12,
        8,
        state_timeline_panel(
            "Partition status",
            [
                target(
                    f"max by (flow, topic, partition) (mirrorwatch_partition_status{{{FT}}})", "{{topic}}/{{partition}}"
                )
            ],
            mappings(PARTITION_COLORS),
        ),
    )

    L.row("Canary and heartbeats")
    L.add(
        12,
        8,
        timeseries_panel(
            "Canary round trip percentiles",
            [
                target(
                    quantile(q, "mirrorwatch_canary_round_trip_seconds"), f"{{{{flow}}}} p{int(float(q) * 100)}", ref
                )
                for q, ref in (("0.5", "A"), ("0.9", "B"), ("0.99", "C"))
            ],
            unit="s",
        ),
    )
    L.add(
        12,
        8,
        heatmap.Panel()
        .title("Canary round trip heatmap")
        .targets(
            [
                target(
                    f"sum by (le) (increase(mirrorwatch_canary_round_trip_seconds_bucket{{{F}}}[$__rate_interval]))",
                    "{{le}}",
                    heatmap_format=True,
                )
            ]
        )
        .calculate(False)
        .y_axis(heatmap.YAxisConfig().unit("s"))
        .cell_gap(1)
        .color(heatmap.HeatmapColorOptions().mode(hm.HeatmapColorMode.SCHEME).scheme("Oranges").steps(64)),
    )
    L.add(
        12,
        8,
        timeseries_panel(
            "Canary lost, duplicate, reordered events",
            [
                target(
                    f"sum by (flow) (increase(mirrorwatch_canary_{m}_total{{{F}}}[$__rate_interval]))",
                    f"{{{{flow}}}} {m}",
                    ref,
                )
                for m, ref in (("lost", "A"), ("duplicates", "B"), ("reordered", "C"))
            ],
        ),
    )
    L.add(
        12,
        8,
        timeseries_panel(
            "Heartbeat age",
            [target(f"max by (flow) (mirrorwatch_canary_heartbeat_age_seconds{{{F}}})", "{{flow}}")],
            unit="s",
            threshold=60,
        ),
    )

    mirror_row(L)

    L.row("SLO and collector health")
    # Needs the recording rules loaded (flow:mirrorwatch_rpo_slo:ok).
    L.add(
        8,
        6,
        stat_panel(
            "RPO SLO: share of time with RPO ≤ 60 s",
            [target(f"avg by (flow) (avg_over_time(flow:mirrorwatch_rpo_slo:ok{{{F}}}[$__range]))", "{{flow}}")],
            unit="percentunit",
            steps=((None, "red"), (0.99, "green")),
            description="Objective: 99 % of the time. Needs grafana/prometheus/mirrorwatch-rules.yml loaded.",
        ),
    )
    L.add(
        8,
        6,
        stat_panel(
            "Canary delivery: share of probes not lost",
            [
                target(
                    f"1 - sum by (flow) (increase(mirrorwatch_canary_lost_total{{{F}}}[$__range])) / "
                    f"clamp_min(sum by (flow) (increase(mirrorwatch_canary_probes_total{{{F}}}[$__range])), 1)",
                    "{{flow}}",
                )
            ],
            unit="percentunit",
            steps=((None, "red"), (0.999, "green")),
        ),
    )
    L.add(
        8,
        6,
        stat_panel(
            "Canary round trip p99 over the range",
            [target(quantile("0.99", "mirrorwatch_canary_round_trip_seconds", "$__range"), "{{flow}}")],
            unit="s",
        ),
    )
    L.add(
        12,
        7,
        state_timeline_panel(
            "Exporters and clusters up",
            [
                target('up{job=~"mirrorwatch-mirror|mirrorwatch-canary|mirrorwatch-monitor"}', "{{job}} {{instance}}"),
                target("mirrorwatch_cluster_up", "cluster {{cluster}}", "B"),
            ],
            [
                dm.ValueMap(
                    options={
                        "0": dm.ValueMappingResult(text="DOWN", color="red"),
                        "1": dm.ValueMappingResult(text="UP", color="green"),
                    }
                )
            ],
        ),
    )
    L.add(
        12,
        7,
        timeseries_panel(
            "Monitor sample age and evaluator window complete",
            [
                target(f"max by (flow) (mirrorwatch_sample_age_seconds{{{F}}})", "{{flow}} sample age (s)"),
                target(f"min by (flow) (mirrorwatch_window_complete_ratio{{{F}}})", "{{flow}} window complete", "B"),
            ],
        ),
    )
    return dashboard.build()
