"""The exported series' level (``monitor.series``): per partition, per topic or per flow.

At 880 bytes per partition a scrape of 100,000 partitions is ~88 MB; a Prometheus that scrapes that every 15 s
pays for series nobody graphs. KMinion calls the same choice ``granularity: partition | topic`` (lags summed per
topic); Kafka Lag Exporter keeps per-partition metrics and lets users drop them by name (``metric-whitelist``).
Here the metric names stay and the labels shrink, so the rules and dashboards work at every level
(docs/metrics.md: which labels each level has). The HTTP API and the page always keep every partition.

How a partition figure folds into a coarser series, one rule per kind of figure (:class:`Rollup`):

- records (lags, records lost): the **sum** of the partitions that know theirs (-1 = none knows), as the flow's
  totals (``core.lag.flow_figures``);
- seconds (RPO / time lag): the **largest** known (NaN = none known): the oldest record not yet on the target
  decides how stale the topic is, as the flow's RPO;
- open transaction age (seconds): the **largest** known, as RPO;
- partition status: the **worst** by :data:`mirrorwatch.core.status.PARTITION_SEVERITY` (a STOP is not hidden
  behind an UNKNOWN neighbour).

At flow level the lags, records lost and RPO are the flow's own figures (``GroupView.figures``, computed once per
cycle), not summed a second time; only the worst partition status is folded here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..core.status import PARTITION_SEVERITY
from .model import GroupView

SeriesLevel = Literal["partition", "topic", "flow"]
SERIES_LEVELS: tuple[SeriesLevel, ...] = ("partition", "topic", "flow")

# code -> rank and rank -> code, for folding statuses with a plain max
_RANK = np.zeros(max(int(c) for c in PARTITION_SEVERITY) + 1, np.int8)
_RANK[[int(c) for c in PARTITION_SEVERITY]] = np.arange(len(PARTITION_SEVERITY))
_BY_RANK = np.array([int(c) for c in PARTITION_SEVERITY], np.int8)


@dataclass(frozen=True)
class Rollup:
    """How one view's partitions (in its (topic, partition) order) fold into the series of one level.

    ``keys`` names each series (a topic at topic level; the one flow series, ``""``, at flow level); ``order``
    sorts the partitions so that each series' partitions are one run starting at ``starts``. Built once per
    partition layout (the exporter caches it), used every cycle."""

    keys: list[str]
    order: np.ndarray
    starts: np.ndarray

    def sum_known(self, values: np.ndarray) -> np.ndarray:
        """Records: sum of the known (>= 0) values per series; -1 where no partition knows its value."""
        v = values[self.order]
        known = v >= 0
        sums = np.add.reduceat(np.where(known, v, 0), self.starts)
        return np.where(np.add.reduceat(known, self.starts) > 0, sums, -1)

    def max_known(self, seconds: np.ndarray) -> np.ndarray:
        """Seconds: the largest known (non-NaN) value per series; NaN where none is known."""
        return np.fmax.reduceat(seconds[self.order], self.starts)

    def worst_status(self, codes: np.ndarray) -> np.ndarray:
        """Partition status codes: the worst per series by PARTITION_SEVERITY."""
        return _BY_RANK[np.maximum.reduceat(_RANK[codes[self.order]], self.starts)]


def rollup_of(topics: Sequence[str], level: SeriesLevel) -> Rollup | None:
    """The fold of a view's partitions (its ``topics`` list, one entry per partition) at ``level``; None at
    partition level, where every partition is its own series."""
    if level == "partition" or not len(topics):
        return None
    if level == "flow":
        return Rollup([""], np.arange(len(topics)), np.array([0]))
    keys, index = np.unique(np.asarray(topics, dtype=object), return_inverse=True)
    order = np.argsort(index, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(index[order]) != 0])
    return Rollup([str(k) for k in keys], order, starts)


@dataclass(frozen=True)
class SeriesValues:
    """One view's per-partition figures at the exported level, one entry per series (-1 / NaN = unknown)."""

    status: np.ndarray | None
    lags: list[tuple[str, np.ndarray]]  # (kind, values): committed for every group; read and true for a mirror
    time_lag_s: np.ndarray | None
    records_lost: np.ndarray | None
    open_transaction_s: np.ndarray | None = None  # transactional targets only (monitor/transactions.py)


def _one(value: float | int | None, unknown: float | int) -> np.ndarray:
    return np.array([unknown if value is None else value])


def series_values(v: GroupView, rollup: Rollup | None, level: SeriesLevel) -> SeriesValues:
    """The view's figures folded by ``rollup`` (as-is at partition level; the flow's own figures at flow level)."""
    kinds = [("committed", v.committed_lag)]
    if v.kind == "mirror":
        kinds += [("read", v.read_lag), ("true", v.true_lag)]
    txn_age = v.transactions.age_s if v.transactions is not None else None
    if rollup is None:
        return SeriesValues(
            v.status, [(k, a) for k, a in kinds if a is not None], v.time_lag_s, v.records_lost, txn_age
        )
    # seconds: the oldest open transaction decides, at topic and at flow level alike
    txn_max = rollup.max_known(txn_age) if txn_age is not None else None
    status = rollup.worst_status(v.status) if v.status is not None else None
    if level == "flow":
        f = v.figures
        totals = {"committed": f.committed_lag, "read": f.read_lag, "true": f.true_lag}
        return SeriesValues(
            status,
            [(k, _one(totals[k], -1)) for k, a in kinds if a is not None],
            _one(f.rpo_seconds, math.nan) if v.time_lag_s is not None else None,
            _one(f.records_lost, -1) if v.records_lost is not None else None,
            txn_max,
        )
    return SeriesValues(
        status,
        [(k, rollup.sum_known(a)) for k, a in kinds if a is not None],
        rollup.max_known(v.time_lag_s) if v.time_lag_s is not None else None,
        rollup.sum_known(v.records_lost) if v.records_lost is not None else None,
        txn_max,
    )
