"""Benchmark 1: mirror throughput vs the broker ceiling (raw produce-only and consume-only), same clusters, same run.

Prints records/s, MB/s and the ratio mirror / min(produce, consume) for 100 B and 1 KB records on 6 partitions.
Usage: .venv/bin/python -m bench.mirror_throughput [--records N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from .common import consume_rate, create_topic, end_total, fresh_clusters, machine, produce_rate

PARTITIONS = 6


def mirror_rate(east: str, west: str, topic: str, count: int) -> tuple[float, float]:
    """(records/s, CPU seconds) for `mirror run` copying the pre-filled topic, timed from its first record."""
    workdir = Path(tempfile.mkdtemp(prefix="mw-bench-mirror-"))
    config = {"clusters": {"east": {"bootstrap.servers": east}, "west": {"bootstrap.servers": west}},
              "flows": {"ew": {"source": "east", "target": "west", "topics": [topic], "group": f"bench-{topic}"}},
              "mirror": {"metrics_port": None, "heartbeats": False, "checkpoint_interval_s": 3600}}
    path = workdir / "mirror.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.Popen([str(Path(sys.executable).parent / "mirror"), "run", "--config", str(path)],
                            stdout=subprocess.DEVNULL, stderr=open(workdir / "mirror.log", "w"))
    target = f"east.{topic}"
    first = None
    try:
        while True:
            try:
                done = end_total(west, target, PARTITIONS)
            except Exception:
                done = 0
            now = time.perf_counter()
            if done and first is None:
                first, first_count = now, done
            if done >= count:
                break
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)
    cpu = _child_cpu()
    return (count - first_count) / (now - first), cpu


def _child_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
            cpu_before = _child_cpu()
            mirrored, cpu_after = mirror_rate(east, west, topic, count)
            ceiling = min(produced, consumed)
            mb = size / 1e6
            print(f"{size:>5} B x {count}: produce-only {produced:,.0f}/s ({produced * mb:.1f} MB/s), "
                  f"consume-only {consumed:,.0f}/s ({consumed * mb:.1f} MB/s), "
                  f"mirror {mirrored:,.0f}/s ({mirrored * mb:.1f} MB/s); "
                  f"mirror / min(produce, consume) = {mirrored / ceiling:.2f}; "
                  f"mirror CPU {1e6 * (cpu_after - cpu_before) / count:.1f} s per million records")


if __name__ == "__main__":
    main()
