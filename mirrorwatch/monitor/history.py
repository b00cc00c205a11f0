"""Lag history: every sample appended as LagSample rows to Parquet, and a reader that survives bad files.

Layout: ``<history_dir>/lag/date=YYYY-MM-DD/part-<start>-<pid>.parquet`` (UTC dates; Spark and pyarrow read
``date`` as a partition column). A file is written under a hidden name (``.part-….parquet.inprogress``,
which Spark, pyarrow datasets and the reader here all ignore) and renamed when it is closed — every
``history_roll_s`` (≤ 1 h), at a date change, and on shutdown — so readers only ever see complete files.
Each cycle is one row group. The schema is :func:`mirrorwatch.core.records.lag_sample_arrow_schema`.
"""

from __future__ import annotations

import glob
import logging
import os
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.records import LagSample, lag_sample_arrow_schema
from ..core.status import PARTITION_STATUS, GroupStatus, PartitionStatus
from .model import Snapshot

log = logging.getLogger("mirrorwatch.monitor.history")

COLUMNS = [f.name for f in lag_sample_arrow_schema()]


def samples_table(samples: list[LagSample]) -> pa.Table:
    schema = lag_sample_arrow_schema()
    cols: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    for s in samples:
        for name in COLUMNS:
            cols[name].append(s.ts_ms if name == "ts" else getattr(s, name))
    return pa.Table.from_pydict(cols, schema=schema)


