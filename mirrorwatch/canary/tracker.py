"""Matching canary events with their arrivals: latency, overdue, late, lost, duplicates, reordered, probe outcomes.

Pure bookkeeping (no Kafka), shared by the one-shot check and the service. An own event that has not arrived:
- within ``crit_latency_s``: awaited (its probe is still open);
- past ``crit_latency_s``: **overdue** — late, still expected (a frozen mirror, a slow target);
- **lost** once a later own event of the same source partition has arrived without it: a mirror keeps a
  partition's order, so the earlier one was skipped and the target will never have it. Counted once.
An overdue event that arrives is counted **late** (and its latency observed: it really took that long).

State stays small: unresolved probes, overdue events, and the keys of recently seen events, all for at most
``retain_s``; older ones are forgotten (an overdue event older than that is no longer counted overdue).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.records import CanaryEvent
from .events import Arrival
from .status import CRITICAL, OK, UNKNOWN, WARNING


@dataclass
class Probe:
    """One round: one event per source partition, all produced at ``produced_at_ms``."""

    seq: int
    produced_at_ms: float
    partitions: tuple[int, ...]
    awaited: set[int]
    latencies_ms: dict[int, float] = field(default_factory=dict)
    unsent: dict[int, str] = field(default_factory=dict)  # partition → why the source did not take it
    lost: set[int] = field(default_factory=set)  # a later event of the partition arrived before this one
    status: str | None = None  # set when resolved
    missing: tuple[int, ...] = ()  # not arrived when resolved: overdue or lost

    @property
    def max_latency_ms(self) -> float | None:
        return max(self.latencies_ms.values()) if self.latencies_ms else None

    @property
    def overdue(self) -> tuple[int, ...]:
        """Partitions whose event had not arrived at resolution and is not known lost: overdue, still expected."""
        return tuple(p for p in self.missing if p not in self.lost)


class Tracker:
    def __init__(
        self,
        run_id: str,
        source: str,
        warn_s: float,
        crit_s: float,
        own_only: bool = True,
        retain_s: float | None = None,
    ):
        self.run_id, self.source = run_id, source
        self.warn_ms, self.crit_ms = warn_s * 1000.0, crit_s * 1000.0
        # the service judges only its own events; the one-shot check also judges every other canary run
        # that passes through the target while it watches (it has only one event per partition itself)
        self.own_only = own_only
        self.retain_ms = (retain_s if retain_s is not None else max(300.0, 10 * crit_s)) * 1000.0
        self.probes: dict[int, Probe] = {}  # unresolved, by seq
        self.resolved: list[Probe] = []  # resolved since the last take_resolved()
        self._seen: dict[tuple[str, int, int], float] = {}  # (run, seq, partition) → arrival ms
        self._highest: dict[tuple[str, int], tuple[int, float]] = {}  # (run, partition) → (seq, arrival ms)
        self._overdue: dict[tuple[int, int], float] = {}  # own (seq, partition) past crit → produced ms
        self.lost = self.late = self.duplicates = self.reordered = 0
        self.latencies_s: list[float] = []  # observed since the last take_latencies()
        self.basis: str | None = None
        self._anomaly = False  # a duplicate or reorder seen since the last resolution
        self._lost_since_resolution = False  # a loss found after its own probe had resolved
        # (partition, seq counted lost, seq that arrived first) until the service logs them
        self.losses: list[tuple[int, int, int]] = []

    # ------------------------------------------------------------ producing side
    def sent(self, seq: int, partitions: list[int], produced_at_ms: float) -> Probe:
        probe = Probe(seq, produced_at_ms, tuple(partitions), set(partitions))
        self.probes[seq] = probe
        return probe

    def unsent(self, seq: int, partition: int, reason: str) -> None:
        probe = self.probes.get(seq)
        if probe is not None and partition in probe.awaited:
            probe.awaited.discard(partition)
            probe.unsent[partition] = reason
            if not probe.awaited:
                self._resolve(probe)
        else:
            # refused after its probe was judged: never on the source, so no longer overdue, and never lost when a
            # later event of its partition arrives
            self._overdue.pop((seq, partition), None)

    # ------------------------------------------------------------ reading side
    def arrived(self, arrival: Arrival) -> None:
        event = arrival.event
        if event.source != self.source:
            return  # another cluster's canary sharing the topic name (identity policy)
        own = event.run_id == self.run_id
        if not own and self.own_only:
            return
        key = (event.run_id, event.seq, event.partition)
        if key in self._seen:
            self.duplicates += 1
            self._anomaly = True
            return
        self._seen[key] = arrival.arrived_ms
        order_key = (event.run_id, event.partition)
        highest = self._highest.get(order_key)
        if highest is not None and event.seq < highest[0]:
            # An own event counted lost lands here too (a later one had arrived first). It stays counted lost:
            # the counter is a Prometheus counter (never goes down) and the loss alert already said so; counting
            # it reordered makes the contradiction visible instead. An order-keeping mirror never does this.
            self.reordered += 1
            self._anomaly = True
        else:
            self._highest[order_key] = (event.seq, arrival.arrived_ms)
            if own:
                self._skipped_before(event.seq, event.partition)
        if own:
            self._own_arrival(event.seq, event.partition, arrival.arrived_ms - event.produced_at_ms, arrival.basis)

    def _skipped_before(self, seq: int, partition: int) -> None:
        """Own events of ``partition`` older than ``seq`` that have not arrived are lost: the mirror skipped them."""
        for probe in [p for s, p in self.probes.items() if s < seq and partition in p.awaited]:
            probe.awaited.discard(partition)
            probe.lost.add(partition)
            self.lost += 1
            self.losses.append((partition, probe.seq, seq))
            if not probe.awaited:
                self._resolve(probe)
        for key in [k for k in self._overdue if k[1] == partition and k[0] < seq]:
            if self.mark_lost(*key):
                self._lost_since_resolution = True
                self.losses.append((partition, key[0], seq))

    def has_arrived(self, event: CanaryEvent) -> bool:
        """Whether a canary event (any run) was seen on the target (within ``retain_s``)."""
        return event.source == self.source and (event.run_id, event.seq, event.partition) in self._seen

    def saw_partition(self, partition: int) -> bool:
        """Whether any canary event (any run) of this source partition was seen on the target (within retain_s)."""
        return any(key[2] == partition for key in self._seen)

    def mark_lost(self, seq: int, partition: int) -> bool:
        """An overdue own event the caller knows was skipped (the one-shot check asks the source what came
        after it); False when it was not overdue (arrived, already lost, or forgotten)."""
        if self._overdue.pop((seq, partition), None) is None:
            return False
        self.lost += 1
        return True

    def _own_arrival(self, seq: int, partition: int, latency_ms: float, basis: str) -> None:
        probe = self.probes.get(seq)
        if probe is not None and partition in probe.awaited:
            probe.awaited.discard(partition)
            probe.latencies_ms[partition] = latency_ms
            if latency_ms >= self.crit_ms:
                self.late += 1  # arrived past the timeout before expire() had declared it overdue
        elif self._overdue.pop((seq, partition), None) is not None:
            self.late += 1
        else:
            return  # counted lost (see arrived()), or forgotten (older than retain_s): nothing to match
        self.basis = basis
        self.latencies_s.append(max(latency_ms, 0.0) / 1000.0)
        if probe is not None and not probe.awaited:
            self._resolve(probe)

    # ------------------------------------------------------------ time passing
    def expire(self, now_ms: float) -> None:
        """Resolve probes whose critical timeout has passed; forget keys older than ``retain_s``."""
        for probe in [p for p in self.probes.values() if now_ms - p.produced_at_ms >= self.crit_ms]:
            self._resolve(probe)
        horizon = now_ms - self.retain_ms
        if self._seen and next(iter(self._seen.values())) < horizon:
            self._seen = {k: t for k, t in self._seen.items() if t >= horizon}
            self._highest = {k: v for k, v in self._highest.items() if v[1] >= horizon}
        if self._overdue and next(iter(self._overdue.values())) < horizon:
            self._overdue = {k: t for k, t in self._overdue.items() if t >= horizon}

    def finish(self) -> None:
        """Resolve every probe still open (the one-shot check stops waiting)."""
        for probe in list(self.probes.values()):
            self._resolve(probe)

    def _resolve(self, probe: Probe) -> None:
        self.probes.pop(probe.seq, None)
        probe.missing = tuple(sorted(probe.awaited | probe.lost))
        for partition in probe.awaited:
            self._overdue[(probe.seq, partition)] = probe.produced_at_ms
        if probe.missing or self._lost_since_resolution:
            probe.status = CRITICAL
        elif not probe.latencies_ms:
            probe.status = UNKNOWN  # the source took none of its events: nothing was tested
        elif self._anomaly or (probe.max_latency_ms or 0.0) > self.warn_ms:
            probe.status = WARNING
        else:
            probe.status = OK
        self._anomaly = self._lost_since_resolution = False
        self.resolved.append(probe)

    def take_resolved(self) -> list[Probe]:
        out, self.resolved = self.resolved, []
        return out

    def take_latencies(self) -> list[float]:
        out, self.latencies_s = self.latencies_s, []
        return out

    # ------------------------------------------------------------ figures for the gauges
    @property
    def overdue_events(self) -> int:
        """Own events past crit_latency_s, not arrived and not lost (forgotten after ``retain_s``)."""
        return len(self._overdue)

    def oldest_overdue_s(self, now_ms: float) -> float:
        """Age of the oldest overdue event, 0 when none."""
        if not self._overdue:
            return 0.0
        return max(0.0, now_ms - min(self._overdue.values())) / 1000.0

    @property
    def anomaly_pending(self) -> bool:
        return self._anomaly
