"""The gates and steps of ``mirror failover switchover`` (the command and its state file: ``switchover.py``).

Each step either returns its figures (JSON-ready) or raises :class:`Blocked`, saying what it waited for and what
it saw last; a read that fails raises ``CannotTell`` (fail closed). Lag is the monitor's figure
(``core.lag.mirror_lags`` over the one estimator in ``acked.py``), never arithmetic of this module's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import TopicPartition

from ...core.clients import make_admin, make_consumer
from ...core.config import Config, FlowConfig
from ...core.lag import mirror_lags
from ...core.mm2 import is_mm2
from ...core.naming import offset_syncs_topic
from ...core.topic_selection import TopicFilter, measured_topics, policy_of
from ..checkpoints import apply_offsets, committed_offsets, read_offset_syncs, translate_group
from ..mm2_records import read_mm2_state
from ..topology import latest_heartbeats
from .acked import Partition, read_positions
from .reads import CannotTell, group_is_active, partitions_of, reason


class Blocked(Exception):
    """A gate not met within its wait: the switchover stops there (state kept; ``--resume`` continues)."""


@dataclass(frozen=True)
class Plan:
    config: Config
    flow_name: str
    flow: FlowConfig
    groups: tuple[str, ...]
    quiet_s: float
    wait_s: float
    say: Callable[[str], None]

    def until(self, what: str, attempt: Callable[[], tuple[bool, str, dict[str, Any]]]) -> dict[str, Any]:
        """Call ``attempt`` until it says done (True, _, figures) or ``wait_s`` passes (Blocked, with the last
        thing it said)."""
        deadline = time.monotonic() + self.wait_s
        self.say(f"   waiting for {what} (up to {self.wait_s:g} s)")
        while True:
            done, last, figures = attempt()
            if done:
                return figures
            if time.monotonic() >= deadline:
                raise Blocked(f"{what}: not within {self.wait_s:g} s; last seen: {last}")
            time.sleep(1.0)


def step_healthy(plan: Plan) -> dict[str, Any]:
    """The flow is healthy: its heartbeat on the target is younger than ``canary.heartbeat_max_age_s``."""
    limit = plan.config.canary.heartbeat_max_age_s
    flow, target = plan.flow, plan.config.clusters[plan.flow.target]

    def attempt() -> tuple[bool, str, dict[str, Any]]:
        if is_mm2(flow):
            age = read_mm2_state(plan.config, flow).heartbeat_age_s()
        else:
            beat = latest_heartbeats(target, plan.config.mirror.heartbeats_topic).get((flow.source, flow.target))
            age = None if beat is None else max(0.0, time.time() - beat[0] / 1000)
        said = "no heartbeat" if age is None else f"heartbeat {age:.1f} s old (limit {limit:g} s)"
        return age is not None and age <= limit, said, {"heartbeat_age_s": None if age is None else round(age, 1)}

    return plan.until("a recent heartbeat of the mirror on the target", attempt)


def source_ends(plan: Plan) -> dict[Partition, tuple[int, int]]:
    """(high watermark, last stable offset) of every mirrored source partition; CannotTell when one is not read."""
    flow = plan.flow
    cluster = plan.config.clusters[flow.source]
    uncommitted = make_consumer(cluster, "mirrorwatch-switchover", None, **{"isolation.level": "read_uncommitted"})
    committed = make_consumer(cluster, "mirrorwatch-switchover")
    try:
        try:
            listed = uncommitted.list_topics(timeout=10).topics
        except Exception as exc:
            raise CannotTell(f"the topics on '{flow.source}'", reason(exc, 10)) from None
        out = {}
        for topic in measured_topics(plan.config, flow, listed):
            for p in partitions_of(uncommitted, topic, flow.source, 10) or []:
                tp = TopicPartition(topic, p)
                try:
                    high = uncommitted.get_watermark_offsets(tp, timeout=10)[1]
                    stable = committed.get_watermark_offsets(tp, timeout=10)[1]
                except Exception as exc:
                    raise CannotTell(f"the end offsets of {topic}[{p}] on '{flow.source}'", reason(exc, 10)) from None
                out[(topic, p)] = (high, stable)
        return out
    finally:
        committed.close()
        uncommitted.close()


def step_quiet(plan: Plan) -> dict[str, Any]:
    """Writes have stopped: the source's end offsets unchanged for ``quiet_s``, and no open transaction (every
    partition's last stable offset at its high watermark)."""
    seen: dict[str, Any] = {"ends": None, "since": 0.0}

    def attempt() -> tuple[bool, str, dict[str, Any]]:
        ends = source_ends(plan)
        if ends != seen["ends"]:
            seen["ends"], seen["since"] = ends, time.monotonic()
        still = time.monotonic() - seen["since"]
        open_tx = sorted(f"{t}[{p}]" for (t, p), (high, stable) in ends.items() if stable < high)
        said = f"{len(open_tx)} partitions with an open transaction ({', '.join(open_tx[:3])})" if open_tx else ""
        said = said or f"end offsets unchanged for {still:.0f} s of {plan.quiet_s:g} s"
        figures = {"partitions": len(ends), "records": sum(h for h, _ in ends.values()), "quiet_s": round(still, 1)}
        return not open_tx and still >= plan.quiet_s, said, figures

    return plan.until(
        f"writes to stop on '{plan.flow.source}' ({plan.quiet_s:g} s quiet, no open transaction)", attempt
    )


