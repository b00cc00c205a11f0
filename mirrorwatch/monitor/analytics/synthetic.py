"""A realistic synthetic lag history with injected incidents — pure numpy, no I/O.

The model, per partition (all arrays are per sampling step, vectorised):
- produce rate: topic base rate × partition skew × diurnal curve (peak 15:00 UTC, trough 03:00) × noise;
  a *burst* replaces it with a fixed high rate on one partition.
- the mirror's capacity: 3 × the partition's peak rate; 0 during a *mirror stop* (all partitions of the flow),
  0.3 × the mean rate during a *slow target* (all partitions of one topic).
- ``acked_next`` follows ``source_end`` minus a small in-flight amount, limited by capacity:
  ``a[i] = min(s[i], a[i-1] + C[i])``, solved in closed form as ``cumC + minimum.accumulate(s - cumC)``.
- ``time_lag_s``: age of the oldest unmirrored record, found by interpolating its offset on the sampled
  (source_end, time) pairs — the monitor's own fallback method.
- ``committed``: ``acked_next`` as of the last commit (every ``commit_interval_s``) → saw-tooth ≥ true lag;
  null before the first commit. ``read_position``: a little ahead of ``acked_next`` (a lot during a slow
  target, where the engine buffers), so ``read_lag ≤ true_lag ≤ committed_lag`` always.
- *sampling gaps*: the monitor was down — samples of every partition are dropped in a window.

Events are placed in 3-hour slots (one per slot, cycling stop → slow target → burst → sampling gap) so each
incident recovers before the next begins. Which samples breach the SLO follows from the data; ``truth``
derives the expected incidents with the same definitions the Spark job uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...core.status import PartitionStatus
from .definitions import DEFAULT_GAP_FACTOR, DEFAULT_SLO_LAG, DEFAULT_SLO_TIME_S

SLOT_S = 3 * 3600
EVENT_CYCLE = ("mirror_stop", "slow_target", "burst", "sampling_gap")
TOPIC_BASE_RATES = (800.0, 300.0, 150.0, 500.0, 60.0)  # messages/s per partition at the diurnal mean
DURATION_RANGES_S = {
    "mirror_stop": (300, 900),
    "slow_target": (900, 1800),
    "burst": (120, 300),
    "sampling_gap": (600, 1800),
}
BURST_RATE_FACTOR = 12.0  # × base rate, whatever the time of day
CAPACITY_FACTOR = 3.0  # × peak rate
SLOW_TARGET_FACTOR = 0.3  # × mean rate


@dataclass(frozen=True)
class GeneratorSpec:
    start_ms: int
    steps: int  # sampling steps per partition, before sampling gaps are cut out
    interval_s: float = 10.0
    topics: tuple[str, ...] = ("orders", "payments", "clicks")
    partitions: int = 4
    seed: int = 7
    slo_lag: int = DEFAULT_SLO_LAG
    slo_time_s: float = DEFAULT_SLO_TIME_S
    gap_factor: float = DEFAULT_GAP_FACTOR
    commit_interval_s: float = 60.0
    flow: str = "east-west"
    source: str = "east"
    target: str = "west"
    group: str = "mirrorwatch-east-west"
    mirror: str = "mirrorwatch"  # what mirrors the flow: mirrorwatch or mm2 (the history's mirror column)


@dataclass(frozen=True)
class InjectedEvent:
    kind: str  # mirror_stop | slow_target | burst | sampling_gap
    start_ms: int  # first affected sampling step
    end_ms: int  # first step no longer affected (exclusive)
    topic: str | None = None  # None: every topic of the flow
    partition: int | None = None  # None: every partition of the topic(s)

    def affects(self, topic: str, partition: int) -> bool:
        return (self.topic is None or self.topic == topic) and (self.partition is None or self.partition == partition)


@dataclass
class PartitionSeries:
    """One partition's generated samples (after sampling gaps are removed)."""

    topic: str
    partition: int
    ts_ms: np.ndarray
    source_end: np.ndarray
    committed: np.ndarray  # int64; meaningful only where committed_known
    committed_known: np.ndarray
    read_position: np.ndarray
    acked_next: np.ndarray
    target_end: np.ndarray
    time_lag_s: np.ndarray
    status: np.ndarray  # object array of str

    @property
    def true_lag(self) -> np.ndarray:
        return np.asarray(self.source_end - self.acked_next)

    @property
    def read_lag(self) -> np.ndarray:
        return np.asarray(self.source_end - self.read_position)

    @property
    def committed_lag(self) -> np.ndarray:
        return np.asarray(self.source_end - self.committed)


