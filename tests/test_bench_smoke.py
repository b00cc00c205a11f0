"""Every bench script runs: a tiny smoke run of each (on the session's Kafka pair where it needs clusters, through
bench.common.CLUSTERS_ENV) that checks its one JSON line. Figures are not judged: sizes this small and a shared,
loaded pair make them meaningless; what is checked is that a refactor cannot leave a script broken unnoticed
(two did, issue 37). The scripts too costly for a smoke run are imported and asked for --help, so an import or
argument error still shows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# script → (arguments of its tiny run, figures its line must hold, needs the Kafka pair)
SMOKE = {
    "coordinator_calls": (["--rounds", "5"], ["describe", "offsets", "helper_rss_mb"], True),
    "evaluator": ([], ["10000_partitions", "100000_partitions"], False),
    "exporter": (["--partitions", "200"], ["first_scrape_ms", "cached_scrape_us"], False),
    "lag_accuracy": (["--skip-clusters", "--cycles", "3", "--partitions", "100"], [], False),
    "mirror_throughput": (
        ["--records", "1200", "--repeat", "1", "--warm-up-records", "0", "--sizes", "100", "--variants", "defaults"],
        ["runs"],
        True,
    ),
    "mm2": (
        ["--quick", "--skip-mm2", "--skip-mm2-eos", "--skip-interval-sweep", "--skip-latency", "--skip-eos"],
        ["throughput"],
        True,
    ),
}
# a run of these costs minutes (Spark, Chromium, broker restarts, Prometheus and Alertmanager, a py-spy profile):
# their smoke is the import and the argument parser
HELP_ONLY = [
    "analytics",
    "canary_detection",
    "dashboard_render",
    "detection",
    "profile_mirror",
    "scrape",
    "soak",
    "startup",
]


def run_bench(script: str, args: list[str], env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", f"bench.{script}", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def json_line(out: str) -> dict:
    lines = [line for line in out.splitlines() if line.startswith('{"bench":')]
    assert len(lines) == 1, out[-3000:]
    return json.loads(lines[0])


def test_every_script_is_smoked():
    scripts = {p.stem for p in (ROOT / "bench").glob("*.py") if f'BenchRun("{p.stem}"' in p.read_text()}
    assert scripts == set(SMOKE) | set(HELP_ONLY)


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_smoke_run_prints_its_json_line(script, request):
    args, figures, needs_kafka = SMOKE[script]
    env = {}
    if needs_kafka:
        source, target = request.getfixturevalue("source"), request.getfixturevalue("target")
        if target.local is None:
            pytest.skip("needs the session's own local pair (the broker's pid): external clusters are given")
        env = {"MIRRORWATCH_BENCH_CLUSTERS": f"east={source.bootstrap},west={target.bootstrap}@{target.local.proc.pid}"}
    done = run_bench(script, args, env, 300)
    record = json_line(done.stdout)
    assert done.returncode == 0 and record["status"] == "ok", done.stdout[-3000:] + done.stderr[-3000:]
    assert record["bench"] == script and record["schema"] == 1
    for name in figures:
        assert name in record["figures"], (name, record["figures"])


@pytest.mark.parametrize("script", HELP_ONLY)
def test_costly_scripts_import_and_parse_their_arguments(script):
    done = run_bench(script, ["--help"], {}, 120)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stdout + done.stderr
