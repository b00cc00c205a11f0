"""How fast the commands start and how much memory the idle services hold (issue 36), in one run.

Start-up: the wall time of ``canary check --help``, ``monitor lag --help`` and ``mirror --help`` against
``python -c pass`` on the same interpreter, interleaved round by round (so a busy spell of the machine hits every
command alike); the median of each, and its delta and ratio to the bare interpreter. Goal: each within 0.3 s.

Memory: two local Kafka clusters and the demo's flow (mirrorwatch.demo's config, without traffic and without the
monitor's scheduled Spark job, which is the analytics role's own process); ``mirror run``, ``canary run`` and
``monitor run`` each idle for ``--settle`` seconds after it serves its metrics, then its resident memory (VmRSS,
the service's process alone; with its anonymous and file-backed parts), the largest of ``--samples`` readings a second
apart. Goal: none above 120 MB. ``--bin`` (once per install) runs the services from other installs' commands, one
install after the other on the same clusters, e.g. this .venv's (every extra) and the base install's
(tests/support/base_install.py makes it in test-artifacts/base-install: no extras), which is what the base image
holds. ``--breakdown`` prints each service's largest mappings (/proc/PID/smaps: the shared libraries' pages, the
heap, anonymous maps).

    .venv/bin/python -m bench.startup [--rounds 20] [--settle 30] [--skip-memory] [--bin DIR ...] [--breakdown]
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

BIN = Path(sys.executable).parent  # the commands timed for start-up; the services' default (--bin)
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


def largest_mappings(pid: int, top: int = 12) -> list[tuple[str, float]]:
    """The process's resident memory by mapping (a shared library, [heap], [anon] for the unnamed maps), in MB,
    the largest first."""
    by_name: dict[str, float] = {}
    name = "[anon]"
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:  # a mapping's header line
            name = fields[5] if len(fields) > 5 else "[anon]"
        elif fields[0] == "Rss:":
            by_name[name] = by_name.get(name, 0.0) + int(fields[1]) / 1024
    return sorted(by_name.items(), key=lambda item: -item[1])[:top]


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


def memory(
    settle_s: float, samples: int, base: Path, installs: list[Path], breakdown: bool
) -> dict[str, dict[str, dict[str, float]]]:
    """Idle RSS of each service, by install (the folder of its commands), one install after the other on the same
    clusters and flow."""
    from mirrorwatch.demo import create_sample_topics, demo_config
    from mirrorwatch.localkafka import LocalClusters

    figures: dict[str, dict[str, dict[str, float]]] = {}
    with LocalClusters(["east", "west"], base / "clusters") as clusters:
        east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
        create_sample_topics(east)
        ports = {name: free_port() for name in ("mirror", "canary", "monitor", "api", "dashboard")}
        config = demo_config(east, west, base, ports)
        del config["monitor"]["analytics"]  # the Spark job: a child process of the analytics role, not the monitor
        path = base / "mirrorwatch.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        for bin_dir in installs:
            figures[str(bin_dir)] = idle_services(bin_dir, path, ports, settle_s, samples, base, breakdown)
    return figures


def idle_services(
    bin_dir: Path, config: Path, ports: dict[str, int], settle_s: float, samples: int, base: Path, breakdown: bool
) -> dict[str, dict[str, float]]:
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, script in SERVICES.items():
            log = base / f"{name}.log"
            with open(log, "wb") as out:
                procs[name] = subprocess.Popen(
                    [str(bin_dir / script), "run", "--config", str(config)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=ENV,
                )
            wait_for_metrics(procs[name], ports[name], log)
        time.sleep(settle_s)  # idle: the canary probes, the monitor samples, the mirror mirrors the canary's records
        readings: dict[str, list[dict[str, float]]] = {name: [] for name in procs}
        for _ in range(samples):
            for name, proc in procs.items():
                readings[name].append(rss_mb(proc.pid))
            time.sleep(1)
        if breakdown:
            for name, proc in procs.items():
                top = ", ".join(f"{m.rsplit('/', 1)[-1]} {mb:.1f}" for m, mb in largest_mappings(proc.pid))
                print(f"{bin_dir} {name}: {top}")
    finally:
        for proc in procs.values():  # the services first, while the brokers are still there
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    figures: dict[str, dict[str, float]] = {}
    for name, values in readings.items():
        top_reading = max(values, key=lambda v: v["VmRSS"])
        figures[name] = {
            "rss_mb": top_reading["VmRSS"],
            "anon_mb": top_reading["RssAnon"],
            "file_mb": top_reading["RssFile"],
            "within_120_mb": top_reading["VmRSS"] <= 120,
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="start-up runs of each command (interleaved)")
    parser.add_argument("--settle", type=float, default=30.0, help="seconds each service idles before its reading")
    parser.add_argument("--samples", type=int, default=5, help="RSS readings per service, a second apart")
    parser.add_argument("--skip-memory", action="store_true", help="start-up only (no clusters)")
    parser.add_argument(
        "--bin",
        type=Path,
        action="append",
        help="the folder of the services' commands, once per install to measure (default: this interpreter's)",
    )
    parser.add_argument("--breakdown", action="store_true", help="print each service's largest mappings (smaps)")
    args = parser.parse_args()
    installs: list[Path] = args.bin or [BIN]
    with BenchRun("startup", {**vars(args), "bin": [str(b) for b in installs]}) as run:
        run.figures["startup"] = startup(args.rounds)
        for name, f in run.figures["startup"].items():
            print(f"{name:<20} {f['median_ms']:7.1f} ms" + (f"  +{f['delta_ms']:.1f} ms" if "delta_ms" in f else ""))
        if not args.skip_memory:
            with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
                run.figures["idle_rss"] = memory(args.settle, args.samples, Path(scratch), installs, args.breakdown)
            for install, services in run.figures["idle_rss"].items():
                print(install)
                for name, f in services.items():
                    print(
                        f"  {name:<18} {f['rss_mb']:7.1f} MB idle ({f['anon_mb']:.1f} anonymous, {f['file_mb']:.1f} files)"
                    )


if __name__ == "__main__":
    main()
