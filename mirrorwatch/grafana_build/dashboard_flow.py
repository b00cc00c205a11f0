"""The dashboard's first rows, the flow's figures: "Overview" (status, true lag, RPO and heartbeat age per flow),
"Lag: committed vs read vs true" and "Throughput" (what the mirror moves, its latency, errors and rebalances)."""

from __future__ import annotations

from grafana_foundation_sdk.models import dashboard as dm

from .panels import (
    CANARY_COLORS,
    FT,
    GROUP_COLORS,
    PARTITION_LABELS,
    F,
    Layout,
    mappings,
    one_replica,
    quantile,
    stat_panel,
    target,
    timeseries_panel,
)

TRUE_LAG = f'mirrorwatch_lag_records{{kind="true",{F}}}'
ALL_LAGS = f"mirrorwatch_lag_records{{{FT}}}"
LAG_LABELS = f"{PARTITION_LABELS}, kind"


def lag_by_kind(kind: str) -> str:
    lags = one_replica(f'mirrorwatch_lag_records{{kind="{kind}",{FT}}}')
    return f"sum by (flow, topic) ({lags})"


def overview_row(L: Layout) -> None:
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
            [target(f"sum by (flow) ({one_replica(TRUE_LAG)})", "{{flow}}")],
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


def lag_row(L: Layout) -> None:
    L.row("Lag: committed vs read vs true")
    # One panel with all three so the committed saw-tooth sits right beside the flat true lag.
    L.add(
        24,
        9,
        timeseries_panel(
            "Committed, read and true lag per flow",
            [target(f"sum by (flow, kind) ({one_replica(ALL_LAGS, LAG_LABELS)})", "{{flow}} {{kind}}")],
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


def throughput_row(L: Layout) -> None:
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
