"""Profile the mirror engine with py-spy while it copies a pre-filled topic (100 B records, 6 partitions).

Prints where the engine's time goes (self and inclusive, by source line), from py-spy's raw samples, and ends
with one JSON line (bench/README.md).
Needs the bench extra: pip install -e '.[bench]'. Usage: .venv/bin/python -m bench.profile_mirror [--records N]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from .common import create_topic, fresh_clusters
from .jsonline import BenchRun
from .mm2_runs import PARTITIONS, mb_per_core_s, produce_numbered_last, start_ours, throughput


def summarize(raw: Path, top: int = 12) -> dict:
    own, inclusive, total = Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames, n = stack.split(";"), int(count)
        total += n
        own[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    print(f"{total} samples; self time:")
    for frame, n in own.most_common(top):
        print(f"  {100 * n / total:5.1f}%  {frame}")
    print("inclusive, engine code:")
    engine = {}
    for frame, n in inclusive.most_common(60):
        if "mirrorwatch/mirror" in frame:
            print(f"  {100 * n / total:5.1f}%  {frame}")
            engine[frame] = 100 * n / total
    return {
        "samples": total,
        "self_pct": {frame: 100 * n / total for frame, n in own.most_common(top)},
        "inclusive_engine_pct": engine,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=600_000)
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        parser.exit(
            2,
            "bench.profile_mirror: py-spy is not installed; install the bench extra: "
            ".venv/bin/pip install -e '.[bench]'\n",
        )
    workdir = Path(tempfile.mkdtemp(prefix="mw-profile-"))
    with BenchRun("profile_mirror", vars(args)) as run:
        with fresh_clusters() as clusters:
            east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
            topic = f"profile-{workdir.name}"  # its own topic and group: the clusters may be given (bench.common)
            create_topic(east, topic, PARTITIONS)
            produce_numbered_last(east, topic, args.records, 100)  # the throughput reader waits for each last one
            engine = start_ours(east, west, topic, workdir)
            raw = workdir / "profile.txt"
            recorder = None
            try:
                recorder = subprocess.Popen(
                    [
                        spy,
                        "record",
                        "-p",
                        str(engine.pid),
                        "-o",
                        str(raw),
                        "-f",
                        "raw",
                        "-r",
                        "200",
                        "-d",
                        str(args.seconds),
                        "--nonblocking",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                rate, cpu = throughput(west, engine, f"east.{topic}", args.records)
                print(f"mirror {rate:,.0f} records/s, {cpu:.1f} CPU s per million (under the profiler)")
                run.figures.update(
                    {"records_per_s": rate, "cpu_s_per_million": cpu, "mb_per_s_per_core": mb_per_core_s(100, cpu)}
                )
                recorder.wait(args.seconds + 30)
            finally:
                if recorder is not None and recorder.poll() is None:
                    recorder.terminate()
                    recorder.wait(30)
                engine.terminate()
                engine.wait(30)
        run.figures["profile"] = summarize(raw)


if __name__ == "__main__":
    main()
