"""When the data loop commits (the rule is pure; ``source_backlog`` reads the client's cache): at-least-once, every ``commit_interval_s``; exactly-once, as soon as the
reader has caught up with the source and ``transaction_min_interval_s`` has passed since the last commit ended,
and at the latest every ``transaction_interval_s`` while records keep coming.

Why a transaction does not simply commit on a timer: a ``read_committed`` reader sees a record only once its
transaction commits, so a fixed 0.1 s timer added on average half of it plus the commit to every record's latency,
at any rate. Committing when the reader has caught up (its last read took less than a full batch: nothing more is
waiting in the client) makes a transaction's length follow the load: at moderate rates a round lasts about one
commit, and the records that arrive during a commit go into the next one; under a backlog (the reads come back full,
or the source holds a batch or more past what was read) the rounds last the longest interval, where the commit's
pause costs least throughput (docs/design.md, "An exactly-once transaction commits when the reader has caught up").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaException, TopicPartition

from .partition_state import PartitionState

UNKNOWN_BACKLOG = 2**62  # the client could not say: as if the source held more than any batch


@dataclass(frozen=True)
class CommitRounds:
    longest_s: float  # records keep coming: commit at least this often
    shortest_s: float  # the least time from the end of one commit to the start of the next
    when_caught_up: bool  # exactly-once: commit early once the reader has caught up

    def due(
        self, since_commit_s: float, records_open: bool, read: int | None, batch: int, backlog: Callable[[], int]
    ) -> bool:
        """``since_commit_s``: seconds since the last commit ended; ``records_open``: the open round holds records;
        ``read``: records the last read returned (None: no read, the loop waited for acknowledgements);
        ``backlog()``: records the source held past what was read, as of the client's last fetch (asked last, only
        when the rest says commit: a read can come back short while the client is still fetching a backlog)."""
        if since_commit_s >= self.longest_s:
            return True
        if not (self.when_caught_up and records_open and since_commit_s >= self.shortest_s):
            return False
        return read is not None and read < batch and backlog() < batch


def source_backlog(consumer: Consumer, partitions: Mapping[tuple[str, int], PartitionState]) -> int:
    """Records the source held past what was read, over the owned partitions, as of the client's last fetch of each
    (its cached high watermark: no request). A partition not read yet, or not fetched yet, counts nothing; one the
    client cannot say anything about counts as a backlog without end (the round then lasts its longest)."""
    backlog = 0
    for (topic, partition), state in partitions.items():
        if state.read_next is None:
            continue
        try:
            high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        except KafkaException:
            return UNKNOWN_BACKLOG
        if high is not None and high[1] >= 0:
            backlog += max(0, high[1] - state.read_next)
    return backlog
