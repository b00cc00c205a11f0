"""The status vocabulary: the only place status codes are written.

Burrow's partition and group statuses (the monitor's evaluator) and the canary's Nagios statuses, each an
``IntEnum`` whose value is the code the metrics contract exports (``mirrorwatch_partition_status``,
``mirrorwatch_group_status``, ``mirrorwatch_canary_status``; docs/metrics.md). The evaluator keeps codes in
numpy arrays; an ``IntEnum`` member is an ``int``, so it goes into and compares with those arrays as is.
Grafana's value mappings and the alert thresholds are generated from or checked against these enums
(tests/test_status_vocabulary.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class PartitionStatus(IntEnum):
    """One partition of a consumer group, as the evaluator rates it (Burrow's partition statuses)."""

    OK = 0
    WARN = 1
    STOP = 2
    STALL = 3
    REWIND = 4
    UNKNOWN = 5
    # The group's committed offset is below the source log start: records were removed (retention,
    # DeleteRecords, a recreated topic) before the group consumed them. An error whatever the evaluator says.
    LOST = 6


class GroupStatus(IntEnum):
    """A consumer group: the worst of its partitions (Burrow's group statuses)."""

    OK = 0
    WARN = 1
    ERR = 2
    STOP = 3
    STALL = 4
    REWIND = 5
    NOTFOUND = 6
    UNKNOWN = 7


class CanaryStatus(IntEnum):
    """The canary's verdict; the value is also the Nagios exit code of ``canary check``."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


# Partition statuses that make a group ERR (Burrow shows a stopped, stalled or rewound partition as ERR;
# records lost to the log start are an error too).
PARTITION_ERRORS = (PartitionStatus.STOP, PartitionStatus.STALL, PartitionStatus.REWIND, PartitionStatus.LOST)
# Group statuses the MirrorGroupNotOK alert fires on (ERR through REWIND; not NOTFOUND, not UNKNOWN).
GROUP_ALERTING = (GroupStatus.ERR, GroupStatus.STOP, GroupStatus.STALL, GroupStatus.REWIND)

# Names indexed by code, for code that turns numpy arrays of codes into words.
PARTITION_STATUS = tuple(s.name for s in PartitionStatus)
GROUP_STATUS = tuple(s.name for s in GroupStatus)


def codes_help(status: type[IntEnum]) -> str:
    """'0 OK, 1 WARN, ...': the HELP text of a status gauge."""
    return ", ".join(f"{s.value} {s.name}" for s in status)


def group_status_of(partition_codes: Iterable[int]) -> GroupStatus:
    """Worst of the partitions; STOP/STALL/REWIND show as ERR at group level (Burrow), UNKNOWN wins over all."""
    worst = GroupStatus.OK
    for code in partition_codes:
        if code == PartitionStatus.UNKNOWN:
            return GroupStatus.UNKNOWN
        if code in PARTITION_ERRORS:
            worst = GroupStatus.ERR
        elif code == PartitionStatus.WARN and worst == GroupStatus.OK:
            worst = GroupStatus.WARN
    return worst
