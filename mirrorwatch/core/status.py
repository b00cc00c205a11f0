"""The status vocabulary: the only place status codes are written.

Burrow's partition and group statuses (the monitor's evaluator) and the canary's Nagios statuses, each an
``IntEnum`` whose value is the code the metrics contract exports (``mirrorwatch_partition_status``,
``mirrorwatch_group_status``, ``mirrorwatch_canary_status``; docs/metrics.md). The evaluator keeps codes in
numpy arrays; an ``IntEnum`` member is an ``int``, so it goes into and compares with those arrays as is.
Grafana's value mappings and the alert thresholds are generated from or checked against these enums
(tests/test_status_vocabulary.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used: `canary check --help` reads the statuses, not arrays
    import numpy as np


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
_ERROR_CODES = {int(c) for c in PARTITION_ERRORS}

# The least a partition is rated while a transaction on its target partition has been open longer than
# monitor.hanging_transaction_s (a hanging transaction), so its group is at least WARN. Not an error: the mirror
# keeps mirroring and the records are on the target, committed; read_committed readers just cannot see them until
# someone aborts the transaction (monitor/transactions.py).
HANGING_TRANSACTION = PartitionStatus.WARN

# A flow is "not moving" once its RPO or its heartbeats are older than this: the alert rules' threshold
# (flow:mirrorwatch_flow_stalled:bool in grafana/prometheus/mirrorwatch-rules.yml; tests/test_one_look.py checks the
# two agree), and what `monitor lag` calls STOP from one look (monitor/one_look.py).
NOT_MOVING_AFTER_S = 30.0

# Partition statuses from least to most severe, for folding several partitions into one exported series
# (monitor.series: topic or flow; mirrorwatch.monitor.series). A known error outranks UNKNOWN there, so that a
# topic's STOP is not hidden behind one unknown partition; the group rule below (UNKNOWN wins) answers another
# question: whether the whole group is known.
PARTITION_SEVERITY = (
    PartitionStatus.OK,
    PartitionStatus.WARN,
    PartitionStatus.UNKNOWN,
    PartitionStatus.STOP,
    PartitionStatus.STALL,
    PartitionStatus.REWIND,
    PartitionStatus.LOST,
)

# What each non-OK partition status means, said for someone who does not know Burrow's rules ("{who}": the mirror,
# or a watched group). The page, the API's reasons, the webhooks and `monitor lag` all say it in these words.
PARTITION_MEANING = {
    PartitionStatus.STOP: "{who} stopped committing while new records arrived",
    PartitionStatus.STALL: "{who} commits but its offset does not move",
    PartitionStatus.REWIND: "{who}'s committed offset went backwards",
    PartitionStatus.WARN: "lag is not going down",
    PartitionStatus.LOST: "records were removed from the source before {who} read them",
}
_REASON_ORDER = (
    PartitionStatus.LOST,
    PartitionStatus.REWIND,
    PartitionStatus.STOP,
    PartitionStatus.STALL,
    PartitionStatus.WARN,
)
_NAMED = 5  # partitions named per status line; the rest are counted


def partition_meaning(status: PartitionStatus, who: str = "the mirror") -> str:
    return PARTITION_MEANING[status].format(who=who)


def partition_status_reasons(
    codes: np.ndarray, topics: Sequence[str], partitions: Sequence[int], who: str = "the mirror"
) -> list[str]:
    """One line per non-OK partition status present, most severe first: how many partitions, what the status means,
    and which partitions (the first few). UNKNOWN is not among them: what made a partition unknown (an unreachable
    cluster, a judgement that could not be made) says its own reason."""
    import numpy as np

    lines = []
    for status in _REASON_ORDER:
        rows = np.flatnonzero(codes == status)
        if rows.size == 0:
            continue
        named = ", ".join(f"{topics[i]}-{partitions[i]}" for i in rows[:_NAMED])
        more = f" and {rows.size - _NAMED} more" if rows.size > _NAMED else ""
        plural = "s" if rows.size > 1 else ""
        lines.append(f"{rows.size} partition{plural} {status.name} ({partition_meaning(status, who)}): {named}{more}")
    return lines


# Names indexed by code, for code that turns numpy arrays of codes into words.
PARTITION_STATUS = tuple(s.name for s in PartitionStatus)
GROUP_STATUS = tuple(s.name for s in GroupStatus)


def codes_help(status: type[IntEnum]) -> str:
    """'0 OK, 1 WARN, ...': the HELP text of a status gauge."""
    return ", ".join(f"{s.value} {s.name}" for s in status)


def group_status_of(partition_codes: Iterable[int] | np.ndarray) -> GroupStatus:
    """Worst of the partitions; STOP/STALL/REWIND/LOST show as ERR at group level (Burrow), UNKNOWN wins over all.

    The one group rule: the evaluator's summary calls it with a cycle's whole status array (np.unique keeps that
    cheap at 100,000 partitions)."""
    import numpy as np

    codes = partition_codes if isinstance(partition_codes, np.ndarray) else np.fromiter(partition_codes, np.int64)
    present = {int(c) for c in np.unique(codes)}
    if PartitionStatus.UNKNOWN in present:
        return GroupStatus.UNKNOWN
    if present & _ERROR_CODES:
        return GroupStatus.ERR
    if PartitionStatus.WARN in present:
        return GroupStatus.WARN
    return GroupStatus.OK
