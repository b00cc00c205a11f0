"""How exact the monitor's true lag and RPO seconds are under steady traffic, and what a cycle costs.

Run: .venv/bin/python -m bench.lag_accuracy [--cycles 40] [--targets plain,exactly_once,harness] [--skip-clusters]

1. On fresh local clusters with the real engine (`mirror run`) and the monitor's real Sampler: steady traffic
   at 200 and 5,000 records/s (3 partitions), prefix and identity policy. Per monitor cycle an independent
   reader brackets the ground truth (harness/lag_accuracy.py explains how); prints how far true lag was above
   it (p50/p99/max, records) against the bound (one monitor interval's records per partition), the RPO
   seconds distribution beside the independently measured replication latency, and the cycle time.
   Transactional targets (issue 28), the ground truth counted by an independent read_committed reader (the end
   offsets count commit markers): ``exactly_once``, the engine with ``mirror.delivery: exactly_once``; ``harness``,
   harness/transactional_mirror.py's mirror, which publishes what the engine does and also aborts every fifth
   transaction (aborted records on the target), the monitor told ``delivery: exactly_once``.
2. The pure part of a monitor cycle at 10,000 partitions (no Kafka: a real 10k-partition pair of clusters is
   too heavy for this machine): building the arrays from the sampled dicts, the target-side estimate, the
   lags, records lost, the evaluator and the forecast — the work that grows with the partition count. The
   Kafka reads are batched admin calls (list_offsets ×3, one group describe/offsets) whose cost is the
   brokers'; the exact time lag reads one record per partition that is behind (cached per offset).
Ends with one JSON line (bench/README.md).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from mirrorwatch.core.lag import catch_up_seconds, mirror_lags, rate, records_lost, target_side_acked_next
from mirrorwatch.core.naming import offset_syncs_topic
from mirrorwatch.monitor.evaluator import WindowSet, summarize

from .common import machine
from .jsonline import BenchRun


def accuracy(cycles: int, targets: list[str]) -> dict:
    from harness.helpers import create_topic, produce_numbered
    from harness.lag_accuracy import LatencyReader, RateProducer, measure
    from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
    from harness.transactional_mirror import (
        CommittedCounter,
        TransactionalMirror,
        ensure_syncs_topic,
        harness_or_engine,
    )
    from mirrorwatch.core.config_loading import config_from_dict
    from mirrorwatch.localkafka import LocalClusters
    from mirrorwatch.monitor.sampler import Sampler

    parts, interval_s = 3, 1.0
    figures: dict = {}
    base = Path(tempfile.mkdtemp(prefix="mw-bench-lag-"))
    clusters = LocalClusters(["east", "west"], base).start()
    try:
        east, west = (clusters.clusters[n].bootstrap for n in ("east", "west"))
        runs = [(k, p, r) for k in targets for p in ("prefix", "identity") for r in (200, 5000)]
        for kind, policy, rate_ in runs:
            transactional = kind != "plain"
            topic = f"bench-{kind}-{policy}-{rate_}"
            target_topic = topic if policy == "identity" else f"east.{topic}"
            create_topic(east, topic, parts)
            local = [0] * parts
            if transactional:
                create_topic(west, target_topic, parts)
                ensure_syncs_topic(west, offset_syncs_topic("east"))
            if policy == "identity":
                if not transactional:
                    create_topic(west, target_topic, parts)
                produce_numbered(west, target_topic, 30 * parts, parts)
                local = [30] * parts
            cfg = {
                "clusters": {"east": {"bootstrap.servers": east}, "west": {"bootstrap.servers": west}},
                "flows": {
                    "ew": {
                        "source": "east",
                        "target": "west",
                        "topics": [topic],
                        "policy": policy,
                        "checkpoint_groups": [],
                        "group": f"g-{topic}",
                    }
                },
                "mirror": fast_mirror_settings(heartbeats=False, metrics_port=None),
                "monitor": {"interval_s": interval_s, "window": 3, "history": False},
            }
            if transactional:
                cfg["mirror"]["delivery"] = "exactly_once"
            sampler = Sampler(config_from_dict(cfg))
            producer = RateProducer(east, topic, rate_, parts)
            counter = CommittedCounter(west, target_topic, parts) if transactional else None
            harness = (
                TransactionalMirror(east, west, topic, target_topic, parts, f"g-{topic}", offset_syncs_topic("east"))
                if kind == "harness"
                else None
            )
            try:
                with harness_or_engine(harness, counter, lambda: MirrorProcess(cfg, base / f"{topic}.yaml")) as mirror:
                    produce_numbered(east, topic, parts, parts)
                    wait_until(
                        lambda: all(r["true_lag"] == 0 for r in sampler.sample().views[0].rows()),
                        90,
                        0.5,
                        "caught up",
                        alive=mirror,
                    )
                    latency = LatencyReader(west, target_topic, parts)
                    latency.start()
                    producer.start()
                    time.sleep(2)
                    m = measure(sampler, east, west, topic, target_topic, parts, local, cycles, 0.3, counter)
                    producer.stop()
                    latency.stop()
            finally:
                producer.stop_event.set()
                sampler.close()
            over = m.over()
            rpo = np.asarray([r for r in m.rpo_ms if not np.isnan(r)])
            lat = latency.latencies_ms(m.start_ms, m.end_ms)
            under = int((np.asarray(m.true_lag) < np.asarray(m.lower)).sum())
            figures[f"{kind}_{policy}_{rate_}_per_s"] = {
                "true_lag_above_truth_p50_records": np.percentile(over, 50),
                "true_lag_above_truth_p99_records": np.percentile(over, 99),
                "true_lag_above_truth_max_records": over.max(),
                "bound_records": rate_ / parts * interval_s,
                "samples_below_truth": under,
                "samples": len(over),
                "rpo_p50_ms": np.percentile(rpo, 50),
                "rpo_p99_ms": np.percentile(rpo, 99),
                "replication_latency_p50_ms": np.percentile(lat, 50),
                "replication_latency_p99_ms": np.percentile(lat, 99),
                "cycle_p50_ms": np.percentile(m.cycle_ms, 50),
            }
            print(
                f"{kind:13s} {policy:8s} {rate_:5d}/s  true lag above truth: p50 {np.percentile(over, 50):6.0f} "
                f"p99 {np.percentile(over, 99):6.0f} max {over.max():6.0f} records (bound "
                f"{rate_ / parts * interval_s:.0f}; below truth: {under} of {len(over)})  |  RPO p50 "
                f"{np.percentile(rpo, 50):5.0f} ms p99 {np.percentile(rpo, 99):5.0f} ms  |  replication latency "
                f"p50 {np.percentile(lat, 50):5.0f} ms p99 {np.percentile(lat, 99):5.0f} ms  |  cycle p50 "
                f"{np.percentile(m.cycle_ms, 50):4.0f} ms",
                flush=True,
            )
    finally:
        clusters.stop()
    return figures


def pure_cycle_cost(partitions: int, rounds: int = 20) -> dict:
    rng = np.random.default_rng(1)
    keys = [(f"topic-{i // 100:04d}", i % 100) for i in range(partitions)]
    ws = WindowSet(partitions, 10, 0, 0, 5000)
    times = []
    end = rng.integers(10_000, 1_000_000, partitions)
    for r in range(rounds):
        end = end + rng.integers(0, 100, partitions)
        committed_map = {k: int(e) - 500 for k, e in zip(keys, end)}
        ends = {k: int(e) for k, e in zip(keys, end)}
        starts = {k: 0 for k in keys}
        target_ends = {k: int(e) - 20 for k, e in zip(keys, end)}
        syncs = {k: (int(e) - 300, int(e) - 300, int(e) - 299, int(e) - 250) for k, e in zip(keys, end)}
        t0 = time.perf_counter()
        n = len(keys)
        committed = np.fromiter((committed_map.get(k, -1) for k in keys), np.int64, n)
        source_end = np.fromiter((ends.get(k, -1) for k in keys), np.int64, n)
        log_start = np.fromiter((starts.get(k, -1) for k in keys), np.int64, n)
        target_end = np.fromiter((target_ends.get(k, -1) for k in keys), np.int64, n)
        rows = [syncs.get(k) for k in keys]
        up = np.fromiter((s[0] for s in rows), np.int64, n)
        down = np.fromiter((s[1] for s in rows), np.int64, n)
        acked = np.fromiter((s[2] for s in rows), np.int64, n)
        read = np.fromiter((s[3] for s in rows), np.int64, n)
        est = target_side_acked_next(source_end, committed, up, down, acked, target_end, one_to_one=True)
        lags = mirror_lags(source_end, committed, est, read)
        lost = records_lost(log_start, committed)
        ws.observe(r * 5000, committed, source_end, True, 5000)
        statuses = ws.evaluate(r * 5000)
        statuses[lost > 0] = 6
        summarize(ws, statuses)
        produce = rate(source_end - 100, 0, source_end, 5000)
        catch_up_seconds(lags.true_lag, produce, produce, produce * 5)
        times.append((time.perf_counter() - t0) * 1000)
    print(
        f"pure part of one cycle at {partitions:,} partitions: p50 {np.percentile(times, 50):.1f} ms, "
        f"max {max(times):.1f} ms (arrays from dicts, estimate, lags, records lost, evaluator, forecast)"
    )
    return {"partitions": partitions, "p50_ms": np.percentile(times, 50), "max_ms": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument(
        "--targets",
        default="plain,exactly_once,harness",
        help="comma-separated: plain (the engine, at-least-once), exactly_once (the engine, delivery: "
        "exactly_once), harness (a transactional test mirror that also aborts transactions)",
    )
    parser.add_argument("--skip-clusters", action="store_true")
    args = parser.parse_args()
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if not targets or set(targets) - {"plain", "exactly_once", "harness"}:
        parser.error(f"--targets: plain, exactly_once and/or harness, not {args.targets!r}")
    print(machine())
    with BenchRun("lag_accuracy", vars(args)) as run:
        run.figures["pure_cycle"] = pure_cycle_cost(args.partitions)
        if not args.skip_clusters:
            run.figures["accuracy"] = accuracy(args.cycles, targets)


if __name__ == "__main__":
    main()
