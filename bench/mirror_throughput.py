"""Benchmark 1: mirror throughput vs the broker ceiling (raw produce-only and consume-only), same clusters, same run.

Prints records/s, MB/s and the ratio mirror / min(produce, consume) for 100 B and 1 KB records on 6 partitions,
for the engine's defaults and for a throughput-leaning producer (linger.ms=20: fuller batches, ~10 ms more latency),
with CPU seconds per million records for the engine and for the target broker, and MB/s per engine CPU core
(record bytes moved / the engine process's CPU seconds). Also the client floor: a bare consume → produce loop
with per-record delivery reports (bench.common.client_floor_rate), the least any mirror built on this client
must do, so mirror / floor says how much of the gap is the engine's own (and its MB/s per core, the same way).
Ends with one JSON line (bench/README.md).
Usage: .venv/bin/python -m bench.mirror_throughput [--records N] [--repeat R] [--warm-up-records N] [--sizes 100,1024]
       [--variants defaults,linger.ms=20]
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from pathlib import Path

from .common import client_floor_rate, consume_rate, create_topic, fresh_clusters, machine, warm_up
from .jsonline import BenchRun
from .mm2_runs import PARTITIONS, cpu_seconds, mb_per_core_s, produce_numbered_last, start_ours, throughput

VARIANTS = {"defaults": {}, "linger.ms=20": {"producer": {"linger.ms": 20}}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000, help="100 B records per run (1 KB: half)")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the variants, alternating")
    parser.add_argument(
        "--warm-up-records",
        type=int,
        default=400_000,
        help="records written and read on each cluster first (a cold broker JIT costs whichever phase runs first)",
    )
    parser.add_argument("--sizes", default="100,1024", help="record sizes in bytes, comma-separated")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"some of {', '.join(VARIANTS)}")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    variants = {name: VARIANTS[name] for name in args.variants.split(",") if name in VARIANTS}
    if not sizes or min(sizes) <= 0 or not variants:
        parser.exit(2, f"bench.mirror_throughput: --sizes positive bytes, --variants among {', '.join(VARIANTS)}\n")
    print(f"machine: {machine()}")
    with BenchRun("mirror_throughput", {**vars(args), "partitions": PARTITIONS, "variants": variants}) as run:
        runs = run.figures["runs"] = []
        with fresh_clusters() as clusters:
            east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
            target_broker = clusters["west"].proc.pid
            if args.warm_up_records:
                warm_up(east, west, args.warm_up_records)
            for size in sizes:
                count = args.records if size <= 100 else args.records // 2
                # each variant twice, alternating: one pass shows how much this machine wanders between runs
                for round_, (variant, settings) in enumerate(list(variants.items()) * args.repeat):
                    run_pass = round_ // len(variants) + 1
                    runs.append(one_run(east, west, target_broker, size, count, round_, run_pass, variant, settings))


def one_run(
    east: str,
    west: str,
    target_broker: int,
    size: int,
    count: int,
    round_: int,
    run_pass: int,
    variant: str,
    settings: dict,
) -> dict:
    # unique per run: the clusters may be given, and hold an earlier run's topics (bench.common.CLUSTERS_ENV)
    topic = f"bench-{size}b-{variant.split('=')[0].replace('.', '-')}-{round_}-{uuid.uuid4().hex[:6]}"
    create_topic(east, topic, PARTITIONS)
    produced = produce_numbered_last(east, topic, count, size)  # the throughput reader waits for each last one
    consumed = consume_rate(east, topic, count, PARTITIONS)
    floor, floor_cpu = client_floor_rate(
        east, west, topic, count, PARTITIONS, settings.get("producer", {}).get("linger.ms", 5)
    )
    broker_cpu = cpu_seconds(target_broker)
    proc = start_ours(east, west, topic, Path(tempfile.mkdtemp(prefix="mw-bench-mirror-")), **settings)
    try:
        mirrored, cpu_per_million = throughput(west, proc, f"east.{topic}", count)
    finally:
        proc.terminate()
        proc.wait(30)
    broker_per_million = (cpu_seconds(target_broker) - broker_cpu) * 1e6 / count
    ceiling = min(produced, consumed)
    mb = size / 1e6
    figures = {
        "record_bytes": size,
        "records": count,
        "variant": variant,
        "pass": run_pass,
        "produce_only_records_per_s": produced,
        "consume_only_records_per_s": consumed,
        "client_floor_records_per_s": floor,
        "mirror_records_per_s": mirrored,
        "mirror_mb_per_s": mirrored * mb,
        "mirror_over_ceiling": mirrored / ceiling,
        "floor_over_ceiling": floor / ceiling,
        "mirror_over_floor": mirrored / floor,
        "mirror_cpu_s_per_million": cpu_per_million,
        "target_broker_cpu_s_per_million": broker_per_million,
        "client_floor_cpu_s_per_million": floor_cpu,
        "mirror_mb_per_s_per_core": mb_per_core_s(size, cpu_per_million),
        "client_floor_mb_per_s_per_core": mb_per_core_s(size, floor_cpu),
    }
    print(
        f"{size:>5} B x {count}, {variant}: produce-only {produced:,.0f}/s ({produced * mb:.1f} MB/s), "
        f"consume-only {consumed:,.0f}/s ({consumed * mb:.1f} MB/s), "
        f"client floor {floor:,.0f}/s, mirror {mirrored:,.0f}/s ({mirrored * mb:.1f} MB/s); "
        f"mirror / min(produce, consume) = {mirrored / ceiling:.2f}, floor / min(produce, consume) = "
        f"{floor / ceiling:.2f}, mirror / floor = {mirrored / floor:.2f}; CPU s per million records: "
        f"mirror {cpu_per_million:.1f}, client floor {floor_cpu:.1f}, target broker {broker_per_million:.1f}; "
        f"MB/s per core: mirror {figures['mirror_mb_per_s_per_core']:.1f}, "
        f"client floor {figures['client_floor_mb_per_s_per_core']:.1f}",
        flush=True,
    )
    return figures


if __name__ == "__main__":
    main()