def plan_events(spec: GeneratorSpec, rng: np.random.Generator) -> list[InjectedEvent]:
    """One event per 3-hour slot, skipping the first slot (warm-up) and any slot the history cuts short."""
    step_ms = spec.interval_s * 1000
    total_s = spec.steps * spec.interval_s
    events = []
    for slot in range(1, int(total_s // SLOT_S)):
        kind = EVENT_CYCLE[(slot - 1) % len(EVENT_CYCLE)]
        lo, hi = DURATION_RANGES_S[kind]
        offset_s = rng.uniform(600, 2400)
        duration_s = rng.uniform(lo, hi)
        # Align to the sampling grid so "start" is a sample time.
        start_step = int(np.ceil((slot * SLOT_S + offset_s) / spec.interval_s))
        end_step = start_step + max(1, int(round(duration_s / spec.interval_s)))
        topic = partition = None
        if kind in ("slow_target", "burst"):
            topic = spec.topics[int(rng.integers(len(spec.topics)))]
        if kind == "burst":
            partition = int(rng.integers(spec.partitions))
        events.append(
            InjectedEvent(
                kind,
                spec.start_ms + int(start_step * step_ms),
                spec.start_ms + int(end_step * step_ms),
                topic,
                partition,
            )
        )
    return events


def _window_mask(t_ms: np.ndarray, events: list[InjectedEvent], kind: str, topic: str, partition: int) -> np.ndarray:
    mask = np.zeros(t_ms.shape, dtype=bool)
    for ev in events:
        if ev.kind == kind and ev.affects(topic, partition):
            mask |= (t_ms >= ev.start_ms) & (t_ms < ev.end_ms)
    return mask


def simulate_partition(
    spec: GeneratorSpec, events: list[InjectedEvent], topic_index: int, partition: int, rng: np.random.Generator
) -> PartitionSeries:
    topic = spec.topics[topic_index]
    n = spec.steps
    dt = spec.interval_s
    t_ms = spec.start_ms + np.round(np.arange(n) * dt * 1000).astype(np.int64)
    t_s = (t_ms - spec.start_ms) / 1000.0

    base_rate = TOPIC_BASE_RATES[topic_index % len(TOPIC_BASE_RATES)] * rng.uniform(0.7, 1.3)
    hour_of_day = (t_ms / 3_600_000.0) % 24
    diurnal = 1.0 + 0.6 * np.sin(2 * np.pi * (hour_of_day - 9) / 24)
    rate = base_rate * diurnal * rng.lognormal(0.0, 0.1, n)
    burst = _window_mask(t_ms, events, "burst", topic, partition)
    rate[burst] = base_rate * BURST_RATE_FACTOR
    produced = np.round(rate * dt).astype(np.int64)
    produced[0] = 0
    source_end = int(rng.integers(0, 5_000_000)) + np.cumsum(produced)

    stopped = _window_mask(t_ms, events, "mirror_stop", topic, partition)
    slow = _window_mask(t_ms, events, "slow_target", topic, partition)
    capacity = np.full(n, CAPACITY_FACTOR * base_rate * 1.6 * dt)
    capacity[slow] = SLOW_TARGET_FACTOR * base_rate * dt
    capacity[stopped] = 0.0
    capacity[0] = 0.0

    # Where acked_next would be with unlimited capacity: source_end minus what is in flight (~0.3-0.8 s of data).
    in_flight = np.round(rate * rng.uniform(0.3, 0.8)).astype(np.int64)
    unconstrained = np.maximum.accumulate(source_end - in_flight).astype(np.float64)
    cum_capacity = np.cumsum(capacity)
    acked_next = np.floor(cum_capacity + np.minimum.accumulate(unconstrained - cum_capacity)).astype(np.int64)
    acked_next = np.minimum(acked_next, source_end)

    # Age of the oldest record not yet on the target: when did source_end pass acked_next?
    produced_at_s = np.interp(acked_next.astype(np.float64), source_end.astype(np.float64), t_s)
    time_lag_s = np.where(acked_next >= source_end, 0.0, np.maximum(0.0, t_s - produced_at_s))
    time_lag_s = np.round(time_lag_s, 3)

    # Commits every commit_interval_s, at a per-partition phase; commits are the acked position at that time.
    every = max(1, int(round(spec.commit_interval_s / dt)))
    phase = int(rng.integers(every))
    step = np.arange(n)
    last_commit_step = ((step - phase) // every) * every + phase
    committed_known = last_commit_step >= 0
    committed = acked_next[np.clip(last_commit_step, 0, None)]

    read_ahead_s = np.where(slow, 30.0, rng.uniform(0.1, 0.3))
    read_ahead = np.where(stopped, 0, np.round(rate * read_ahead_s).astype(np.int64))
    read_position = np.minimum(source_end, acked_next + read_ahead)

    true_lag = source_end - acked_next
    status = np.where(
        stopped & (true_lag > 0),
        PartitionStatus.STOP.name,
        np.where(true_lag > spec.slo_lag, PartitionStatus.WARN.name, PartitionStatus.OK.name),
    ).astype(object)

    monitor_down = np.zeros(n, dtype=bool)
    for ev in events:
        if ev.kind == "sampling_gap":
            monitor_down |= (t_ms >= ev.start_ms) & (t_ms < ev.end_ms)
    keep = ~monitor_down
    return PartitionSeries(
        topic=topic,
        partition=partition,
        ts_ms=t_ms[keep],
        source_end=source_end[keep],
        committed=committed[keep],
        committed_known=committed_known[keep],
        read_position=read_position[keep],
        acked_next=acked_next[keep],
        # The target partition's offsets start near 0 where the source's started at source_end[0].
        target_end=(acked_next - source_end[0] + in_flight[0])[keep],
        time_lag_s=time_lag_s[keep],
        status=status[keep],
    )


def generate(spec: GeneratorSpec) -> tuple[list[PartitionSeries], list[InjectedEvent]]:
    rng = np.random.default_rng(spec.seed)
    events = plan_events(spec, rng)
    series = [
        simulate_partition(spec, events, ti, p, rng) for ti in range(len(spec.topics)) for p in range(spec.partitions)
    ]
    return series, events
