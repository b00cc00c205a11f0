"""Matching canary events with their arrivals: latency, lost, late, duplicates, reordered, probe outcomes.

Pure bookkeeping (no Kafka), shared by the one-shot check and the service. State stays small: unresolved
probes, plus the keys of recently seen and recently lost events for ``retain_s`` so that a duplicate or a
late arrival is recognised as such (an event that arrives after it was declared lost counts as late, not
as lost again); older keys are forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    status: str | None = None  # set when resolved
    missing: tuple[int, ...] = ()

    @property
    def max_latency_ms(self) -> float | None:
        return max(self.latencies_ms.values()) if self.latencies_ms else None


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
        self._overdue: dict[tuple[int, int], float] = {}  # own (seq, partition) declared lost → produced ms
        self.lost = self.late = self.duplicates = self.reordered = 0
        self.latencies_s: list[float] = []  # observed since the last take_latencies()
        self.basis: str | None = None
        self._anomaly = False  # a duplicate or reorder seen since the last resolution

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
            self.reordered += 1
            self._anomaly = True
        else:
            self._highest[order_key] = (event.seq, arrival.arrived_ms)
        if own:
            self._own_arrival(event.seq, event.partition, arrival.arrived_ms - event.produced_at_ms, arrival.basis)

    def _own_arrival(self, seq: int, partition: int, latency_ms: float, basis: str) -> None:
        probe = self.probes.get(seq)
        if probe is not None and partition in probe.awaited:
            probe.awaited.discard(partition)
            probe.latencies_ms[partition] = latency_ms
        elif self._overdue.pop((seq, partition), None) is not None:
            self.late += 1
        else:
            return  # forgotten (older than retain_s): nothing to match
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
        probe.missing = tuple(sorted(probe.awaited))
        if probe.missing:
            probe.status = CRITICAL
            self.lost += len(probe.missing)
            for partition in probe.missing:
                self._overdue[(probe.seq, partition)] = probe.produced_at_ms
        elif not probe.latencies_ms:
            probe.status = UNKNOWN  # the source took none of its events: nothing was tested
        elif self._anomaly or (probe.max_latency_ms or 0.0) > self.warn_ms:
            probe.status = WARNING
        else:
            probe.status = OK
        self._anomaly = False
        self.resolved.append(probe)

    def take_resolved(self) -> list[Probe]:
        out, self.resolved = self.resolved, []
        return out

    def take_latencies(self) -> list[float]:
        out, self.latencies_s = self.latencies_s, []
        return out

    @property
    def anomaly_pending(self) -> bool:
        return self._anomaly