def snapshot_table(snap: Snapshot) -> pa.Table:
    """History rows of a snapshot, built from the views' arrays (no per-row objects).

    Views the monitor could not sample (UNKNOWN, NOTFOUND) and partitions whose source end offset could not
    be read add no rows: the gap in the history is the record of the outage. The columns are made from the arrays'
    buffers (the helpers below), not with ``pa.array``: that imports pandas whenever it is installed (~50 MB that
    the monitor would hold for good; pyarrow looks for pandas objects), and the monitor builds a table every cycle.
    """
    schema = lag_sample_arrow_schema()
    parts = []
    for v in snap.views:
        if v.source_end is None or v.group_status in (GroupStatus.UNKNOWN, GroupStatus.NOTFOUND):
            continue
        keep = v.source_end >= 0
        n = int(keep.sum())
        if not n:
            continue

        def ints(arr: np.ndarray | None, keep: np.ndarray = keep, n: int = n) -> pa.Array:
            return pa.nulls(n, pa.int64()) if arr is None else _int64_column(arr[keep])

        time_lag = v.time_lag_s[keep] if v.time_lag_s is not None else None
        cols = {
            "ts": _fixed_column(schema.field("ts").type, np.full(n, v.ts_ms, np.int64)),
            "flow": _repeated_string(v.flow, n),
            "source": _repeated_string(v.cluster, n),
            "target": _repeated_string(v.target, n),
            "group": _repeated_string(v.group, n),
            "topic": _string_column([t for t, k in zip(v.topics, keep) if k]),
            "partition": _fixed_column(pa.int32(), np.asarray(v.partitions, np.int32)[keep]),
            "source_end": ints(v.source_end),
            "committed": ints(v.committed),
            "read_position": ints(v.read_position),
            "acked_next": ints(v.acked_next),
            "target_end": ints(v.target_end),
            "committed_lag": ints(v.committed_lag),
            "read_lag": ints(v.read_lag),
            "true_lag": ints(v.true_lag),
            "time_lag_s": pa.nulls(n, pa.float64())
            if time_lag is None
            else _fixed_column(pa.float64(), np.asarray(time_lag, np.float64), valid=~np.isnan(time_lag)),
            # a view without partition statuses reads UNKNOWN, as its API rows do (model.py)
            "status": _string_column([PARTITION_STATUS[code] for code in v.status[keep]])
            if v.status is not None
            else _repeated_string(PartitionStatus.UNKNOWN.name, n),
            "mirror": _repeated_string(v.engine if v.kind == "mirror" else "", n),
        }
        parts.append(pa.Table.from_arrays([cols[name] for name in COLUMNS], schema=schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _fixed_column(kind: pa.DataType, values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A column of a fixed-width type from a numpy array of the same width; null where ``valid`` is False."""
    data = np.ascontiguousarray(values)
    if data.dtype.itemsize != kind.byte_width:
        raise TypeError(f"{data.dtype} values for a {kind} column")
    bitmap = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(kind, len(data), [bitmap, pa.py_buffer(data)])


def _int64_column(values: np.ndarray) -> pa.Array:
    """int64, null where negative (the views' "unknown")."""
    return _fixed_column(pa.int64(), np.asarray(values, np.int64), valid=values >= 0)


def _string_column(texts: list[str]) -> pa.Array:
    encoded = [t.encode() for t in texts]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return pa.Array.from_buffers(
        pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


def _repeated_string(text: str, n: int) -> pa.Array:
    return _string_column([text] * n)


class HistoryWriter:
    def __init__(
        self, history_dir: str | os.PathLike[str], roll_s: float = 3600.0, clock: Callable[[], float] = time.time
    ):
        self.root = Path(history_dir) / "lag"
        self.roll_s, self._clock = roll_s, clock
        self._writer: pq.ParquetWriter | None = None
        self._tmp: Path | None = None
        self._final: Path | None = None
        self._opened_at = 0.0
        self._date: str | None = None
        self.rows_written = 0
        self.files_closed: list[Path] = []

    def append(self, rows: list[LagSample] | pa.Table) -> None:
        table = rows if isinstance(rows, pa.Table) else samples_table(rows)
        if not table.num_rows:
            self.roll_if_due()
            return
        now = self._clock()
        date = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d")
        if self._writer is not None and (date != self._date or now - self._opened_at >= self.roll_s):
            self.close()
        writer = self._writer if self._writer is not None else self._open(now, date)
        writer.write_table(table)
        self.rows_written += table.num_rows

    def roll_if_due(self) -> None:
        """Close the current file if its time is up even when no samples arrive (a quiet or stopped monitor)."""
        if self._writer is not None and self._clock() - self._opened_at >= self.roll_s:
            self.close()

    def _open(self, now: float, date: str) -> pq.ParquetWriter:
        folder = self.root / f"date={date}"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp(now, UTC).strftime("%H%M%S%f")
        name = f"part-{stamp}-{os.getpid()}.parquet"
        self._final, self._tmp = folder / name, folder / f".{name}.inprogress"
        self._writer = pq.ParquetWriter(self._tmp, lag_sample_arrow_schema(), compression="zstd")
        self._opened_at, self._date = now, date
        return self._writer

    def close(self) -> None:
        if self._writer is None or self._tmp is None or self._final is None:
            return
        self._writer.close()
        os.replace(self._tmp, self._final)
        self.files_closed.append(self._final)
        log.info("history: closed %s", self._final)
        self._writer = self._tmp = self._final = None


def history_files(history_dir: str | os.PathLike[str]) -> list[str]:
    root = Path(history_dir) / "lag"
    return sorted(glob.glob(str(root / "date=*" / "*.parquet")))  # hidden in-progress files don't match


def read_history(history_dir: str | os.PathLike[str], files: Iterable[str] | None = None) -> pa.Table:
    """All complete history files as one table (with the schema's columns); a truncated or corrupt file is
    skipped with a warning that names it."""
    tables = []
    for path in files if files is not None else history_files(history_dir):
        try:
            table = pq.read_table(path, schema=lag_sample_arrow_schema())
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError variants for damaged files
            log.warning("history: skipping unreadable file %s: %s", path, exc)
            continue
        tables.append(table)
    if not tables:
        return lag_sample_arrow_schema().empty_table()
    return pa.concat_tables(tables)
