"""The status page's time to first render in headless Chromium, at 1,000 partitions (and a small flow for scale).

Run: .venv/bin/python bench/dashboard_render.py [--partitions 1000] [--runs 3]

A stub monitor API serves the answers recorded from the real monitor (tests/fixtures/dashboard/), grown to N
partitions over 20 topics, plus the recorded recent figures and canary metrics; the page is started with
`monitor dashboard` (Streamlit, headless) and opened in Debian's Chromium through Playwright, a new profile
and a new page per run. ``--analytics-dir`` points the History view at another analytics output (e.g. the fleet history's,
``bench.analytics --fleet``), ``--views`` limits the views timed. Time to first render = from navigation start until the view's last element is on the
page with its charts drawn (Vega canvas or SVG): the overview's first chart; the detail view's partition table
and its three charts. Printed, not asserted: figures here vary with the machine's load. Ends with one JSON
line (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import machine  # noqa: E402
from bench.jsonline import BenchRun  # noqa: E402
from harness.chromium import CHROMIUM, CHROMIUM_FLAGS  # noqa: E402
from harness.dashboard_stub import FIXTURES, StubServer, analytics_status, big_flow  # noqa: E402
from mirrorwatch.localkafka.launcher import free_port  # noqa: E402

CHARTS = "document.querySelectorAll('.vega-embed canvas, .vega-embed svg.marks').length"


def wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise SystemExit(f"bench: {what} did not happen within {timeout_s:g} s")


def render_s(context, url: str, view: str, charts: int, marker: str) -> float:
    page = context.new_page()
    try:
        started = time.perf_counter()
        page.goto(url)
        if view != "Overview":
            wait(lambda: "Flow detail" in page.evaluate("document.body.innerText"), 60, "the sidebar")
            started = time.perf_counter()  # measure the view itself, not the overview before the click
            page.get_by_text(view, exact=True).click()
        wait(
            lambda: marker in page.evaluate("document.body.innerText") and page.evaluate(CHARTS) >= charts,
            120,
            f"{view} drawn",
        )
        return time.perf_counter() - started
    finally:
        page.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--analytics-dir",
        default=str(FIXTURES / "analytics"),
        help="the analytics output the History view reads (e.g. bench.analytics --fleet's) [default: the fixtures']",
    )
    parser.add_argument("--views", default="Overview,Flow detail,History", help="comma-separated views to time")
    args = parser.parse_args()
    stub = StubServer()
    work = Path(tempfile.mkdtemp(prefix="mw-bench-page-"))
    page_port = free_port()
    config = {
        "clusters": {"east": {"bootstrap.servers": "127.0.0.1:1"}, "west": {"bootstrap.servers": "127.0.0.1:2"}},
        "flows": {"east-west": {"source": "east", "target": "west"}},
        "dashboard": {
            "monitor_url": stub.url,
            "canary_url": f"{stub.url}/metrics",
            "refresh_s": 60,
            "analytics_dir": args.analytics_dir,
        },
    }
    (work / "mirrorwatch.yaml").write_text(yaml.safe_dump(config))
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mirrorwatch.dashboards.cli",
            "--config",
            str(work / "mirrorwatch.yaml"),
            "--port",
            str(page_port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{page_port}/"
    print(f"# status page time to first render, headless Chromium; {machine()}")
    run = BenchRun("dashboard_render", vars(args))
    try:
        with run:
            measure(args, stub, url, run.figures)
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:  # Streamlit slow to stop on a loaded machine
            server.kill()
            server.wait()
        stub.close()
        shutil.rmtree(work, ignore_errors=True)


def measure(args, stub, url: str, figures: dict) -> None:
    from playwright.sync_api import sync_playwright

    wait(lambda: _up(url), 60, "the page server")
    with sync_playwright() as pw:
        for partitions in sorted({12, args.partitions}):
            stub.serve("degraded")
            stub.routes["/v1/analytics"] = (200, "application/json", analytics_status("ok"))
            stub.routes["/v1/flows"] = (200, "application/json", lambda p=partitions: json.dumps(big_flow(p)).encode())
            for view, charts, marker in (
                ("Overview", 1, "Status changes"),
                ("Flow detail", 3, "Mean round trip"),
                ("History", history_charts(args.analytics_dir), "Daily p99 trend"),
            ):
                if view not in args.views.split(","):
                    continue
                times = []
                for _ in range(args.runs + 1):  # the first run warms Streamlit's caches and the browser: dropped
                    profile = tempfile.mkdtemp(prefix="mw-chromium-")
                    context = pw.chromium.launch_persistent_context(
                        profile,
                        executable_path=CHROMIUM,
                        headless=True,
                        args=CHROMIUM_FLAGS,
                        viewport={"width": 1400, "height": 1000},
                    )
                    try:
                        times.append(render_s(context, url, view, charts, marker))
                    finally:
                        context.close()
                        shutil.rmtree(profile, ignore_errors=True)
                shown = ", ".join(f"{t:.2f}" for t in times[1:])
                figures.setdefault(f"{partitions}_partitions", {})[view.lower().replace(" ", "_")] = {
                    "first_render_median_s": statistics.median(times[1:]),
                    "first_render_runs_s": times[1:],
                }
                print(
                    f"{partitions:>5} partitions  {view:<12} first render {statistics.median(times[1:]):.2f} s "
                    f"(median of {args.runs}: {shown})"
                )


def history_charts(analytics_dir: str) -> int:
    """Charts the History view draws: compliance, two trends, and the incident's if there is one."""
    import pyarrow.parquet as pq

    return 4 if pq.read_metadata(next(Path(analytics_dir, "incidents").glob("*.parquet"))).num_rows else 3


def _up(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


if __name__ == "__main__":
    main()
