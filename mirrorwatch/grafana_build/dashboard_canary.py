"""The dashboard's "Canary and heartbeats" row (round trip percentiles and heatmap, lost, duplicate and reordered
probes, heartbeat age) and its last row, "SLO and collector health" (the RPO SLO, canary delivery, exporters and
clusters up, the monitor's sample age)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import heatmap
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as hm

from .panels import F, Layout, quantile, stat_panel, state_timeline_panel, target, timeseries_panel


def canary_row(L: Layout) -> None:
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
            "Canary events: overdue now; lost, late, duplicate, reordered",
            [
                target(
                    f"sum by (flow) (increase(mirrorwatch_canary_{m}_total{{{F}}}[$__rate_interval]))",
                    f"{{{{flow}}}} {m}",
                    ref,
                )
                for m, ref in (("lost", "A"), ("duplicates", "B"), ("reordered", "C"), ("late", "D"))
            ]
            # overdue: late, still expected (a frozen mirror); lost: a later event of the partition arrived first
            + [target(f"max by (flow) (mirrorwatch_canary_overdue_events{{{F}}})", "{{flow}} overdue now", "E")],
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


def slo_row(L: Layout) -> None:
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
            "Canary delivery: share of events not lost",
            [
                # events, not probes (a probe writes one per partition): arrived (on time or late) vs lost;
                # overdue events are neither yet
                target(
                    f"1 - sum by (flow) (increase(mirrorwatch_canary_lost_total{{{F}}}[$__range])) / clamp_min("
                    f"sum by (flow) (increase(mirrorwatch_canary_round_trip_seconds_count{{{F}}}[$__range])) + "
                    f"sum by (flow) (increase(mirrorwatch_canary_lost_total{{{F}}}[$__range])), 1)",
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
                # one line per cluster with two monitors: up while any replica reaches it (as the alert)
                target("max by (cluster) (mirrorwatch_cluster_up)", "cluster {{cluster}}", "B"),
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
