"""True lag and RPO seconds under steady traffic, prefix and identity, against an independent reader's ground
truth (harness/lag_accuracy.py), with the real engine and the monitor's real sampling code."""

from __future__ import annotations

import time

import numpy as np
import pytest

from harness.helpers import create_topic, produce_numbered
from harness.lag_accuracy import LatencyReader, RateProducer, measure
from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.monitor.sampler import Sampler

PARTS = 3
# The monitor interval the over-report bound is stated in. Prefix: 1 s, five times stricter than the default,
# since its estimate comes from the target end sampled in the cycle itself. Identity: the default 5 s — its
# true lag rests on the engine's syncs, which are one sync interval (0.1 s) plus two trips through the brokers
# (produce to the offset-syncs topic, fetch by the monitor's tracker) old: measured up to ~1.2 s of records at
# p99 on this shared 2-core machine at load 30-45 (docs/monitor.md).
INTERVAL_S = {"prefix": 1.0, "identity": 5.0}
# The median, over the partition samples, of the monitor's RPO minus the independent reader's RPO over the same
# cycle (``assert_rpo_follows_the_reader``): the 250 ms for prefix; identity adds the same sync age to the
# oldest record's age (measured 230-260 ms more than prefix at that load).
RPO_TOLERANCE_MS = {"prefix": 250, "identity": 500}


def flow_config(source, target, topic, policy: str) -> dict:
    return {
        "clusters": {"east": source.config(), "west": target.config()},
        "flows": {
            "east-west": {
                "source": "east",
                "target": "west",
                "topics": [topic],
                "checkpoint_groups": [],
                "group": f"mw-mirror-{topic}",
                "policy": policy,
            }
        },
        "mirror": fast_mirror_settings(heartbeats=False, metrics_port=None),
        "monitor": {"interval_s": INTERVAL_S[policy], "window": 3, "history": False},
    }


def assert_rpo_follows_the_reader(m, reader: LatencyReader, tolerance_ms: float) -> None:
    """The monitor's RPO minus the independent reader's RPO over the same cycle (ms), per partition sample where
    both are known: known for nine samples in ten, and within ``tolerance_ms`` at the median. Compared moment by
    moment, not as two medians over the run: while the mirror falls behind, the records received in the measured
    window are the early ones, and their latencies say little of the RPO then."""
    rpo, truth = np.asarray(m.rpo_ms), m.rpo_truth_ms(reader)
    known = ~np.isnan(rpo) & ~np.isnan(truth)
    off = rpo[known] - truth[known]
    print(f"rpo − the reader's rpo at the same cycles: p50 {np.percentile(off, 50):.0f} ms, {len(off)} samples")
    assert len(off) >= len(m.rpo_ms) * 0.9
    assert abs(np.percentile(off, 50)) <= tolerance_ms


