"""Per-partition estimates of a sampling cycle, a mix-in of :class:`~.sampler.Sampler`: time lag (RPO seconds;
exact from record timestamps, or interpolated from the source end's history), the catch-up forecast, whether a
flow's target is transactional (so the target-side acked_next must not extrapolate past the newest sync) and, if so,
its open transactions (a hanging one pins what read_committed readers see)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..core.clients import make_consumer
from ..core.delivery import transactional_target
from ..core.lag import catch_up_seconds, rate
from ..core.redact import redact_text
from ..core.topic_selection import policy_of
from .followers import UNUSED_GROUP
from .markers import TrailingMarkerReader, marker_candidates
from .timelag import OffsetTimeTable, RecordTimestampReader, produced_at
from .transactions import OpenTransactions, hanging, hanging_reasons, hanging_rows

if TYPE_CHECKING:
    from ..core.config import Config
    from .kafka_io import ClusterReader
    from .sampler import _GroupState

log = logging.getLogger("mirrorwatch.monitor.sampler")

TP = tuple[str, int]


class SamplerEstimates:
    """Needs the sampler's config, ``time_tables``, ``ts_readers``, ``marker_readers``, ``timeout_s`` and ``seq``."""

    config: Config
    time_tables: dict[str, OffsetTimeTable]
    ts_readers: dict[str, RecordTimestampReader]
    marker_readers: dict[str, TrailingMarkerReader]
    timeout_s: float
    seq: int

    def _oldest_missing(
        self,
        cluster: str,
        keys: Sequence[TP],
        acked: np.ndarray,
        true_lag: np.ndarray,
        source_end: np.ndarray,
        ts: int,
        ts_target: int,
    ) -> tuple[np.ndarray, int]:
        """When the oldest source record not on the target was produced (ms, NaN = unknown), per partition, and
        the moment that was measured at: the inputs of ``core.rpo.rpo_seconds``, the RPO's one arithmetic.

        Exact mode reads that record's timestamp and measures at ``ts_target``, when the target end was sampled:
        a record produced after that moment was not missing from the target then. Interpolate mode estimates it
        from the sampled (end offset, time) pairs, at ``ts``."""
        out = np.full(len(keys), np.nan)
        behind: list[int] = np.flatnonzero(true_lag > 0).tolist()
        if self.config.monitor.time_lag_mode == "interpolate":
            table = self.time_tables.setdefault(cluster, OffsetTimeTable(self.config.monitor.interpolation_points))
            for i, k in enumerate(keys):
                table.add(k, int(source_end[i]), ts)
            for i in behind:
                if acked[i] >= 0 and table.points(keys[i]):
                    at, _lower_bound = produced_at(table.points(keys[i]), int(acked[i]))
                    out[i] = ts if at is None else at  # None: not there at the newest sample, so not missing then
            return out, ts
        if len(behind):
            reader = self.ts_readers.get(cluster)
            if reader is None:
                cfg = self.config.clusters[cluster]
                reader = self.ts_readers[cluster] = RecordTimestampReader(
                    lambda: make_consumer(
                        cfg,
                        f"mirrorwatch-monitor-timelag-{cluster}",
                        group_id=UNUSED_GROUP,
                        **{
                            "auto.offset.reset": "earliest",
                            "enable.partition.eof": False,
                            "fetch.max.bytes": 1048576,
                            "max.partition.fetch.bytes": 65536,
                        },
                    ),
                    timeout_s=min(2.0, self.timeout_s),
                )
            wanted = [(keys[i][0], keys[i][1], int(acked[i])) for i in behind]
            try:
                found = reader.timestamps(wanted)
            except Exception as exc:  # time lag is a bonus; never let it sink the sample
                log.warning("time lag: cannot read record timestamps on '%s': %s", cluster, exc)
                found = {}
            for i, w in zip(behind, wanted):
                if w in found:
                    out[i] = found[w]
        return out, ts_target

    def _forecast(
        self,
        state: _GroupState,
        keys: Sequence[TP],
        ts: int,
        source_end: np.ndarray,
        acked: np.ndarray,
        true_lag: np.ndarray,
    ) -> tuple[np.ndarray, dict[str, float]]:
        state.history.append((ts, source_end, acked))
        old_ts, old_end, old_acked = state.history[0]
        produce, mirror = rate(old_end, old_ts, source_end, ts), rate(old_acked, old_ts, acked, ts)
        interval_s = self.config.monitor.interval_s
        per_partition = catch_up_seconds(true_lag, produce, mirror, produce * interval_s)
        per_topic: dict[str, float] = {}
        topics = np.array([k[0] for k in keys], dtype=object)
        for topic in dict.fromkeys(k[0] for k in keys):
            m = topics == topic
            known = (true_lag[m] >= 0) & ~np.isnan(produce[m]) & ~np.isnan(mirror[m])
            if not known.any():
                per_topic[topic] = math.nan
                continue
            value = catch_up_seconds(
                [true_lag[m][known].sum()],
                [produce[m][known].sum()],
                [mirror[m][known].sum()],
                [produce[m][known].sum() * interval_s],
            )[0]
            per_topic[topic] = float(value)
        return per_partition, per_topic

    def _transactional(
        self, name: str, state: _GroupState, dst: ClusterReader, target_keys: list[TP], target_ends: dict[TP, int]
    ) -> tuple[bool, dict[TP, int] | None]:
        """Whether the flow's target is written in transactions (``core.delivery``), or has shown it: an open
        transaction (a last stable offset below the end offset) or a partition that ends on a transaction marker
        (monitor/markers.py); and the last stable offsets read this cycle (None when none were read). A
        transactional target's are read every cycle, for the hanging-transaction watch (:meth:`_open_transactions`);
        a target the configuration does not declare is checked every cycle until it shows one (one more ListOffsets,
        the same one, and a read of the last offset of a few partitions written since): only under prefix, the one
        policy that reads progress off the target's end offsets."""
        flow = self.config.flows[name]
        if transactional_target(self.config, flow) or state.open_transaction_seen:
            return True, dst.stable_end_offsets(target_keys)
        if policy_of(flow).kind != "prefix" or not target_keys:
            return False, None
        stable = dst.stable_end_offsets(target_keys)
        seen = ""
        if any(0 <= stable.get(k, -1) < target_ends.get(k, -1) for k in target_keys):
            seen = "an open transaction"
        elif self._ends_on_a_marker(flow.target, state, target_keys, target_ends, stable):
            seen = "a partition that ends on a transaction marker"
        if seen:
            state.open_transaction_seen = True
            log.warning(
                "flow %s: its target has %s, so it is written transactionally; the monitor no longer reads "
                "progress off the target's end offsets (declare it: mirror.delivery or flows.%s.mirror.exactly_once)",
                name,
                seen,
                name,
            )
        return state.open_transaction_seen, stable

    def _ends_on_a_marker(
        self, cluster: str, state: _GroupState, keys: list[TP], ends: dict[TP, int], stable: dict[TP, int]
    ) -> bool:
        """Whether a target partition with nothing open ends on a marker (monitor/markers.py): the sighting that
        does not depend on catching a transaction open between two requests."""
        reader = self.marker_readers.get(cluster)
        if reader is not None and reader.refused:
            return False
        chosen = marker_candidates(keys, ends, stable, state.marker_looks, self.seq)
        if not chosen:
            return False
        if reader is None:
            cfg = self.config.clusters[cluster]
            reader = self.marker_readers[cluster] = TrailingMarkerReader(
                lambda: make_consumer(
                    cfg,
                    f"mirrorwatch-monitor-markers-{cluster}",
                    group_id=UNUSED_GROUP,
                    **{"enable.partition.eof": True, "auto.offset.reset": "error", "fetch.wait.max.ms": 100},
                ),
                timeout_s=min(2.0, self.timeout_s),
            )
        found = any(reader.ends_on_a_marker({k: ends[k] for k in chosen}).values())
        if reader.refused:
            log.warning(
                "cannot read the target topics on '%s' (%s): an undeclared transactional target is seen only while a "
                "transaction is open; grant the monitor READ on them (docs/security.md) or declare the flow's mirror "
                "transactional",
                cluster,
                reader.refused,
            )
        return found

    def _open_transactions(
        self,
        name: str,
        state: _GroupState,
        dst: ClusterReader,
        target_keys: list[TP],
        target_ends: dict[TP, int],
        stable: dict[TP, int],
        ts_ms: int,
    ) -> OpenTransactions:
        """The flow's open transactions this cycle (monitor/transactions.py), from the offsets already read."""
        n = len(target_keys)
        end = np.fromiter((target_ends.get(k, -1) for k in target_keys), np.int64, n)
        lso = np.fromiter((stable.get(k, -1) for k in target_keys), np.int64, n)
        age = state.txn_clock.sample(target_keys, end, lso, ts_ms)
        threshold = self.config.monitor.hanging_transaction_s
        is_hanging = hanging(age, threshold)
        rows = hanging_rows(target_keys, lso, end, age, is_hanging)
        reasons: list[str] = []
        if rows:
            cluster = self.config.clusters[self.config.flows[name].target]
            secured = cluster.properties.get("security.protocol", "plaintext").lower() != "plaintext"
            leaders = dst.leaders((r["topic"], r["partition"]) for r in rows)
            bootstrap = redact_text(cluster.bootstrap_servers)
            reasons = hanging_reasons(rows, bootstrap, leaders, threshold, secured)
        return OpenTransactions(lso, age, is_hanging, rows, reasons)
