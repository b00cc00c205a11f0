"""Where each source partition's records stop being on the target: the engine's acknowledged position, from what
the target proves (the newest offset sync, the mirror's committed position, the target's end offset), for both
engines. The arithmetic is the monitor's estimator, ``core.lag.target_side_acked_next``; this module only
gathers its inputs, once, for ``mirror failover check``, ``switchover`` and ``mirror failback tail``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core.clients import make_admin
from ...core.config import Config, FlowConfig
from ...core.delivery import transactional_target
from ...core.lag import target_side_acked_next
from ...core.naming import mirror_group, offset_syncs_topic
from ...core.topic_selection import TopicFilter, policy_of
from ..checkpoints import committed_offsets, read_offset_syncs
from ..mm2_records import Mm2State, target_end_offsets

Partition = tuple[str, int]


@dataclass(frozen=True)
class MirrorPositions:
    """The estimator's inputs per source partition (-1 = unknown). ``sync``: the newest offset sync's
    (upstream, downstream, acked_next; MM2's syncs carry no acked_next); ``committed``: the mirror's own committed
    position on the source (our engine's group; MM2's Connect source offsets)."""

    engine: str  # "mirrorwatch" or "mm2"
    sync: dict[Partition, tuple[int, int, int]]
    committed: dict[Partition, int]
    target_end: dict[Partition, int]
    prefix: bool  # the target partition holds only this mirror's copies (the prefix policy)
    transactional: bool  # the target is written in transactions (core.delivery.transactional_target)

    def partitions(self) -> list[Partition]:
        return sorted(set(self.sync) | set(self.committed))

    def acked_next(self, one_to_one: bool | None = None, transactional: bool | None = None) -> dict[Partition, int]:
        """``core.lag.target_side_acked_next`` per partition, with the flow's own flags unless given: never too
        high with them. ``one_to_one=False`` gives what the syncs and commits alone prove; ``transactional=False``
        on a transactional target counts markers as copies (too high: a bound, not an estimate)."""
        keys = self.partitions()
        rows = [self.sync.get(k, (-1, -1, -1)) for k in keys]
        estimate = target_side_acked_next(
            [-1] * len(keys),
            [self.committed.get(k, -1) for k in keys],
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            [self.target_end.get(k, -1) for k in keys],
            one_to_one=self.prefix if one_to_one is None else one_to_one,
            transactional=self.transactional if transactional is None else transactional,
        )
        return {k: int(a) for k, a in zip(keys, estimate, strict=True) if a >= 0}


def read_positions(config: Config, flow_name: str, flow: FlowConfig, mm2: Mm2State | None) -> MirrorPositions:
    """The estimator's inputs as the clusters hold them now: the offset syncs (all of them, or CannotTell), the
    mirror's commits, and the target's end offsets, read before the caller reads the source's."""
    prefix, transactional = policy_of(flow).kind == "prefix", transactional_target(config, flow)
    if mm2 is not None:
        keys = sorted(set(mm2.latest_sync) | set(mm2.positions))
        return MirrorPositions(
            "mm2",
            {k: (u, d, -1) for k, (u, d) in mm2.latest_sync.items()},
            dict(mm2.positions),
            target_end_offsets(config, flow, keys),
            prefix,
            transactional,
        )
    source, target = config.clusters[flow.source], config.clusters[flow.target]
    store = read_offset_syncs(target, offset_syncs_topic(flow.source), flow.target)
    mine = TopicFilter.of(config, flow)  # another flow of this pair shares the offset-syncs topic
    synced = sorted(k for k in store.latest if mine.matches(k[0]))
    own_group = mirror_group(flow.source, flow.target, flow.group, flow_name)
    commits = committed_offsets(make_admin(source, "mirrorwatch-failover"), own_group)
    return MirrorPositions(
        "mirrorwatch",
        {
            k: (store.latest[k].upstream_offset, store.latest[k].downstream_offset, store.latest[k].acked_next)
            for k in synced
        },
        {k: v for k, v in commits.items() if k in set(synced)},
        target_end_offsets(config, flow, synced),
        prefix,
        transactional,
    )
