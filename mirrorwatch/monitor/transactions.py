"""Hanging transactions on a flow's target: how long each target partition's last stable offset (LSO) has stood
below its end offset (its *open transaction age*), and which partitions are past ``monitor.hanging_transaction_s``.

Why the monitor watches this: on a target written in transactions, a transaction Kafka never finishes (a restarted
coordinator that rolled it back without writing the abort markers, KAFKA-5202-style; docs/exactly-once.md, "Known
limits") pins the partition's LSO. Every record behind it is on the target and committed, so true lag and RPO, which
come from offset syncs and commits, say 0, while read_committed readers see nothing new. Only the LSO shows it.

How the age is told from samples alone: the LSO is the first offset of the oldest transaction still open on the
partition, so an LSO that keeps its value while below the end is that same transaction, still open; an LSO that moved
is a newer one (an exactly-once mirror commits every ``transaction_interval_s``, so its LSO moves every cycle while it
writes). The age counts from the first sample that saw the LSO at its present value: it is below the truth by up to
one sampling interval, never above it. Pure logic here (table-tested); the sampler reads the offsets
(``SamplerEstimates._open_transactions``) and every surface reads the :class:`OpenTransactions` it builds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.lag import format_duration

NOT_OPEN = -1  # since_ms of a partition with no open transaction
REASONS_SHOWN = 3  # partitions named one by one in the reason lines; a crash hangs every partition it touched


def open_transaction_ages(
    prev_stable: np.ndarray, prev_since_ms: np.ndarray, end: np.ndarray, stable: np.ndarray, now_ms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One sample of a flow's target partitions: end offsets and last stable offsets read at ``now_ms`` (-1 = not
    read), and what the previous sample left: each partition's LSO then and since when it has stood there
    (:data:`NOT_OPEN` = nothing was open).

    Returns ``(stable, since_ms, age_s)``: the state for the next sample, and per partition the seconds its LSO has
    stood below its end: 0 where nothing is open; NaN where either offset is unknown (the state is kept then, so one
    failed read does not restart the clock)."""
    prev_stable = np.asarray(prev_stable, np.int64)
    prev_since_ms = np.asarray(prev_since_ms, np.int64)
    end = np.asarray(end, np.int64)
    stable = np.asarray(stable, np.int64)
    known = (end >= 0) & (stable >= 0)
    is_open = known & (stable < end)
    same = is_open & (stable == prev_stable) & (prev_since_ms != NOT_OPEN)
    since = np.where(same, prev_since_ms, np.where(is_open, now_ms, NOT_OPEN))
    since = np.where(known, since, prev_since_ms)
    age = np.where(is_open, (now_ms - since) / 1000.0, np.where(known, 0.0, np.nan))
    return np.where(known, stable, prev_stable), since, age


def hanging(age_s: np.ndarray, threshold_s: float) -> np.ndarray:
    """Partitions whose transaction has been open longer than ``threshold_s`` (``monitor.hanging_transaction_s``);
    an unknown age (NaN) is not hanging."""
    out: np.ndarray = np.greater(np.nan_to_num(np.asarray(age_s, float), nan=-1.0), threshold_s)
    return out


class OpenTransactionClock:
    """What :func:`open_transaction_ages` needs between samples, for one flow's target partitions (a partition that
    leaves and comes back, or a layout change, starts afresh; those that stay keep their clock)."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, int]] = []
        self.stable = np.zeros(0, np.int64)
        self.since_ms = np.zeros(0, np.int64)

    def sample(self, keys: list[tuple[str, int]], end: np.ndarray, stable: np.ndarray, now_ms: int) -> np.ndarray:
        if keys != self.keys:
            where = {k: i for i, k in enumerate(self.keys)}
            rows = [where.get(k, -1) for k in keys]
            self.stable = np.array([self.stable[r] if r >= 0 else -1 for r in rows], np.int64)
            self.since_ms = np.array([self.since_ms[r] if r >= 0 else NOT_OPEN for r in rows], np.int64)
            self.keys = list(keys)
        self.stable, self.since_ms, age = open_transaction_ages(self.stable, self.since_ms, end, stable, now_ms)
        return age


def hanging_rows(
    target_keys: list[tuple[str, int]], stable: np.ndarray, end: np.ndarray, age_s: np.ndarray, hanging: np.ndarray
) -> list[dict[str, Any]]:
    """The hanging target partitions as plain values (API, CLI, reasons), oldest transaction first."""
    rows = [
        {
            "topic": target_keys[i][0],
            "partition": target_keys[i][1],
            "open_s": round(float(age_s[i]), 3),
            "last_stable_offset": int(stable[i]),
            "target_end": int(end[i]),
        }
        for i in np.flatnonzero(hanging)
    ]
    return sorted(rows, key=lambda r: -r["open_s"])


@dataclass(frozen=True)
class OpenTransactions:
    """A transactional flow's open transactions in one cycle, per partition in the view's (source topic, partition)
    order (``rows`` name the target partitions). Built once per cycle by the sampler; the exporter, the HTTP API,
    ``monitor lag`` and the status read it."""

    stable: np.ndarray  # last stable offsets (-1 = not read)
    age_s: np.ndarray  # open transaction age (NaN = unknown)
    hanging: np.ndarray  # bool: age past monitor.hanging_transaction_s
    rows: list[dict[str, Any]] = field(default_factory=list)  # the hanging ones (hanging_rows)
    reasons: list[str] = field(default_factory=list)


def hanging_reasons(
    rows: list[dict[str, Any]],
    bootstrap: str,
    leaders: dict[tuple[str, int], int],
    threshold_s: float,
    command_config: bool,
) -> list[str]:
    """One line per hanging partition (the oldest :data:`REASONS_SHOWN`, then a count): what it is and what to run.

    ``rows`` as :func:`hanging_rows`; ``leaders`` the partitions' leader broker ids where known
    (``find-hanging`` asks one broker); ``command_config``: the target needs client properties (SASL/TLS), which
    kafka-transactions.sh takes from a file. ``find-hanging`` lists only transactions open longer than its
    ``--max-transaction-timeout`` (minutes, 15 by default), hence 1; ``abort --start-offset`` needs no producer id."""
    tool = f"kafka-transactions.sh --bootstrap-server {bootstrap}"
    if command_config:
        tool += " --command-config <target client properties>"
    out = []
    for r in rows[:REASONS_SHOWN]:
        topic, partition, start = r["topic"], r["partition"], r["last_stable_offset"]
        leader = leaders.get((topic, partition))
        find = f"{tool} find-hanging --broker-id {leader if leader is not None else '<leader id>'}"
        out.append(
            f"hanging transaction on target partition {topic}[{partition}]: open {format_duration(r['open_s'])} "
            f"(longer than monitor.hanging_transaction_s, {format_duration(threshold_s)}), last stable offset {start} "
            f"< end {r['target_end']}: read_committed readers see nothing from offset {start} on. "
            f"Find it: {find} --max-transaction-timeout 1; unless the mirror's log says it holds committed records "
            f"(never abort those), abort it: {tool} abort --topic {topic} --partition {partition} --start-offset {start}"
        )
    if len(rows) > REASONS_SHOWN:
        out.append(f"and {len(rows) - REASONS_SHOWN} more target partitions with a hanging transaction (monitor lag)")
    return out
