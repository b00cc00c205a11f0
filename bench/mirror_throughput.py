"""Benchmark 1: mirror throughput vs the broker ceiling (raw produce-only and consume-only), same clusters, same run.

Prints records/s, MB/s and the ratio mirror / min(produce, consume) for 100 B and 1 KB records on 6 partitions.
Usage: .venv/bin/python -m bench.mirror_throughput [--records N]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


from .common import consume_rate, create_topic, fresh_clusters, machine, produce_rate
from .mm2 import start_ours, throughput

PARTITIONS = 6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with fresh_clusters() as clusters:
        east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
        for size in (100, 1024):
            topic = f"bench-{size}b"
            count = args.records if size == 100 else args.records // 2
            create_topic(east, topic, PARTITIONS)
            produced = produce_rate(east, topic, count, size, PARTITIONS)
            consumed = consume_rate(east, topic, count, PARTITIONS)
            proc = start_ours(east, west, topic, Path(tempfile.mkdtemp(prefix="mw-bench-mirror-")))
            try:
                mirrored, cpu_per_million = throughput(west, proc, f"east.{topic}", count)
            finally:
                proc.terminate()
                proc.wait(30)
            ceiling = min(produced, consumed)
            mb = size / 1e6
            print(f"{size:>5} B x {count}: produce-only {produced:,.0f}/s ({produced * mb:.1f} MB/s), "
                  f"consume-only {consumed:,.0f}/s ({consumed * mb:.1f} MB/s), "
                  f"mirror {mirrored:,.0f}/s ({mirrored * mb:.1f} MB/s); "
                  f"mirror / min(produce, consume) = {mirrored / ceiling:.2f}; "
                  f"mirror CPU {cpu_per_million:.1f} s per million records")


if __name__ == "__main__":
    main()
