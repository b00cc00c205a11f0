"""The canary's /healthz and /readyz (``core/probes.py``): what its loops and its clusters are.

- Loops: each flow's probe job (ticks when a probe starts and ends; every ``canary.interval_s``, so wedged
  after ``stale_after_s(interval_s)``: three intervals, at least 30 s; a probe's own requests are bounded by
  ``canary.connect_timeout_s``) and each flow's reader thread (turns every 0.2 s; wedged after 30 s).
- A cluster has answered once a metadata request of a probe succeeded (``FlowTopics.partitions``); each answer
  also sets ``mirrorwatch_canary_cluster_up``, so an unreachable cluster shows in the metrics while the canary
  stays ready.
- First cycle: each flow's first probe has run (whatever it found).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core.probes import LIVENESS_FLOOR_S, ProbeState, stale_after_s
from .metrics import CanaryMetrics

if TYPE_CHECKING:  # the service imports this module
    from .service import FlowCanary


def canary_probes(flows: list[FlowCanary], metrics: CanaryMetrics) -> ProbeState:
    """The probe state of these FlowCanary objects, wired to their cluster requests and the cluster-up gauge."""
    clusters = sorted({alias for f in flows for alias in (f.topics.source_alias, f.topics.target_alias)})
    probes = ProbeState(clusters, [first_probe(f) for f in flows])
    probes.config_loaded()
    for flow in flows:
        flow.topics.on_answer = _answered(probes, metrics, flow)
    return probes


def first_probe(flow: FlowCanary) -> str:
    return f"first probe {flow.topics.flow_name}"


def _answered(probes: ProbeState, metrics: CanaryMetrics, flow: FlowCanary) -> Callable[[str, str, bool], None]:
    labels = (flow.topics.flow_name, flow.topics.source_alias, flow.topics.target_alias)

    def answered(role: str, alias: str, ok: bool) -> None:
        probes.answered(alias, ok)
        metrics.cluster_up.labels(*labels, alias, role).set(1.0 if ok else 0.0)

    return answered


def watch_loops(probes: ProbeState, flows: list[FlowCanary], interval_s: float) -> None:
    """Start judging every flow's probe job and reader thread (call when they start)."""
    for flow in flows:
        probes.watch(f"probe {flow.topics.flow_name}", stale_after_s(interval_s))
        probes.watch(f"reader {flow.topics.flow_name}", LIVENESS_FLOOR_S)
        flow.on_read_turn = functools.partial(probes.tick, f"reader {flow.topics.flow_name}")


def probe_job(probes: ProbeState, flow: FlowCanary) -> Callable[[], None]:
    """The scheduler's job for a flow: its probe, with the ticks and the first-probe mark around it."""
    loop = f"probe {flow.topics.flow_name}"

    def job() -> None:
        probes.tick(loop)  # at the start and the end: only a probe that never ends goes stale
        try:
            flow.probe()
        finally:
            probes.tick(loop)
            probes.cycle_done(first_probe(flow))

    return job
