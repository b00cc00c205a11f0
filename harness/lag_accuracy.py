"""Measuring the monitor's true lag and RPO seconds against an independent reader, on real clusters with the real
engine (shared by tests/test_lag_accuracy.py and bench/lag_accuracy.py).

Ground truth on a flow whose source and target topics both started empty and whose source has no offset gaps:
the source records not yet on the target are ``source_end − (target_end − local)``, ``local`` being records
written to the target topic by someone else (identity policy, active-active) before the mirror started. The
independent reader (its own AdminClient) reads target then source end offsets just before and just after each
monitor cycle; the truth at any moment of the cycle lies in ``[S_before − T_after, S_after − T_before]``.

On a transactional target (``counter``: harness/transactional_mirror.py's read_committed ``CommittedCounter``)
the target's end offset counts commit markers and aborted records, so the records on the target are counted
instead: those a read_committed reader finds below the last stable offset read before and after the cycle.

Replication latency, independently: a consumer on the target topic takes (receive time − record timestamp) of
every record it reads (the engine keeps the source CreateTime).
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from dataclasses import dataclass, field

import numpy as np
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec


class RateProducer(threading.Thread):
    """Produces ``rate`` records/s round-robin over the partitions until stopped, in 10 ms slices."""

    def __init__(self, bootstrap: str, topic: str, rate: int, partitions: int):
        super().__init__(daemon=True)
        self.topic, self.rate, self.partitions = topic, rate, partitions
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1, "enable.idempotence": True}
        )
        self.stop_event = threading.Event()
        self.sent = 0

    def run(self) -> None:
        start = time.monotonic()
        while not self.stop_event.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while self.sent < due:
                try:
                    self.producer.produce(self.topic, value=b"x" * 100, partition=self.sent % self.partitions)
                    self.sent += 1
                except BufferError:
                    self.producer.poll(0.01)
            self.producer.poll(0)
            time.sleep(0.01)
        self.producer.flush(30)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(60)


class LatencyReader(threading.Thread):
    """Receive time − record timestamp of every record on the target topic (ms), from the end at start-up; only
    records received between ``window`` = (start, end) epoch-ms are kept (the measured cycles)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "lag-accuracy-unused",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 5,
                "fetch.min.bytes": 1,
                "isolation.level": "read_committed",  # on a transactional target: when a record became readable
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
        self.stop_event = threading.Event()
        self.idle_at_stop = False  # set by ``stop``
        # per partition, in offset order: when each record was received, and its CreateTime (epoch ms)
        self.received: dict[int, list[float]] = {p: [] for p in range(partitions)}
        self.created: dict[int, list[float]] = {p: [] for p in range(partitions)}

    def run(self) -> None:
        while not self.stop_event.is_set():
            # A short wait: consume() returns when it has 1,000 records or the wait is over, so a record that
            # arrived at the start of a long wait would be timed at its end. One receive time per batch, taken
            # as consume() returns: every record in it was readable by then, and the loop's own work (slow when
            # this process's other threads hold the interpreter) must not count as replication latency.
            batch = self.consumer.consume(1000, 0.005)
            now = time.time() * 1000
            for msg in batch:
                if not msg.error():
                    self.received[msg.partition()].append(now)
                    self.created[msg.partition()].append(msg.timestamp()[1])
        self.consumer.close()

    def latencies_ms(self, start_ms: float, end_ms: float) -> np.ndarray:
        """Receive time − CreateTime of every record received in [start_ms, end_ms]."""
        return np.asarray(
            [
                at - created
                for p in self.received
                for at, created in zip(self.received[p], self.created[p])
                if start_ms <= at <= end_ms
            ]
        )

    def rpo_truth_ms(self, partition: int, at_ms: float) -> float:
        """The RPO of ``partition`` at ``at_ms`` by this reader: the age then of the oldest record created by then
        and received after it (0 if none). Exact for the records it read; call it after reading until idle, or a
        record still missing at the end looks delivered (NaN then: not known)."""
        received, created = self.received[partition], self.created[partition]
        first_missing = bisect_right(received, at_ms)
        if first_missing == len(received):
            return 0.0 if self.idle_at_stop else float("nan")
        return max(0.0, at_ms - created[first_missing])

    def rpo_truth_over_ms(self, partition: int, start_ms: float, end_ms: float) -> tuple[float, float]:
        """The least and greatest RPO of ``partition`` at any moment of [start_ms, end_ms] (a monitor cycle, which
        reads its clusters at moments within it). The truth grows while nothing arrives and falls when a record
        does, so its extremes are at the ends or just before and at an arrival."""
        received = self.received[partition]
        arrivals = received[bisect_right(received, start_ms) : bisect_right(received, end_ms)]
        moments = [start_ms, end_ms, *arrivals, *(a - 0.001 for a in arrivals)]
        truths = [self.rpo_truth_ms(partition, t) for t in moments]
        return min(truths), max(truths)

    def stop(self, idle: bool = False) -> None:
        """``idle``: the mirror had copied everything when the reader was stopped (true lag 0 after the producer
        stopped), so every record missing at a moment was read after it."""
        self.idle_at_stop = idle
        self.stop_event.set()
        self.join(10)


