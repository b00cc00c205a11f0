"""Whether a flow's target partitions are written in transactions: the one answer every figure that reads
target offsets asks (the monitor's true lag and RPO, ``mirror failover check``, the lag-accuracy bench).

A transactional target holds a commit (or abort) marker per transaction in every partition the transaction
wrote, and possibly aborted records; each takes an offset that no ``read_committed`` reader ever sees. Target
offsets then stop counting records one-to-one, and ``core.lag.target_side_acked_next`` must not extrapolate
past the newest offset sync.
"""

from __future__ import annotations

from .config import Config, FlowConfig


def transactional_target(config: Config, flow: FlowConfig) -> bool:
    """True when the flow's mirror writes its target in transactions: MirrorMaker 2 configured with exactly-once
    source support (``flows.X.mirror.exactly_once``), or our engine with ``mirror.delivery: exactly_once``.

    The monitor also treats a flow as transactional once it has seen an open transaction on the target
    (``Sampler``: the last stable offset below the end offset), so a flow left undeclared cannot stay
    under-reported; this function is what the configuration alone says."""
    if flow.mirror is not None:
        return flow.mirror.exactly_once
    return config.mirror.delivery == "exactly_once"
