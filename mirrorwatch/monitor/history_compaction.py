"""History that stays small: compaction of the raw samples, minute roll-ups, and expiry (issue 38).

The monitor writes ``<history>/lag/date=D/part-*.parquet`` as it samples: one row group per cycle, rows in cycle
order, which compresses poorly (each column jumps from partition to partition). The scheduled job (on the leader,
before the Spark run: ``analytics_runs``) calls :func:`compact_history`, which for every closed raw file:

1. writes its **minute roll-up** to ``<history>/rollup/date=D/<stem>.parquet``: one row per partition and UTC
   minute, with the minute's sample count, the min / max / last known value of each figure (``ROLLUP_FIGURES``)
   and the worst status (``core.status.PARTITION_SEVERITY``);
2. rewrites it as ``compact-<stem>.parquet`` beside it in the raw layout (``write_raw``): sorted by series and
   time, integers delta-encoded, strings and ``time_lag_s`` dictionary-encoded, zstd, row groups of up to
   ``RAW_ROW_GROUP`` rows with min/max statistics (the job filters on ``ts``; the sort makes a row group's ts
   range and series range narrow);
3. deletes the original.

Each step is written under a hidden name and renamed, so a reader never sees half a file; a run that dies between
2 and 3 leaves both, and the next run deletes the original (its compacted twin is complete). Then **expiry**:
a raw ``date=`` folder goes once its whole day is more than ``raw_days`` old (only if none of its files is still
waiting for its roll-up: fail closed), a roll-up folder once its day is more than ``rollup_days`` old.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..core.records import lag_sample_arrow_schema
from ..core.status import PARTITION_SEVERITY

SERIES = ["flow", "source", "target", "group", "topic", "partition"]
ROLLUP_FIGURES = ("true_lag", "committed_lag", "read_lag", "time_lag_s")
RAW_ROW_GROUP = 1 << 20
COMPACT_PREFIX = "compact-"
_SEVERITY = pa.array([s.name for s in PARTITION_SEVERITY], pa.string())


def _write(table: pa.Table, path: Path) -> None:
    """``table`` in the history's layout, under a hidden name first (readers skip it) and then renamed."""
    strings = [f.name for f in table.schema if pa.types.is_string(f.type)]
    delta = [
        f.name
        for f in table.schema
        if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type)
        if f.name != "partition"  # constant over long runs: dictionary + RLE is smaller
    ]
    tmp = path.parent / f".{path.name}.inprogress"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table,
        tmp,
        compression="zstd",
        compression_level=9,
        row_group_size=RAW_ROW_GROUP,
        use_dictionary=[*strings, *[c for c in table.column_names if c == "partition" or c.startswith("time_lag_s")]],
        column_encoding={c: "DELTA_BINARY_PACKED" for c in delta},
        write_statistics=True,
    )
    os.replace(tmp, path)


def write_raw(table: pa.Table, path: Path) -> None:
    """Raw samples in the compact layout: sorted by series and time (see the module docstring)."""
    _write(table.sort_by([(k, "ascending") for k in [*SERIES, "ts"]]), path)


def minute_rollup(raw: pa.Table) -> pa.Table:
    """One row per series and UTC minute: ``samples``, ``<figure>_min/_max/_last`` (over known values; null when
    none was known), the worst ``status`` and the last non-empty ``mirror``."""
    ordered = raw.sort_by([(k, "ascending") for k in [*SERIES, "ts"]])
    minute = pc.floor_temporal(ordered["ts"], unit="minute")
    rank = pc.index_in(ordered["status"], value_set=_SEVERITY)
    mirror = pc.if_else(pc.equal(ordered["mirror"], ""), pa.scalar(None, pa.string()), ordered["mirror"])
    work = ordered.select([*SERIES, *ROLLUP_FIGURES]).append_column("minute", minute)
    work = work.append_column("rank", rank).append_column("mirror", mirror).append_column("ts", ordered["ts"])
    aggs: list[tuple[str, str]] = [("ts", "count")]
    for figure in ROLLUP_FIGURES:
        aggs += [(figure, "min"), (figure, "max"), (figure, "last")]
    aggs += [("rank", "max"), ("mirror", "last")]
    # ordered aggregations ("last") need one thread: the rows are then seen in the sorted order
    g = work.group_by([*SERIES, "minute"], use_threads=False).aggregate(aggs)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {k: g[k] for k in SERIES}
    columns["mirror"] = pc.fill_null(g["mirror_last"], "")
    columns["minute"] = g["minute"]
    columns["samples"] = g["ts_count"].cast(pa.int32())
    for figure in ROLLUP_FIGURES:
        for agg in ("min", "max", "last"):
            columns[f"{figure}_{agg}"] = g[f"{figure}_{agg}"]
    columns["status"] = pc.take(_SEVERITY, g["rank_max"])
    table = pa.table(columns)
    return table.sort_by([(k, "ascending") for k in [*SERIES, "minute"]])


