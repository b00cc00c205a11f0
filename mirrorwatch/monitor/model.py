"""What one sampling cycle produces: a :class:`Snapshot` of :class:`GroupView` s, read (never changed) by the
exporter, the HTTP API, the history writer and the webhook notifier. Per-partition values are numpy arrays in
(topic, partition) order, -1 (or NaN for seconds) meaning unknown, so a cycle builds no per-partition objects
until a reader asks for rows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..core.connect_rest import ConnectStates, connector_problems
from ..core.lag import FlowFigures, describe_forecast, flow_figures
from ..core.status import GROUP_STATUS, PARTITION_STATUS, PartitionStatus, partition_status_reasons
from .transactions import OpenTransactions


@dataclass(frozen=True)
class GroupView:
    kind: str  # "mirror" (a flow's engine group) or "group" (a plain watched consumer group)
    flow: str  # "" for a plain group
    cluster: str  # where the group commits: the flow's source cluster
    target: str  # "" for a plain group
    group: str
    ts_ms: int
    group_status: int
    error: str | None = None  # why the status is UNKNOWN / NOTFOUND
    last_ok_ms: int | None = None
    topics: list[str] = field(default_factory=list)
    partitions: list[int] = field(default_factory=list)
    source_end: np.ndarray | None = None
    committed: np.ndarray | None = None
    read_position: np.ndarray | None = None
    acked_next: np.ndarray | None = None
    target_end: np.ndarray | None = None
    committed_lag: np.ndarray | None = None
    read_lag: np.ndarray | None = None
    true_lag: np.ndarray | None = None
    time_lag_s: np.ndarray | None = None  # = RPO seconds: age of the oldest source record not on the target
    log_start: np.ndarray | None = None  # source log-start offsets
    records_lost: np.ndarray | None = None  # log_start − acked_next (a plain group: − committed) where below it
    target_behind: np.ndarray | None = None
    catch_up_s: np.ndarray | None = None  # per partition
    status: np.ndarray | None = None  # partition status codes
    window_start: tuple[np.ndarray, np.ndarray] | None = None  # (offsets, times) of the oldest stored commit
    window_end: tuple[np.ndarray, np.ndarray] | None = None
    window_count: np.ndarray | None = None
    window_size: int = 0
    complete: float = 0.0
    totallag: int = 0
    maxlag_row: int | None = None
    topic_catch_up_s: dict[str, float] = field(default_factory=dict)
    engine: str = "mirrorwatch"  # what mirrors the flow: "mirrorwatch" (our engine) or "mm2" (MirrorMaker 2)
    heartbeat_age_s: float | None = None  # MM2 flows: newest heartbeat that crossed the mirror
    coverage: dict[str, Any] | None = None  # translation coverage and checkpoint age per group (monitor/coverage.py)
    connect: ConnectStates | None = None  # MM2 flows with mirror.connect: connector and task state (REST)
    transactions: OpenTransactions | None = None  # a transactional target's open transactions (hanging ones)
    notes: tuple[str, ...] = ()  # what a judgement made outside the evaluator adds (monitor/one_look.py)

    @property
    def reasons(self) -> list[str]:
        """Everything that explains a status that is not OK, one line each: why the view is UNKNOWN or NOTFOUND,
        each non-OK partition status (how many, what it means, which), each MM2 connector or task that is not
        RUNNING, each target partition with a hanging transaction (with the command to run), and the notes of a
        one-look judgement. The API, the webhooks and `monitor lag` all print this list."""
        lines = [self.error] if self.error else []
        if self.status is not None:
            codes = self.status
            if self.transactions is not None:  # a hanging transaction made those WARN: its own line says so
                made_warn = self.transactions.hanging & (codes == PartitionStatus.WARN)
                codes = np.where(made_warn, PartitionStatus.OK, codes)
            who = "the mirror" if self.kind == "mirror" else f"group '{self.group}'"
            lines += partition_status_reasons(codes, self.topics, self.partitions, who)
        lines += self.connector_problems
        lines += self.transactions.reasons if self.transactions is not None else []
        return lines + list(self.notes)

    @property
    def connector_problems(self) -> list[str]:
        """Each MM2 connector or task that is not RUNNING (from the Connect REST API; empty without it)."""
        return connector_problems(self.connect.connectors) if self.connect is not None else []

    def hanging_transactions(self) -> list[dict[str, Any]] | None:
        """The target partitions with a hanging transaction (monitor/transactions.py); None when the flow's target is
        not watched for them (not transactional)."""
        return None if self.transactions is None else self.transactions.rows

    @cached_property
    def figures(self) -> FlowFigures:
        """The flow's own figures (RPO, summed lags, records lost), computed once per view, i.e. once per cycle,
        by ``core.lag.flow_figures``; every surface reads them from here."""
        return flow_figures(self.committed_lag, self.read_lag, self.true_lag, self.records_lost, self.time_lag_s)

    @property
    def source(self) -> str:
        return self.cluster

    @property
    def status_name(self) -> str:
        return GROUP_STATUS[self.group_status]

    def __len__(self) -> int:
        return len(self.topics)

    # ------------------------------------------------------------------ rows

    def value(self, name: str, i: int) -> int | float | bool | None:
        arr = getattr(self, name)
        if arr is None:
            return None
        v = arr[i]
        if arr.dtype.kind == "f":
            return None if math.isnan(v) else float(v)
        if arr.dtype.kind == "b":
            return bool(v)
        return None if v < 0 else int(v)

    def partition_row(self, i: int) -> dict[str, Any]:
        """One partition as plain JSON-able values (API, CLI)."""
        v = self.value
        row = {
            "topic": self.topics[i],
            "partition": self.partitions[i],
            "status": PARTITION_STATUS[int(self.status[i])]
            if self.status is not None
            else PartitionStatus.UNKNOWN.name,
            "source_end": v("source_end", i),
            "committed": v("committed", i),
            "committed_lag": v("committed_lag", i),
            "records_lost": v("records_lost", i),
        }
        if self.kind == "mirror":
            catch_up = v("catch_up_s", i)
            row.update(
                {
                    "read_position": v("read_position", i),
                    "acked_next": v("acked_next", i),
                    "target_end": v("target_end", i),
                    "read_lag": v("read_lag", i),
                    "true_lag": v("true_lag", i),
                    "time_lag_s": v("time_lag_s", i),
                    "rpo_seconds": v("time_lag_s", i),
                    "target_behind": v("target_behind", i),
                    "catch_up_s": None if catch_up is None or math.isinf(catch_up) else catch_up,
                    "forecast": describe_forecast(catch_up),
                }
            )
            txns = self.transactions
            if txns is not None:  # only a transactional target's: what a read_committed reader's end is
                age = float(txns.age_s[i])
                row["target_stable_end"] = None if txns.stable[i] < 0 else int(txns.stable[i])
                row["open_transaction_s"] = None if math.isnan(age) else round(age, 3)
        return row

    def rows(self) -> list[dict[str, Any]]:
        return [self.partition_row(i) for i in range(len(self.topics))]


@dataclass(frozen=True)
class Snapshot:
    ts_ms: int
    views: list[GroupView]
    cluster_up: dict[str, bool]
    seq: int = 0  # increases every cycle; lets readers cache per snapshot

    def view(self, cluster: str, group: str) -> GroupView | None:
        for v in self.views:
            if v.cluster == cluster and v.group == group:
                return v
        return None

    def flow_views(self) -> list[GroupView]:
        return [v for v in self.views if v.kind == "mirror"]


EMPTY = Snapshot(0, [], {}, 0)
