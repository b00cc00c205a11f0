"""The dashboard's "RPO and status" row: RPO and the catch-up forecast by topic, the flow's RPO beside the canary's
round trip, records lost, and the group and partition status timelines."""

from __future__ import annotations

from .panels import (
    FT,
    GROUP_COLORS,
    PARTITION_COLORS,
    F,
    Layout,
    mappings,
    one_replica,
    quantile,
    state_timeline_panel,
    target,
    timeseries_panel,
)


def rpo_status_row(L: Layout) -> None:
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
                    f"sum by (flow, group, topic) ({one_replica(f'mirrorwatch_records_lost{{{F}}}')})",
                    "{{group}} {{topic}} (monitor)",
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