@dataclass
class CompactionReport:
    compacted: list[str] = field(default_factory=list)  # raw files rewritten (and rolled up)
    finished: list[str] = field(default_factory=list)  # originals of an interrupted run, deleted
    expired_raw: list[str] = field(default_factory=list)  # date= folders
    expired_rollup: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # expired raw folders kept: a file there is not rolled up
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # raw files that could not be compacted: why

    def lines(self) -> list[str]:
        said = [
            f"history: compacted {len(self.compacted)} raw file(s), expired {len(self.expired_raw)} raw and "
            f"{len(self.expired_rollup)} roll-up day(s)"
        ]
        said += [f"history: warning: cannot compact {path}, left as it is: {why}" for path, why in self.unreadable]
        said += [
            f"history: warning: kept {folder} past history.raw_days: a file there is not rolled up"
            for folder in self.kept
        ]
        return said


def _day_of(folder: Path) -> date | None:
    try:
        return date.fromisoformat(folder.name.removeprefix("date="))
    except ValueError:
        return None


def compact_file(source: Path, rollup_root: Path) -> None:
    """Roll up one closed raw file, rewrite it in the compact layout, delete it (in that order)."""
    raw = pq.read_table(source, schema=lag_sample_arrow_schema())
    _write(minute_rollup(raw), rollup_root / source.parent.name / source.name)
    write_raw(raw, source.parent / f"{COMPACT_PREFIX}{source.name}")
    source.unlink()


def compact_history(
    history_dir: str | os.PathLike[str], now: datetime, raw_days: float, rollup_days: float
) -> CompactionReport:
    """Compact every closed raw file, then expire what is past its days. A raw file that cannot be read or
    rewritten is left as it is and named in the report; its day is then never expired (fail closed)."""
    root = Path(history_dir)
    lag, rollup = root / "lag", root / "rollup"
    report = CompactionReport()
    for folder in sorted(lag.glob("date=*")):
        for source in sorted(folder.glob("*.parquet")):
            if source.name.startswith((".", "_", COMPACT_PREFIX)):
                continue
            if (folder / f"{COMPACT_PREFIX}{source.name}").exists():
                source.unlink()  # compacted by a run that died before deleting the original
                report.finished.append(str(source))
                continue
            try:
                compact_file(source, rollup)
            except (OSError, pa.ArrowInvalid) as exc:  # a damaged file stays as it is, and so does its day
                report.unreadable.append((str(source), str(exc).splitlines()[0][:200]))
                continue
            report.compacted.append(str(source))
    _expire(lag, now - timedelta(days=raw_days), report.expired_raw, report.kept)
    _expire(rollup, now - timedelta(days=rollup_days), report.expired_rollup, None)
    return report


def _expire(root: Path, before: datetime, expired: list[str], kept: list[str] | None) -> None:
    """Delete the ``date=`` folders under ``root`` whose whole UTC day ended at or before ``before``."""
    for folder in sorted(root.glob("date=*")):
        day = _day_of(folder)
        if day is None or datetime.combine(day + timedelta(days=1), datetime.min.time(), UTC) > before:
            continue
        if kept is not None and any(not p.name.startswith((".", COMPACT_PREFIX)) for p in folder.glob("*.parquet")):
            kept.append(str(folder))
            continue
        shutil.rmtree(folder)
        expired.append(str(folder))


def _utc_time(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {text!r}") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mirrorwatch.monitor.history_compaction``: what the scheduled job runs before the Spark job."""
    parser = argparse.ArgumentParser(description="Compact, roll up and expire the lag history.")
    parser.add_argument("--history", required=True)
    parser.add_argument("--raw-days", type=float, required=True)
    parser.add_argument("--rollup-days", type=float, required=True)
    parser.add_argument("--now", type=_utc_time, help="ISO-8601 time, UTC if naive (default: now)")
    args = parser.parse_args(argv)
    if not os.path.isdir(os.path.join(args.history, "lag")):
        print(f"monitor: no lag history under {args.history} (expected lag/date=YYYY-MM-DD/*.parquet)", file=sys.stderr)
        return 2
    now = args.now or datetime.fromtimestamp(time.time(), UTC)
    report = compact_history(args.history, now, args.raw_days, args.rollup_days)
    for line in report.lines():
        print(line, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
