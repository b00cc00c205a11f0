"""Benchmark 7: mirror stop → canary CRITICAL detection time, and its ratio to the probe interval.

The canary cannot call an event lost before ``crit_latency_s`` has passed since it was produced, so the
floor is crit_latency_s (+ up to one interval for the next probe to be judged). Prints each trial and the
ratio detection / interval; ends with one JSON line (bench/README.md). Usage: .venv/bin/python -m bench.canary_detection [--interval 1] [--crit 5] [--trials 3]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from mirrorwatch.localkafka.launcher import free_port

from .common import fresh_clusters, machine
from .jsonline import BenchRun

BIN = Path(sys.executable).parent


def canary_status(url: str) -> int | None:
    try:
        text = urllib.request.urlopen(url, timeout=2).read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("mirrorwatch_canary_status{"):
            return int(float(line.split()[-1]))
    return None


def wait_for(url: str, status: int, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if canary_status(url) == status:
            return time.monotonic()
        time.sleep(0.05)
    raise RuntimeError(f"canary did not reach status {status} within {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--crit", type=float, default=5.0)
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with BenchRun("canary_detection", vars(args)) as run:
        trials(args, run.figures)


def trials(args, figures: dict) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="mw-bench-canary-"))
    with fresh_clusters() as clusters:
        port = free_port()
        config = {
            "clusters": {
                "east": {"bootstrap.servers": clusters["east"].bootstrap},
                "west": {"bootstrap.servers": clusters["west"].bootstrap},
            },
            "flows": {"ew": {"source": "east", "target": "west", "topics": []}},
            "mirror": {"metrics_port": None, "refresh_interval_s": 1, "heartbeat_interval_s": 0.5},
            "canary": {
                "interval_s": args.interval,
                "warn_latency_s": 2,
                "crit_latency_s": args.crit,
                "heartbeat_max_age_s": 60,
                "metrics_port": port,
            },
        }
        path = workdir / "c.yaml"
        path.write_text(yaml.safe_dump(config))
        url = f"http://127.0.0.1:{port}/metrics"
        canary = subprocess.Popen(
            [str(BIN / "canary"), "run", "--config", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=open(workdir / "canary.log", "w"),
        )
        ratios = []
        figures["trials"] = detections = []
        try:
            for trial in range(args.trials):
                mirror = subprocess.Popen(
                    [str(BIN / "mirror"), "run", "--config", str(path)],
                    stdout=subprocess.DEVNULL,
                    stderr=open(workdir / "mirror.log", "a"),
                )
                wait_for(url, 0, 120)
                time.sleep(3 * args.interval)
                stopped = time.monotonic()
                mirror.send_signal(signal.SIGTERM)
                mirror.wait(30)
                detected = wait_for(url, 2, 120) - stopped
                ratios.append(detected / args.interval)
                detections.append({"detection_s": detected, "detection_over_interval": detected / args.interval})
                print(
                    f"trial {trial + 1}: mirror stop → CRITICAL in {detected:.2f} s "
                    f"(interval {args.interval:g} s, crit_latency {args.crit:g} s) → {detected / args.interval:.2f} intervals"
                )
        finally:
            canary.terminate()
            canary.wait(30)
    figures["median_detection_s"] = sorted(d["detection_s"] for d in detections)[len(detections) // 2]
    figures["median_detection_over_interval"] = sorted(ratios)[len(ratios) // 2]
    figures["floor_crit_over_interval"] = args.crit / args.interval
    print(
        f"detection / probe interval: median {sorted(ratios)[len(ratios) // 2]:.2f} "
        f"(floor: crit_latency / interval = {args.crit / args.interval:.2f})"
    )


if __name__ == "__main__":
    main()
