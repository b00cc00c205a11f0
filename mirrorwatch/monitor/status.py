"""Status vocabulary (Burrow's) and the numeric codes the metrics contract (docs/metrics.md) uses."""

from __future__ import annotations

# Partition status codes, as exported by mirrorwatch_partition_status.
# LOST: the group's committed offset is below the source log start — records were removed (retention,
# DeleteRecords, a recreated topic) before the group consumed them. An error whatever the evaluator says.
P_OK, P_WARN, P_STOP, P_STALL, P_REWIND, P_UNKNOWN, P_LOST = range(7)
PARTITION_STATUS = ("OK", "WARN", "STOP", "STALL", "REWIND", "UNKNOWN", "LOST")

# Group status codes, as exported by mirrorwatch_group_status.
G_OK, G_WARN, G_ERR, G_STOP, G_STALL, G_REWIND, G_NOTFOUND, G_UNKNOWN = range(8)
GROUP_STATUS = ("OK", "WARN", "ERR", "STOP", "STALL", "REWIND", "NOTFOUND", "UNKNOWN")


def group_status_of(partition_codes) -> int:
    """Worst of the partitions; STOP/STALL/REWIND show as ERR at group level (Burrow), UNKNOWN wins over all."""
    worst = G_OK
    for code in partition_codes:
        if code == P_UNKNOWN:
            return G_UNKNOWN
        if code in (P_STOP, P_STALL, P_REWIND, P_LOST):
            worst = G_ERR
        elif code == P_WARN and worst == G_OK:
            worst = G_WARN
    return worst
