"""Benchmark 1: mirror throughput vs the broker ceiling (raw produce-only and consume-only), same clusters, same run.

Prints records/s, MB/s and the ratio mirror / min(produce, consume) for 100 B and 1 KB records on 6 partitions,
for the engine's defaults and for a throughput-leaning producer (linger.ms=20: fuller batches, ~10 ms more latency),
with CPU seconds per million records for the engine and for the target broker. Also the client floor: a bare
consume → produce loop with per-record delivery reports (bench.common.client_floor_rate), the least any mirror
built on this client must do, so mirror / floor says how much of the gap is the engine's own.
Usage: .venv/bin/python -m bench.mirror_throughput [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from .common import client_floor_rate, consume_rate, create_topic, fresh_clusters, machine, produce_rate, warm_up
from .mm2 import cpu_seconds, start_ours, throughput

PARTITIONS = 6
VARIANTS = {"defaults": {}, "linger.ms=20": {"producer": {"linger.ms": 20}}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with fresh_clusters() as clusters:
        east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
        target_broker = clusters["west"].proc.pid
        warm_up(east, west)
        for size in (100, 1024):
            count = args.records if size == 100 else args.records // 2
            # each variant twice, alternating: one pass shows how much this machine wanders between runs
            for round_, (variant, settings) in enumerate(list(VARIANTS.items()) * args.repeat):
                topic = f"bench-{size}b-{variant.split('=')[0].replace('.', '-')}-{round_}"
                create_topic(east, topic, PARTITIONS)
                produced = produce_rate(east, topic, count, size, PARTITIONS)
                consumed = consume_rate(east, topic, count, PARTITIONS)
                floor = client_floor_rate(
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
                print(
                    f"{size:>5} B x {count}, {variant}: produce-only {produced:,.0f}/s ({produced * mb:.1f} MB/s), "
                    f"consume-only {consumed:,.0f}/s ({consumed * mb:.1f} MB/s), "
                    f"client floor {floor:,.0f}/s, mirror {mirrored:,.0f}/s ({mirrored * mb:.1f} MB/s); "
                    f"mirror / min(produce, consume) = {mirrored / ceiling:.2f}, floor / min(produce, consume) = "
                    f"{floor / ceiling:.2f}, mirror / floor = {mirrored / floor:.2f}; CPU s per million records: "
                    f"mirror {cpu_per_million:.1f}, target broker {broker_per_million:.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
