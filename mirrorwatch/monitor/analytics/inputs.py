"""Finding and checking the history's Parquet files before Spark reads them.

Spark's ``ignoreCorruptFiles`` skips bad files without naming them, so each file is checked here first and
every skipped one is named in a warning:
- every URI (local or remote, through Hadoop FS): the file must start and end with the Parquet magic ``PAR1``
  and its footer length must fit in the file — this catches truncated and half-written files cheaply, reading
  12 bytes per file;
- local files (``file:`` or plain paths) additionally have their whole footer parsed by pyarrow and their
  columns compared with the history schema.
Corruption inside data pages of a remote file is not visible in the footer; for those, Spark's
``ignoreCorruptFiles`` stays on as a last resort (it skips without naming the file).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ...core.records import OPTIONAL_HISTORY_COLUMNS, lag_sample_arrow_schema
from .hadoopfs import HadoopFS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MAGIC = b"PAR1"
# Spark's shuffle partitions per byte of history read. ``monitor analyze`` starts with 4 (right for the hours a
# scheduled run reads), but a task holds its shuffle partition's samples in the per-series windows and the cached
# derived columns: with 4, a cold run over 50 M samples (12.5 M a task) failed 2 GiB executors. 32 MB is 1 to 3 M
# samples (the monitor writes ~20 bytes a sample, compaction ~10), what 4 partitions held at 10 M. Not the whole
# answer: adaptive execution coalesces partitions back to ~64 MB of shuffle data, and that 50 M-sample run still
# failed (BENCHMARKS.md, the standalone cluster's section).
HISTORY_BYTES_PER_SHUFFLE_PARTITION = 32 * 1024 * 1024


class HistoryUnavailable(Exception):
    """The history path is missing or holds no usable samples."""


@dataclass
class HistoryFiles:
    good: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (uri, reason)
    read_bytes: float = 0.0  # of the good files, what falls in the period (``day_share``)


def lag_root(history_uri: str) -> str:
    return history_uri.rstrip("/") + "/lag"


def local_path(uri: str) -> str | None:
    """The local filesystem path of a ``file:`` or scheme-less URI, else None."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return parsed.path if parsed.scheme else uri
    return None


def date_of(uri: str) -> date | None:
    for part in uri.split("/"):
        if part.startswith("date="):
            try:
                return date.fromisoformat(part[5:])
            except ValueError:
                return None
    return None


def within_period(uri: str, start: datetime | None, end: datetime | None) -> bool:
    """Prune by the ``date=`` folder; a file without one is always read (rows are filtered by ts anyway)."""
    day = date_of(uri)
    if day is None:
        return True
    return (start is None or day >= start.date()) and (end is None or day <= end.date())


def day_share(uri: str, start: datetime | None, end: datetime | None) -> float:
    """The share of the file's UTC day (its ``date=`` folder) inside [start, end): the part of the file a run reads,
    taking its samples as spread over the day. 1 for a file without a date folder."""
    day = date_of(uri)
    if day is None:
        return 1.0
    day_start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    day_end = day_start + timedelta(days=1)
    low = max(day_start, start) if start is not None else day_start
    high = min(day_end, end) if end is not None else day_end
    return max(0.0, (high - low) / timedelta(days=1))


def shuffle_partitions(configured: int, read_bytes: float) -> int:
    """The configured count, or one per ``HISTORY_BYTES_PER_SHUFFLE_PARTITION`` of history read if that is more."""
    return max(configured, math.ceil(read_bytes / HISTORY_BYTES_PER_SHUFFLE_PARTITION))


def footer_problem(head: bytes, tail: bytes, length: int) -> str | None:
    """Why a file is not a complete Parquet file, from its first 4 and last 8 bytes; None if it looks whole."""
    if length < 12:
        return f"too short for Parquet ({length} bytes)"
    if head != MAGIC:
        return "no Parquet magic at the start"
    if tail[4:] != MAGIC:
        return "no Parquet magic at the end (truncated or still being written?)"
    footer_len = struct.unpack("<I", tail[:4])[0]
    if footer_len + 12 > length:
        return f"footer length {footer_len} exceeds the file ({length} bytes)"
    return None


def local_footer_problem(path: str) -> str | None:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for damaged footers
        return f"unreadable footer: {exc}"
    expected = lag_sample_arrow_schema()
    missing = [f.name for f in expected if f.name not in schema.names and f.name not in OPTIONAL_HISTORY_COLUMNS]
    if missing:
        return f"not a lag history file (missing columns: {', '.join(missing)})"
    return None


def find_history_files(
    spark: SparkSession, history_uri: str, start: datetime | None = None, end: datetime | None = None
) -> HistoryFiles:
    fs = HadoopFS(spark)
    root = lag_root(history_uri)
    if not fs.exists(history_uri):
        raise HistoryUnavailable(f"history not found: {history_uri}")
    if not fs.exists(root):
        raise HistoryUnavailable(f"no lag history under {history_uri} (expected {root}/date=YYYY-MM-DD/*.parquet)")
    result = HistoryFiles()
    for f in fs.list_files(root):
        name = f.uri.rsplit("/", 1)[-1]
        if not name.endswith(".parquet") or name.startswith((".", "_")) or not within_period(f.uri, start, end):
            continue
        problem = None
        if f.length >= 12:
            problem = footer_problem(fs.read_range(f.uri, 0, 4), fs.read_range(f.uri, f.length - 8, 8), f.length)
        else:
            problem = footer_problem(b"", b"", f.length)
        local = local_path(f.uri)
        if problem is None and local is not None:
            problem = local_footer_problem(local)
        if problem:
            result.skipped.append((f.uri, problem))
        else:
            result.good.append(f.uri)
            result.read_bytes += f.length * day_share(f.uri, start, end)
    return result