@dataclass
class Measurement:
    lower: list[int] = field(default_factory=list)  # per partition sample: truth ≥ lower
    upper: list[int] = field(default_factory=list)  # truth ≤ upper
    true_lag: list[int] = field(default_factory=list)
    rpo_ms: list[float] = field(default_factory=list)
    cycle_ms: list[float] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # why, for each cycle in which the monitor gave no figures
    partition: list[int] = field(default_factory=list)  # per partition sample: which partition
    cycle_at_ms: list[tuple[float, float]] = field(default_factory=list)  # per partition sample: its cycle (epoch ms)
    start_ms: float = 0.0
    end_ms: float = 0.0

    def rpo_truth_ms(self, reader: LatencyReader) -> np.ndarray:
        """Per partition sample: the independent reader's RPO of that partition over the sample's cycle, as the
        middle of its least and greatest value then (NaN where not known)."""
        bounds = [reader.rpo_truth_over_ms(p, *at) for p, at in zip(self.partition, self.cycle_at_ms)]
        return np.asarray([(lo + hi) / 2 for lo, hi in bounds])

    def over(self) -> np.ndarray:
        """How far above the truth (its bracket's midpoint) true lag was, per partition sample."""
        return np.asarray(self.true_lag) - (np.asarray(self.lower) + np.asarray(self.upper)) / 2


def _ends(admin: AdminClient, topic: str, partitions: int) -> list[int]:
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}, request_timeout=10
    )
    out = [0] * partitions
    for tp, f in futures.items():
        out[tp.partition] = f.result(15).offset
    return out


def measure(
    sampler,
    source_bootstrap: str,
    target_bootstrap: str,
    topic: str,
    target_topic: str,
    partitions: int,
    local: list[int],
    cycles: int,
    every_s: float,
    counter=None,
) -> Measurement:
    """``cycles`` monitor cycles ``every_s`` apart, each bracketed by the independent reader (on a transactional
    target, ``counter``'s count of committed records instead of the target's end offsets)."""
    src, dst = (
        AdminClient({"bootstrap.servers": source_bootstrap}),
        AdminClient({"bootstrap.servers": target_bootstrap}),
    )
    sampler.sample()  # warm-up, not counted: the first cycle behind creates the time-lag reader's consumer
    m = Measurement(start_ms=time.time() * 1000)
    for _ in range(cycles):
        t_before = _ends(dst, target_topic, partitions) if counter is None else counter.stable_ends()
        s_before = _ends(src, topic, partitions)
        t0, wall0 = time.perf_counter(), time.time() * 1000
        view = sampler.sample().views[0]
        m.cycle_ms.append((time.perf_counter() - t0) * 1000)
        cycle_at = (wall0, time.time() * 1000)
        if view.true_lag is None:  # the monitor could not tell this cycle, and says why: no figure to check
            m.unknown.append(view.error or "no figures")
            time.sleep(every_s)
            continue
        t_after = _ends(dst, target_topic, partitions) if counter is None else counter.stable_ends()
        s_after = _ends(src, topic, partitions)
        if counter is not None:  # records on the target, not offsets: markers and aborted records left out
            t_before, t_after = counter.count_below(t_before), counter.count_below(t_after)
        for i, p in enumerate(view.partitions):
            m.lower.append(max(0, s_before[p] - (t_after[p] - local[p])))
            m.upper.append(max(0, s_after[p] - (t_before[p] - local[p])))
            m.true_lag.append(int(view.true_lag[i]))
            m.rpo_ms.append(float(view.time_lag_s[i]) * 1000)
            m.partition.append(int(p))
            m.cycle_at_ms.append(cycle_at)
        time.sleep(every_s)
    m.end_ms = time.time() * 1000
    return m
