"""Record types shared between the mirror, the canary and the monitor, with their wire formats.

Every record is compact JSON with a version field ``v``, so a newer writer's extra fields are ignored by an
older reader and a reader can refuse a version it does not know. Keys are chosen for compaction: the latest
record per key is the one that matters.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Self

if TYPE_CHECKING:
    import pyarrow

PROVENANCE_HEADER = "mw.origin"  # added by the mirror: the source cluster alias a record was mirrored from
CANARY_MARKER_HEADER = "mw.canary"


class RecordFormatError(ValueError):
    pass


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class _JsonRecord:
    VERSION: ClassVar[int] = 1

    def to_value(self) -> bytes:
        body = asdict(self)  # type: ignore[call-overload]
        body["v"] = self.VERSION
        return _dumps(body)

    @classmethod
    def from_value(cls, value: bytes | None) -> Self:
        if value is None:
            raise RecordFormatError(f"{cls.__name__}: empty record")
        try:
            body = json.loads(value)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RecordFormatError(f"{cls.__name__}: not JSON: {exc}") from None
        if not isinstance(body, dict) or body.get("v") != cls.VERSION:
            raise RecordFormatError(
                f"{cls.__name__}: unsupported version {body.get('v') if isinstance(body, dict) else '?'}"
            )
        try:
            return cls(**{f.name: body.get(f.name) for f in fields(cls)})  # type: ignore[arg-type]
        except TypeError as exc:
            raise RecordFormatError(f"{cls.__name__}: {exc}") from None


@dataclass(frozen=True, slots=True)
class OffsetSync(_JsonRecord):
    """The mirror's position for one source partition, written to the offset-syncs topic on the target.

    ``upstream_offset`` (a source offset) is known to be on the target at ``downstream_offset``.
    ``acked_next`` = last source offset the target acknowledged + 1 (``true_lag = source_end − acked_next``);
    ``read_position`` = the engine's next fetch offset (``read_lag = source_end − read_position``).
    Together they are the engine's published positions: the monitor reads them without scraping.
    """

    topic: str  # source topic
    partition: int
    upstream_offset: int
    downstream_offset: int
    acked_next: int
    read_position: int
    ts_ms: int

    @property
    def mapped(self) -> bool:
        """Whether it maps a source offset to a target one; upstream -1 is a position report only (the engine's
        positions before its first acknowledgement, and where it resumes a partition before sending any of it)."""
        return self.upstream_offset >= 0

    def key(self) -> bytes:
        return f"{self.topic}:{self.partition}".encode()


@dataclass(frozen=True, slots=True)
class Checkpoint(_JsonRecord):
    """A source consumer group's committed offset translated to the target (MM2's checkpoint)."""

    group: str
    topic: str  # source topic
    partition: int
    upstream_offset: int
    downstream_offset: int
    ts_ms: int
    max_duplicates: int | None = None  # records resuming at downstream_offset may re-deliver

    def key(self) -> bytes:
        return f"{self.group}:{self.topic}:{self.partition}".encode()


@dataclass(frozen=True, slots=True)
class Heartbeat(_JsonRecord):
    source: str
    target: str
    ts_ms: int

    def key(self) -> bytes:
        return f"{self.source}>{self.target}".encode()


@dataclass(frozen=True, slots=True)
class CanaryEvent(_JsonRecord):
    run_id: str
    seq: int
    produced_at_ms: int
    source: str
    partition: int


@dataclass(frozen=True, slots=True)
class LagSample:
    """One monitor sample for one mirrored (or watched) partition: a row of the lag history.

    ``None`` means unknown (e.g. no commit yet, or a plain consumer group that has no read position).
    """

    ts_ms: int  # sample time, ms since the epoch (UTC)
    flow: str  # flow name, or "" for a plain watched group
    source: str  # cluster alias the partition lives on
    target: str  # target cluster alias, or "" for a plain group
    group: str
    topic: str  # source topic
    partition: int
    source_end: int
    committed: int | None
    read_position: int | None
    acked_next: int | None
    target_end: int | None
    committed_lag: int | None
    read_lag: int | None
    true_lag: int | None
    time_lag_s: float | None
    status: str  # evaluator partition status: OK, WARN, STOP, STALL, REWIND, UNKNOWN
    # what mirrors the flow: "mirrorwatch" (this project's engine) or "mm2" (MirrorMaker 2); "" for a plain group
    mirror: str = ""


def lag_sample_arrow_schema() -> pyarrow.Schema:
    """The Parquet schema of the lag history (``history/lag/date=YYYY-MM-DD/*.parquet``)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("ts", pa.timestamp("ms", tz="UTC")),
            ("flow", pa.string()),
            ("source", pa.string()),
            ("target", pa.string()),
            ("group", pa.string()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("source_end", pa.int64()),
            ("committed", pa.int64()),
            ("read_position", pa.int64()),
            ("acked_next", pa.int64()),
            ("target_end", pa.int64()),
            ("committed_lag", pa.int64()),
            ("read_lag", pa.int64()),
            ("true_lag", pa.int64()),
            ("time_lag_s", pa.float64()),
            ("status", pa.string()),
            # added after the first release: files written before it lack the column and read as null
            ("mirror", pa.string()),
        ]
    )


# Lag history columns a file may lack (written by an older mirrorwatch); readers fill them with nulls.
OPTIONAL_HISTORY_COLUMNS = frozenset({"mirror"})