@pytest.mark.parametrize("policy,rate", [("prefix", 200), ("prefix", 5000), ("identity", 200), ("identity", 5000)])
def test_true_lag_and_rpo_under_steady_traffic(source, target, topic_name, tmp_path, policy, rate):
    create_topic(source.bootstrap, topic_name, PARTS)
    target_topic = topic_name if policy == "identity" else f"east.{topic_name}"
    local = [0] * PARTS
    if policy == "identity":
        # active-active: the target topic already holds local writes, which must not count as mirrored
        create_topic(target.bootstrap, target_topic, PARTS)
        produce_numbered(target.bootstrap, target_topic, 30 * PARTS, PARTS)
        local = [30] * PARTS
    cfg = flow_config(source, target, topic_name, policy)
    sampler = Sampler(config_from_dict(cfg))
    producer = RateProducer(source.bootstrap, topic_name, rate, PARTS)
    try:
        with MirrorProcess(cfg, tmp_path / "mirror.yaml") as mirror:
            produce_numbered(source.bootstrap, topic_name, PARTS, PARTS)  # one record each: the engine is assigned
            wait_until(
                lambda: all(r["true_lag"] == 0 for r in sampler.sample().views[0].rows()),
                90,
                0.5,
                "mirror caught up",
                alive=mirror,
            )
            latency = LatencyReader(target.bootstrap, target_topic, PARTS)
            latency.start()
            producer.start()
            time.sleep(1.5)  # steady state
            m = measure(
                sampler,
                source.bootstrap,
                target.bootstrap,
                topic_name,
                target_topic,
                PARTS,
                local,
                cycles=20,
                every_s=0.2,
            )
            producer.stop()
            # idle again: exactly 0
            wait_until(
                lambda: all(r["true_lag"] == 0 and r["rpo_seconds"] == 0.0 for r in sampler.sample().views[0].rows()),
                30,
                0.5,
                "idle at 0",
                alive=mirror,
            )
            latency.stop(idle=True)  # it has read every record: its RPO at each cycle is known
    finally:
        producer.stop_event.set()
        sampler.close()

    true_lag, lower = np.asarray(m.true_lag), np.asarray(m.lower)
    over = m.over()
    per_interval = rate / PARTS * INTERVAL_S[policy]  # records one partition receives in one monitor interval
    rpo = np.asarray([r for r in m.rpo_ms if not np.isnan(r)])
    lat = latency.latencies_ms(m.start_ms, m.end_ms)
    print(
        f"\n{policy} {rate}/s: over truth p50 {np.percentile(over, 50):.0f} p99 {np.percentile(over, 99):.0f} "
        f"max {over.max():.0f} records (bound {per_interval:.0f}); rpo p50 {np.percentile(rpo, 50):.0f} ms "
        f"p99 {np.percentile(rpo, 99):.0f} ms; latency p50 {np.percentile(lat, 50):.0f} ms "
        f"p99 {np.percentile(lat, 99):.0f} ms; cycle p50 {np.percentile(m.cycle_ms, 50):.0f} ms"
    )
    print(f"cycles without figures: {m.unknown}")
    assert len(m.unknown) <= 2, m.unknown  # of 20 cycles
    assert (true_lag >= 0).all()
    assert (true_lag >= lower).all(), (
        f"under-reported: {list(zip(true_lag[true_lag < lower], lower[true_lag < lower]))}"
    )
    assert np.percentile(over, 99) <= per_interval
    assert len(rpo) >= len(m.rpo_ms) * 0.9 and len(lat) > 100
    assert_rpo_follows_the_reader(m, latency, RPO_TOLERANCE_MS[policy])


