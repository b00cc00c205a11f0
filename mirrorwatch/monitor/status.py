"""Status vocabulary (Burrow's) and the numeric codes the metrics contract (docs/metrics.md) uses."""

from __future__ import annotations

# Partition status codes, as exported by mirrorwatch_partition_status.
P_OK, P_WARN, P_STOP, P_STALL, P_REWIND, P_UNKNOWN = range(6)
PARTITION_STATUS = ("OK", "WARN", "STOP", "STALL", "REWIND", "UNKNOWN")

# Group status codes, as exported by mirrorwatch_group_status.
G_OK, G_WARN, G_ERR, G_STOP, G_STALL, G_REWIND, G_NOTFOUND, G_UNKNOWN = range(8)
GROUP_STATUS = ("OK", "WARN", "ERR", "STOP", "STALL", "REWIND", "NOTFOUND", "UNKNOWN")


def group_status_of(partition_codes) -> int:
    """Worst of the partitions; STOP/STALL/REWIND show as ERR at group level (Burrow), UNKNOWN wins over all."""
    worst = G_OK
    for code in partition_codes:
        if code == P_UNKNOWN:
            return G_UNKNOWN
        if code in (P_STOP, P_STALL, P_REWIND):
            worst = G_ERR
        elif code == P_WARN and worst == G_OK:
            worst = G_WARN
    return worst
