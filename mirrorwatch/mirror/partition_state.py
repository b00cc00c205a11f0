"""One assignment of one source partition in the mirror engine: its positions, its in-flight FIFO, and the
delivery-report callback its records carry (the engine's module note says why each assignment has its own).
Where ``acked_next`` lands is the acknowledgement rule's (``acknowledgement.py``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from confluent_kafka import KafkaError, Message

from .acknowledgement import acknowledged_next, commit_position, lowest_failure

if TYPE_CHECKING:
    from .engine_state import EngineState

# a header as the client hands it over and takes it back: (name, value)
Header = tuple[str, str | bytes | None]


class ConsumedRecord(Protocol):
    """A record as the data path reads what ``consume()`` returned. The engine reads its topic, partition and
    offset only when ``error()`` is None, and librdkafka always sets them then: the stubs' ``Optional`` is for
    error events (and produced messages), which the data path looks no further into than their error."""

    def error(self) -> KafkaError | None: ...
    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[Header] | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def __len__(self) -> int: ...


# a report due: (source offset, records sent through it, key+value bytes sent through it, the consumed batch,
# the batch indexes of the first and last record the report acknowledges)
FifoEntry = tuple[int, int, int, Sequence[ConsumedRecord], int, int]


class PartitionState:
    """One assignment of one source partition. Records sent under it report back to its ``delivered``."""

    __slots__ = (
        "key",
        "engine",
        "read_next",
        "acked_next",
        "committed",
        "fifo",
        "sent_records",
        "sent_bytes",
        "records",
        "bytes",
        "last_upstream",
        "last_downstream",
        "failed_at",
        "synced_acked",
        "synced_read",
        "next_sync_at",
        "round_msg",
        "round_entry",
        "unmarked",
        "sync_mark",
        "txn_position",
        "txn_claim",
    )

    def __init__(self, key: tuple[str, int], engine: EngineState) -> None:
        self.key = key
        self.engine = engine
        self.read_next: int | None = None  # next source offset to fetch
        self.acked_next: int | None = None  # last source offset acknowledged by the target + 1
        self.committed: int | None = None  # last offset committed for the mirror group
        self.txn_position: int | None = None  # exactly-once: the position committed on the target
        self.txn_claim: str | None = None  # ... and the claim it carries in its metadata (hanging.py)
        # reports due, in send order: (source offset, records sent through it, key+value bytes sent through it,
        # the consumed batch, the batch indexes of the first and last record the report acknowledges). Only some
        # records carry a report (engine._send says which); the batch is kept to name a refused record.
        self.fifo: deque[FifoEntry] = deque()
        self.unmarked = 0  # records sent after the newest one that carries a report: in flight, not in the FIFO
        self.sync_mark = 1  # the record count whose record carries a report for an offset sync (send side)
        self.sent_records = 0
        self.sent_bytes = 0
        self.records = 0  # acknowledged by the target
        self.bytes = 0
        self.last_upstream = -1  # newest acknowledged source offset ...
        self.last_downstream = -1  # ... and its offset on the target
        self.failed_at: int | None = None  # a record here could not be written: never commit past it
        self.synced_acked: int | None = None  # acked_next at the last offset sync
        self.synced_read: int | None = None
        # an offset sync when the report of this many records' last one arrives. The first record of an
        # assignment gets one at once: records re-sent after a restart or rebalance sit on the target after the
        # newest sync's downstream offset only as long as no sync maps past them (the monitor's target-side
        # estimate counts the target records after that offset as distinct source records)
        self.next_sync_at = 1
        # the newest report of this poll round, settled by the engine's _finish_round
        self.round_msg: Message | None = None
        self.round_entry: FifoEntry | None = None

    def delivered(self, err: KafkaError | None, msg: Message) -> None:
        # hot path: one call per report (a run of records). Reports come in send order per partition (idempotent
        # producer); a successful one means every record sent before it in this partition is written too.
        entry = self.fifo.popleft()
        if err is not None:
            self.engine._segment_failed(self, entry, err, msg)
            return
        if self.round_msg is None:
            self.engine.touched.append(self)
        self.round_msg = msg
        self.round_entry = entry
        if entry[1] >= self.next_sync_at:  # exactly every N records, mid-round: checkpoint translation needs them dense
            self.engine._sync_due(self, entry, msg)

    def acknowledged(self, source_offset: int, downstream_offset: int | None) -> None:
        """The target acknowledged everything sent through ``source_offset`` (``downstream_offset`` there: a
        report's ``offset()``, which the client leaves None only when the broker returned none, unknown as -1)."""
        self.last_upstream = source_offset
        self.last_downstream = -1 if downstream_offset is None else downstream_offset
        self.acked_next = acknowledged_next(
            source_offset, bool(self.fifo) or self.unmarked > 0, self.read_next, self.acked_next, self.failed_at
        ).acked_next

    def failed(self, source_offset: int) -> None:
        """A record here could not be written: commits and syncs stop below it."""
        self.failed_at = lowest_failure(self.failed_at, source_offset)

    def commit_position(self) -> int | None:
        """The offset to commit: what the target acknowledged, never past a record that failed."""
        return None if self.acked_next is None else commit_position(self.acked_next, self.failed_at)