@pytest.mark.parametrize("writer,policy", [("harness", "prefix"), ("engine", "prefix"), ("engine", "identity")])
def test_true_lag_and_rpo_on_a_transactional_target(source, target, topic_name, tmp_path, writer, policy):
    """The same bounds on a target written in transactions (issue 28): a commit marker after every transaction.
    ``engine``: the engine's ``delivery: exactly_once``. ``harness``: harness/transactional_mirror.py's mirror,
    which publishes what the engine publishes and also aborts every fifth transaction (its records stay on the
    target). The ground truth counts the records a read_committed reader finds on the target (the end offsets would
    count markers and aborted records): true lag never below it, over by at most one monitor interval's records at
    p99. The estimate rests on the syncs and commits there, as under identity (the target end proves nothing past
    the newest sync, core.lag.target_side_acked_next): identity's interval and RPO tolerance, for both policies.
    Measured at load ~20 with the harness: prefix p99 over 570 records, above the 667 a 1 s interval would allow by
    a hair; the old extrapolation (u + T − d) under-reported on every sample. Identity through the harness is left
    out (its estimate never reads the target end; the engine's identity case covers it)."""
    from harness.transactional_mirror import (
        CommittedCounter,
        TransactionalMirror,
        ensure_syncs_topic,
        harness_or_engine,
    )
    from mirrorwatch.core.naming import offset_syncs_topic

    rate = 2000
    create_topic(source.bootstrap, topic_name, PARTS)
    target_topic = topic_name if policy == "identity" else f"east.{topic_name}"
    create_topic(target.bootstrap, target_topic, PARTS)
    local = [0] * PARTS
    if policy == "identity":
        produce_numbered(target.bootstrap, target_topic, 30 * PARTS, PARTS)
        local = [30] * PARTS
    ensure_syncs_topic(target.bootstrap, offset_syncs_topic("east"))
    cfg = flow_config(source, target, topic_name, policy)
    cfg["mirror"]["delivery"] = "exactly_once"
    sampler = Sampler(config_from_dict(cfg))
    harness = None
    if writer == "harness":
        harness = TransactionalMirror(
            source.bootstrap,
            target.bootstrap,
            topic_name,
            target_topic,
            PARTS,
            f"mw-mirror-{topic_name}",
            offset_syncs_topic("east"),
        )
    counter = CommittedCounter(target.bootstrap, target_topic, PARTS)
    producer = RateProducer(source.bootstrap, topic_name, rate, PARTS)
    latency = LatencyReader(target.bootstrap, target_topic, PARTS)
    try:
        with harness_or_engine(harness, counter, lambda: MirrorProcess(cfg, tmp_path / "mirror.yaml")) as mirror:
            produce_numbered(source.bootstrap, topic_name, PARTS, PARTS)
            wait_until(
                lambda: all(r["true_lag"] == 0 for r in sampler.sample().views[0].rows()),
                90,
                0.5,
                "caught up",
                alive=mirror,
            )
            latency.start()
            producer.start()
            time.sleep(1.5)
            m = measure(
                sampler, source.bootstrap, target.bootstrap, topic_name, target_topic, PARTS, local, 12, 0.2, counter
            )
            producer.stop()
            wait_until(
                lambda: all(r["true_lag"] == 0 and r["rpo_seconds"] == 0.0 for r in sampler.sample().views[0].rows()),
                30,
                0.5,
                "idle at 0",
                alive=mirror,
            )
            latency.stop(idle=True)
            ends = counter.stable_ends()
            # the counter counts every record a read_committed reader finds, ``local`` ones included
            markers = [e - c for e, c in zip(ends, counter.count_below(ends))]
    finally:
        producer.stop_event.set()
        sampler.close()
    true_lag, lower = np.asarray(m.true_lag), np.asarray(m.lower)
    over = m.over()
    per_interval = rate / PARTS * INTERVAL_S["identity"]
    rpo = np.asarray([r for r in m.rpo_ms if not np.isnan(r)])
    lat = latency.latencies_ms(m.start_ms, m.end_ms)
    print(
        f"\ntransactional ({writer}) {policy} {rate}/s (offsets without a record {markers}, ends {ends}, records "
        f"handed out again to the counter {counter.redelivered}): over truth p50 {np.percentile(over, 50):.0f} p99 "
        f"{np.percentile(over, 99):.0f} max {over.max():.0f} (bound {per_interval:.0f}); rpo p50 "
        f"{np.percentile(rpo, 50):.0f} ms; latency p50 {np.percentile(lat, 50):.0f} ms; monitor cycle p50 "
        f"{np.percentile(m.cycle_ms, 50):.0f} ms"
    )
    assert all(x > 0 for x in markers), markers  # the target really holds offsets without a record
    assert harness is None or harness.aborted >= 3
    print(f"cycles without figures: {m.unknown}")
    assert len(m.unknown) <= 1, m.unknown  # of 12 cycles
    assert (true_lag >= lower).all(), (
        f"under-reported: {list(zip(true_lag[true_lag < lower], lower[true_lag < lower]))}"
    )
    assert np.percentile(over, 99) <= per_interval
    assert len(rpo) >= len(m.rpo_ms) * 0.9 and len(lat) > 100
    assert_rpo_follows_the_reader(m, latency, RPO_TOLERANCE_MS["identity"])
