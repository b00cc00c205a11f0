"""Profile the mirror engine with py-spy while it copies a pre-filled topic (100 B records, 6 partitions).

Prints where the engine's time goes (self and inclusive, by source line), from py-spy's raw samples.
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

from .common import create_topic, fresh_clusters, produce_rate
from .mm2 import start_ours, throughput


def summarize(raw: Path, top: int = 12) -> None:
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
    for frame, n in inclusive.most_common(60):
        if "mirrorwatch/mirror" in frame:
            print(f"  {100 * n / total:5.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=600_000)
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    workdir = Path(tempfile.mkdtemp(prefix="mw-profile-"))
    with fresh_clusters() as clusters:
        east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
        create_topic(east, "profile", 6)
        produce_rate(east, "profile", args.records, 100, 6)
        engine = start_ours(east, west, "profile", workdir)
        raw = workdir / "profile.txt"
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
        try:
            rate, cpu = throughput(west, engine, "east.profile", args.records)
            print(f"mirror {rate:,.0f} records/s, {cpu:.1f} CPU s per million")
            recorder.wait(args.seconds + 30)
        finally:
            engine.terminate()
            engine.wait(30)
    summarize(raw)


if __name__ == "__main__":
    main()
