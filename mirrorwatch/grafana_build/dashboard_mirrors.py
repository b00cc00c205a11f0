"""The dashboard's "Mirror and offset translation" row: what mirrors each flow (mirrorwatch's engine or
MirrorMaker 2, from ``mirrorwatch_flow_info{mirror}``), how many source groups could fail over to their
position (translation coverage), and each group's newest checkpoint age. Both engines export all three. On a
transactional target (exactly-once), the age of the oldest open transaction per target partition: a hanging one
hides everything behind it from read_committed readers while lag and RPO say 0."""

from __future__ import annotations

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import stat
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm

from .panels import F, Layout, stat_panel, target, timeseries_panel

# the dashboard's mirror variable filters flows by what mirrors them
FM = 'flow=~"$flow",mirror=~"$mirror"'


def mirror_row(L: Layout) -> None:
    L.row("Mirror and offset translation")
    L.add(
        6,
        6,
        stat.Panel()
        .title("What mirrors each flow")
        .description(
            "mirrorwatch = this project's engine; mm2 = Apache MirrorMaker 2 (its Connect offsets, offset syncs, "
            "checkpoints and heartbeats are read: docs/mirrormaker2.md)."
        )
        .targets([target(f"max by (flow, mirror) (mirrorwatch_flow_info{{{FM}}})", "{{flow}}: {{mirror}}")])
        .unit("none")
        .mappings([dm.ValueMap(options={"1": dm.ValueMappingResult(text="watched", color="blue")})])
        .color_mode(cm.BigValueColorMode.NONE)
        .graph_mode(cm.BigValueGraphMode.NONE)
        .text_mode(cm.BigValueTextMode.NAME)
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).fields("").values(False)),
    )
    L.add(
        6,
        6,
        stat_panel(
            "Translation coverage",
            [target(f"min by (flow) (mirrorwatch_translation_coverage_ratio{{{F}}})", "{{flow}}")],
            unit="percentunit",
            steps=((None, "orange"), (1, "green")),
            description=(
                "Of the source groups that committed on mirrored topics (the flow's checkpoint_groups), the share "
                "with a usable checkpoint on the target: they can fail over to their position. `monitor lag "
                "--flow <flow>` lists the others and why. Alert: below 100 % for 15m (warning)."
            ),
        ),
    )
    L.add(
        12,
        6,
        timeseries_panel(
            "Checkpoint age per group",
            [target(f"max by (flow, group) (mirrorwatch_checkpoint_age_seconds{{{F}}})", "{{flow}} {{group}}")],
            unit="s",
            description=(
                "Age of each source group's newest checkpoint on the target. MirrorMaker 2 writes one only when "
                "the group's offset moves, so an idle group's checkpoint grows old and is still current: not "
                "alerted on (the coverage counts a checkpoint as stale only when it is old and behind the commit)."
            ),
        ),
    )
    L.add(
        24,
        6,
        timeseries_panel(
            "Oldest open transaction on the target (transactional flows)",
            [target(f"max by (flow, topic) (mirrorwatch_open_transaction_seconds{{{F}}})", "{{flow}} {{topic}}")],
            unit="s",
            threshold=120,
            description=(
                "Exactly-once flows only (our engine's delivery: exactly_once, MM2 with exactly-once support): how "
                "long a target partition's last stable offset has stood below its end. A mirror's own transactions "
                "keep it under its transaction interval; past monitor.hanging_transaction_s (120 s by default, the "
                "line) the transaction is hanging: read_committed readers see nothing behind it although lag and "
                "RPO say 0. Alert MirrorwatchHangingTransaction names the partition and the kafka-transactions.sh "
                "commands (docs/runbooks/MirrorwatchHangingTransaction.md)."
            ),
        ),
    )