def step_caught_up(plan: Plan) -> dict[str, Any]:
    """True lag 0 on every partition, proved: the estimator never reads too high, so an estimate at the source's
    end means every record is on the target."""
    flow = plan.flow

    def attempt() -> tuple[bool, str, dict[str, Any]]:
        mm2 = read_mm2_state(plan.config, flow) if is_mm2(flow) else None
        acked = read_positions(plan.config, plan.flow_name, flow, mm2).acked_next()
        ends = source_ends(plan)
        keys = sorted(ends)
        lags = mirror_lags(
            [ends[k][0] for k in keys], [-1] * len(keys), [acked.get(k, -1) for k in keys], [-1] * len(keys)
        )
        rows = [
            {
                "topic": t,
                "partition": p,
                "source_end": ends[(t, p)][0],
                "acked_next": acked.get((t, p)),
                "true_lag": int(lag),
            }
            for (t, p), lag in zip(keys, lags.true_lag, strict=True)
        ]
        behind = [r for r in rows if r["true_lag"] != 0]
        said = f"{len(behind)} partitions not proved on the target (first: {behind[0]})" if behind else "caught up"
        return not behind, said, {"partitions": rows}

    return plan.until("true lag 0 on every partition (proved by the offset syncs and the target's ends)", attempt)


def translate_one(plan: Plan, group: str) -> list[dict[str, Any]]:
    """``group``'s source commits through the offset syncs, as target offsets (refused while it is active)."""
    flow, config = plan.flow, plan.config
    source_admin = make_admin(config.clusters[flow.source], "mirrorwatch-switchover")
    for alias, admin in (
        (flow.source, source_admin),
        (flow.target, make_admin(config.clusters[flow.target], "mirrorwatch-switchover")),
    ):
        if group_is_active(admin, group, alias):
            raise Blocked(f"group '{group}' is active on '{alias}': stop its consumers there first")
    store = read_offset_syncs(config.clusters[flow.target], offset_syncs_topic(flow.source), flow.target)
    mine = TopicFilter.of(config, flow)
    committed = {k: v for k, v in committed_offsets(source_admin, group).items() if mine.matches(k[0])}
    if not committed:
        raise Blocked(f"group '{group}' has no committed offsets on the flow's topics on '{flow.source}'")
    translations = translate_group(store, committed)
    missing = sorted(set(committed) - {(t.topic, t.partition) for t in translations})
    if missing:
        raise Blocked(f"group '{group}': no offset sync to translate {missing[0][0]}[{missing[0][1]}] with")
    policy = policy_of(flow)
    return [
        {
            "topic": t.topic,
            "partition": t.partition,
            "target_topic": policy.target_topic(t.topic),
            "source_offset": t.upstream_committed,
            "target_offset": t.downstream_offset,
            "redelivered_at_most": t.duplicates,
        }
        for t in translations
    ]


def apply_one(plan: Plan, group: str, rows: list[dict[str, Any]]) -> int:
    admin = make_admin(plan.config.clusters[plan.flow.target], "mirrorwatch-switchover")
    if group_is_active(admin, group, plan.flow.target):
        raise Blocked(f"group '{group}' is active on '{plan.flow.target}': stop its consumers there first")
    offsets = {(r["target_topic"], r["partition"]): r["target_offset"] for r in rows}
    return apply_offsets(admin, group, offsets, forward_only=False)


def verify_one(plan: Plan, group: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The group's committed offsets on the target, read back, against the translation."""
    admin = make_admin(plan.config.clusters[plan.flow.target], "mirrorwatch-switchover")
    held = committed_offsets(admin, group)
    wrong = [
        f"{r['target_topic']}[{r['partition']}] at {held.get((r['target_topic'], r['partition']))}, not {r['target_offset']}"
        for r in rows
        if held.get((r["target_topic"], r["partition"])) != r["target_offset"]
    ]
    if wrong:
        raise Blocked(f"group '{group}' on '{plan.flow.target}': {'; '.join(wrong[:3])}")
    return {"group": group, "partitions": len(rows), "verified": True}
