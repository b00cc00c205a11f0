"""How fast the commands start and how much memory the idle services hold (issue 36), in one run.

Start-up: the wall time of ``canary check --help``, ``monitor lag --help`` and ``mirror --help`` against
``python -c pass`` on the same interpreter, interleaved round by round (so a busy spell of the machine hits every
command alike); the median of each, and its delta and ratio to the bare interpreter. Goal: each within 0.3 s.

Memory: two local Kafka clusters and the demo's flow (mirrorwatch.demo's config, without traffic and without the
monitor's scheduled Spark job, which is the analytics role's own process); ``mirror run``, ``canary run`` and
``monitor run`` each idle for ``--settle`` seconds after it serves its metrics, then its resident memory (VmRSS,
the service's process alone; with its anonymous and file-backed parts), the largest of ``--samples`` readings a second
apart. Goal: none above 120 MB.

    .venv/bin/python -m bench.startup [--rounds 20] [--settle 30] [--skip-memory]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

from bench.jsonline import ROOT, BenchRun

BIN = Path(sys.executable).parent
COMMANDS = {
    "bare": [sys.executable, "-c", "pass"],
    "canary_check_help": [str(BIN / "canary"), "check", "--help"],
    "monitor_lag_help": [str(BIN / "monitor"), "lag", "--help"],
    "mirror_help": [str(BIN / "mirror"), "--help"],
}
SERVICES = {"mirror": "mirror", "canary": "canary", "monitor": "monitor"}
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's code, whichever install the interpreter has


def time_once(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, check=True)
    return time.perf_counter() - started


def startup(rounds: int) -> dict[str, dict[str, float]]:
    for argv in COMMANDS.values():  # a first run each: byte-code compiled, files in the page cache
        time_once(argv)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(rounds):
        for name, argv in COMMANDS.items():
            times[name].append(time_once(argv))
    bare = statistics.median(times["bare"])
    figures = {"bare": {"median_ms": bare * 1000}}
    for name, samples in times.items():
        if name != "bare":
            median = statistics.median(samples)
            figures[name] = {
                "median_ms": median * 1000,
                "delta_ms": (median - bare) * 1000,
                "ratio_to_bare": median / bare,
                "within_300_ms": median - bare <= 0.3,
            }
    return figures


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> dict[str, float]:
    """VmRSS and its parts: anonymous memory (the heap, the client library's buffers) and mapped files (shared
    libraries: pyarrow's, numpy's, librdkafka's), in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {key: int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "RssAnon", "RssFile")}


def wait_for_metrics(proc: subprocess.Popen[bytes], port: int, log: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"no metrics on :{port} within {timeout_s:.0f} s: {log.read_text()[-2000:]}")


def memory(settle_s: float, samples: int, base: Path) -> dict[str, dict[str, float]]:
    from mirrorwatch.demo import create_sample_topics, demo_config
    from mirrorwatch.localkafka import LocalClusters

    figures: dict[str, dict[str, float]] = {}
    with LocalClusters(["east", "west"], base / "clusters") as clusters:
        east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
        create_sample_topics(east)
        ports = {name: free_port() for name in ("mirror", "canary", "monitor", "api", "dashboard")}
        config = demo_config(east, west, base, ports)
        del config["monitor"]["analytics"]  # the Spark job: a child process of the analytics role, not the monitor
        path = base / "mirrorwatch.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name, script in SERVICES.items():
                log = base / f"{name}.log"
                with open(log, "wb") as out:
                    procs[name] = subprocess.Popen(
                        [str(BIN / script), "run", "--config", str(path)], stdout=out, stderr=subprocess.STDOUT, env=ENV
                    )
                wait_for_metrics(procs[name], ports[name], log)
            time.sleep(
                settle_s
            )  # idle: the canary probes, the monitor samples, the mirror mirrors the canary's records
            readings: dict[str, list[dict[str, float]]] = {name: [] for name in procs}
            for _ in range(samples):
                for name, proc in procs.items():
                    readings[name].append(rss_mb(proc.pid))
                time.sleep(1)
            for name, values in readings.items():
                top = max(values, key=lambda v: v["VmRSS"])
                figures[name] = {
                    "rss_mb": top["VmRSS"],
                    "anon_mb": top["RssAnon"],
                    "file_mb": top["RssFile"],
                    "within_120_mb": top["VmRSS"] <= 120,
                }
        finally:
            for proc in procs.values():  # the services first, while the brokers are still there
                proc.terminate()
            for proc in procs.values():
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="start-up runs of each command (interleaved)")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds each service idles before its reading")
    parser.add_argument("--samples", type=int, default=5, help="RSS readings per service, a second apart")
    parser.add_argument("--skip-memory", action="store_true", help="start-up only (no clusters)")
    args = parser.parse_args()
    with BenchRun("startup", vars(args)) as run:
        run.figures["startup"] = startup(args.rounds)
        for name, f in run.figures["startup"].items():
            print(f"{name:<20} {f['median_ms']:7.1f} ms" + (f"  +{f['delta_ms']:.1f} ms" if "delta_ms" in f else ""))
        if not args.skip_memory:
            with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
                run.figures["idle_rss"] = memory(args.settle, args.samples, Path(scratch))
            for name, f in run.figures["idle_rss"].items():
                print(f"{name:<20} {f['rss_mb']:7.1f} MB idle ({f['anon_mb']:.1f} anonymous, {f['file_mb']:.1f} files)")


if __name__ == "__main__":
    main()
