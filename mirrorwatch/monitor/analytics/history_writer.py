"""Writes a generated history as the monitor would (``lag/date=YYYY-MM-DD/*.parquet``) plus ``ground_truth.json``."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...core.records import lag_sample_arrow_schema
from .synthetic import GeneratorSpec, InjectedEvent, PartitionSeries, generate
from .truth import series_flags, series_incidents

DAY_MS = 86_400_000


@dataclass(frozen=True)
class WriteResult:
    rows: int
    files: int
    incidents: int
    ground_truth_path: str


def series_table(spec: GeneratorSpec, s: PartitionSeries, lo: int, hi: int) -> pa.Table:
    """Rows ``lo:hi`` of one partition as a table with exactly the history schema."""
    schema = lag_sample_arrow_schema()
    n = hi - lo
    known = s.committed_known[lo:hi]
    committed = pa.array(s.committed[lo:hi], mask=~known, type=pa.int64())
    committed_lag = pa.array(s.committed_lag[lo:hi], mask=~known, type=pa.int64())
    columns = {
        "ts": pa.array(s.ts_ms[lo:hi], type=pa.int64()).cast(schema.field("ts").type),
        "flow": pa.repeat(spec.flow, n),
        "source": pa.repeat(spec.source, n),
        "target": pa.repeat(spec.target, n),
        "group": pa.repeat(spec.group, n),
        "topic": pa.repeat(s.topic, n),
        "partition": pa.repeat(pa.scalar(s.partition, pa.int32()), n),
        "source_end": pa.array(s.source_end[lo:hi]),
        "committed": committed,
        "read_position": pa.array(s.read_position[lo:hi]),
        "acked_next": pa.array(s.acked_next[lo:hi]),
        "target_end": pa.array(s.target_end[lo:hi]),
        "committed_lag": committed_lag,
        "read_lag": pa.array(s.read_lag[lo:hi]),
        "true_lag": pa.array(s.true_lag[lo:hi]),
        "time_lag_s": pa.array(s.time_lag_s[lo:hi]),
        "status": pa.array(s.status[lo:hi], type=pa.string()),
        "mirror": pa.repeat(spec.mirror, n),
    }
    return pa.Table.from_arrays([columns[f.name].cast(f.type) for f in schema], schema=schema)


def ground_truth(spec: GeneratorSpec, series: list[PartitionSeries], events: list[InjectedEvent]) -> dict[str, Any]:
    incidents = []
    by_topic: dict[str, dict[str, float]] = {}
    for s in series:
        true_lag = s.true_lag.astype(np.float64)
        flags = series_flags(s.ts_ms, true_lag, s.time_lag_s, spec.slo_lag, spec.slo_time_s, spec.gap_factor)
        for inc in series_incidents(s.ts_ms, true_lag, s.time_lag_s, flags):
            # Events are one per 3-hour slot, so the cause is the last injected event on this partition
            # that began at or before the breach.
            causes = [
                e.kind
                for e in events
                if e.kind != "sampling_gap" and e.affects(s.topic, s.partition) and e.start_ms <= inc["start_ms"]
            ]
            incidents.append(
                {"topic": s.topic, "partition": s.partition, "cause": causes[-1] if causes else None, **inc}
            )
        t = by_topic.setdefault(s.topic, {"compliant_ms": 0, "breach_ms": 0, "unknown_ms": 0, "unobserved_ms": 0})
        t["compliant_ms"] += int(flags.weight_ms[flags.compliant].sum())
        t["breach_ms"] += int(flags.weight_ms[flags.breach].sum())
        t["unknown_ms"] += int(flags.weight_ms[~flags.compliant & ~flags.breach].sum())
        t["unobserved_ms"] += int(flags.unobserved_ms.sum())
    for t in by_topic.values():
        t["compliance"] = t["compliant_ms"] / (t["compliant_ms"] + t["breach_ms"])
    total_compliant = sum(t["compliant_ms"] for t in by_topic.values())
    total_breach = sum(t["breach_ms"] for t in by_topic.values())
    return {
        "spec": asdict(spec),
        "keys": {
            "flow": spec.flow,
            "source": spec.source,
            "target": spec.target,
            "mirror": spec.mirror,
            "group": spec.group,
        },
        "slo": {"lag": spec.slo_lag, "time_s": spec.slo_time_s, "gap_factor": spec.gap_factor},
        "injected": [asdict(e) for e in events],
        "incidents": incidents,
        "compliance": {"flow": total_compliant / (total_compliant + total_breach), "by_topic": by_topic},
        "rows": int(sum(len(s.ts_ms) for s in series)),
    }


def write_history(spec: GeneratorSpec, out_dir: str, roll_s: int | None = None) -> WriteResult:
    """One Parquet file per UTC day (all partitions), like a monitor that rolls its file daily; with ``roll_s``, one
    file per ``roll_s`` seconds of history (aligned to the day; ``monitor.history_roll_s``), so that a run reading
    only recent hours can skip the older files' row groups by their ``ts`` statistics."""
    series, events = generate(spec)
    file_ms = DAY_MS if roll_s is None else roll_s * 1000
    file_of = [s.ts_ms // file_ms for s in series]
    slots: list[int] = [int(d) for d in np.unique(np.concatenate(file_of))] if series else []
    for slot in slots:
        tables = []
        for s, d in zip(series, file_of):
            lo, hi = np.searchsorted(d, slot, "left"), np.searchsorted(d, slot, "right")
            if hi > lo:
                tables.append(series_table(spec, s, int(lo), int(hi)))
        first = datetime.fromtimestamp(slot * file_ms / 1000, UTC)
        folder = os.path.join(out_dir, "lag", f"date={first:%Y-%m-%d}")
        os.makedirs(folder, exist_ok=True)
        name = "part-00000.parquet" if roll_s is None else f"part-{first:%H%M%S}.parquet"
        pq.write_table(pa.concat_tables(tables), os.path.join(folder, name), compression="zstd")
    truth = ground_truth(spec, series, events)
    truth_path = os.path.join(out_dir, "ground_truth.json")
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1)
    return WriteResult(truth["rows"], len(slots), len(truth["incidents"]), truth_path)
