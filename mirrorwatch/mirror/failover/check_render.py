"""``mirror failover check``'s human output, from its JSON report (``check.judge``): nothing is computed here."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def print_human(report: dict[str, Any]) -> None:
    console = Console()
    age = report["heartbeat_age_s"]
    console.print(
        f"failover {report['source']} → {report['target']} (flow {report['flow']}): heartbeat "
        f"{'none' if age is None else f'{age:.1f} s ago'}, canary {report['canary']}"
    )
    topic_table = Table(title="if the source vanished now")
    # one name per figure, as in the JSON: true lag (what a failover now would leave behind), RPO seconds, and
    # records lost (removed from the source before they were mirrored: gone whatever anyone does)
    for h in ("topic", "target topic", "true lag", "RPO s", "records lost"):
        topic_table.add_column(h)
    for t in report["topics"]:
        topic_table.add_row(
            t["topic"],
            t["target_topic"],
            str(t["true_lag"]),
            "?" if t["time_lag_s"] is None else f"{t['time_lag_s']:.1f}",
            str(t["records_lost"]),
        )
    console.print(topic_table)
    if report["records_lost"]:
        console.print(
            f"{report['records_lost']} record(s) were removed from the source before they were mirrored "
            "(retention, DeleteRecords or a recreated topic): they are on neither cluster"
        )
    group_table = Table(title="consumer groups")
    for h in ("group", "verdict", "true lag", "re-delivered", "checkpoints", "why"):
        group_table.add_column(h)
    for g in report["groups"]:
        group_table.add_row(
            g["group"],
            g["verdict"],
            str(g["true_lag"]),
            str(g["duplicates"]),
            f"{g['partitions'] - g['missing_checkpoints']}/{g['partitions']}",
            "; ".join(g["reasons"]) or "-",
        )
    console.print(group_table)
    if not report["groups"]:
        console.print("no consumer groups to judge (none given, none match checkpoint_groups)")
        return
    coverage = report["coverage"]
    console.print(
        f"translation coverage: {coverage['translated']}/{coverage['groups']} groups have a usable checkpoint"
        + "".join(f"\n  {u['group']}: {u['reason']}" for u in coverage["untranslated"])
        + "".join(f"\n  {u['group']} (approximate): {u['reason']}" for u in coverage["approximate"])
    )
