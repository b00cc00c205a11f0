"""Time to detect, per fault, and pages per incident (issue 27), with the shipped rules and Alertmanager config.

Its own local clusters (east → west), the demo's stack (mirror with heartbeats, canary, monitor; the demo's
intervals and traffic with bursts; no history or Spark), a real Prometheus with grafana/prometheus/
mirrorwatch-rules.yml and the scrape/evaluation intervals of prometheus.example.yml, a real Alertmanager with
grafana/alertmanager/alertmanager.yml whose receivers (only their URLs) point at a webhook receiver the bench runs.
Nothing else is changed. Per fault: the time from the fault to the first page, the pages and notifications while
it lasts and after it is undone, and the floor (bench/detection_floor.py) of the rule that paged.

    .venv/bin/python -m bench.detection [--faults mirror-stop,target-stop] [--hold 150] [--healthy-minutes 10]

A page is a notification to the `mirrorwatch-page` receiver with status firing; "notifications" counts the page
and ticket receivers' (firing and resolved). Ends with one JSON line (bench/README.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import yaml

from mirrorwatch.grafana_build import promql

from .common import machine
from .detection_faults import ENGINE_FAULTS, MM2_FAULTS, EngineStack, Mm2Stack
from .detection_floor import floor_of
from .detection_watch import Watch
from .jsonline import BenchRun

ROOT = Path(__file__).resolve().parents[1]
PROMETHEUS_EXAMPLE = ROOT / "grafana" / "prometheus" / "prometheus.example.yml"
ALERTMANAGER_SHIPPED = ROOT / "grafana" / "alertmanager" / "alertmanager.yml"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    every = ENGINE_FAULTS + MM2_FAULTS
    parser.add_argument(
        "--faults", default=",".join(every), help=f"comma-separated, or 'none' (all: {','.join(every)})"
    )
    parser.add_argument(
        "--hold", type=float, default=150, help="seconds each fault lasts (default 150: past every 2 m `for:`)"
    )
    parser.add_argument("--settle-max", type=float, default=360, help="most seconds to watch after a fault is undone")
    parser.add_argument(
        "--alertmanager",
        type=Path,
        default=ALERTMANAGER_SHIPPED,
        help="Alertmanager config (default: the shipped one; another is for trying changes, and the output says so)",
    )
    parser.add_argument(
        "--healthy-minutes", type=float, default=10, help="healthy stack with bursts, counting notifications"
    )
    args = parser.parse_args(argv)
    args.fault_list = [] if args.faults == "none" else [f for f in args.faults.split(",") if f]
    unknown = sorted(set(args.fault_list) - set(every))
    if unknown:
        parser.error(f"unknown fault {', '.join(unknown)}: choose among {', '.join(every)}")
    return args


def shipped_files(alertmanager: Path) -> tuple[dict, dict, dict]:
    if not alertmanager.exists():
        sys.exit(
            f"detection: {alertmanager} is missing: the bench runs the shipped Alertmanager config (--alertmanager)"
        )
    return (
        promql.load_rules(),
        yaml.safe_load(PROMETHEUS_EXAMPLE.read_text()),
        yaml.safe_load(alertmanager.read_text()),
    )


def with_floor(row: dict, files: tuple[dict, dict, dict], monitor_s: float, canary_s: float) -> dict:
    rules, prometheus, alertmanager = files
    if row.get("first_page"):
        floor = floor_of(row["first_page"], rules, prometheus, alertmanager, monitor_s, canary_s)
        row["floor_s"], row["floor"] = floor.total_s, floor.formula()
    return row


def print_table(rows: list[dict]) -> None:
    head = f"{'fault':<13} {'first page':<32} {'detect s':>8} {'floor s':>7} {'pages':>5} {'+after':>6} {'notif':>5} {'+after':>6}"
    print("\n" + head + "\n" + "-" * len(head))
    for r in rows:
        detect = f"{r['detect_s']:.0f}" if r.get("detect_s") is not None else "-"
        floor = f"{r['floor_s']:.0f}" if r.get("floor_s") is not None else "-"
        first = (r.get("first_page") or "(no page)") + (f" ({r['cause']})" if r.get("cause") else "")
        print(
            f"{r['fault']:<13} {first:<32} {detect:>8} {floor:>7} {r['pages_during']:>5} {r['pages_after']:>6} "
            f"{r['notifications_during']:>5} {r['notifications_after']:>6}"
        )
    for r in rows:
        print(f"\n{r['fault']}: {r.get('note', '')}".rstrip())
        if r.get("floor"):
            print(f"  floor: {r['floor']}")
        print(f"  at the end of the hold: {r.get('signals_at_end_of_hold')}")
        for line in r["story"]:
            print(f"  {line}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    files = shipped_files(args.alertmanager)
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.1f}")
    if args.alertmanager.resolve() != ALERTMANAGER_SHIPPED:
        print(f"NOT the shipped Alertmanager config: {args.alertmanager}")
    params = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "fault_list"}
    with BenchRun("detection", params) as run:
        run.figures["load_average_1m_start"] = os.getloadavg()[0]
        rows: list[dict] = []
        engine_faults = [f for f in args.fault_list if f in ENGINE_FAULTS]
        mm2_faults = [f for f in args.fault_list if f in MM2_FAULTS]
        if engine_faults or args.healthy_minutes > 0:
            with EngineStack(files[1], args.alertmanager) as stack:
                watch = Watch(stack, args.settle_max)
                if args.healthy_minutes > 0:
                    healthy = watch.healthy(args.healthy_minutes * 60)
                    run.figures["healthy"] = healthy
                    print(f"healthy {args.healthy_minutes:g} min: {healthy}")
                for fault in engine_faults:
                    row = with_floor(watch.fault(fault, args.hold), files, stack.monitor_s, stack.canary_s)
                    rows.append(row)
                    run.figures[fault] = {k: v for k, v in row.items() if k != "story"}
                    print(f"{fault}: detect {row.get('detect_s')} s, pages {row['pages_during']}+{row['pages_after']}")
        if mm2_faults:
            with Mm2Stack(files[1], args.alertmanager) as stack:
                watch = Watch(stack, args.settle_max)
                for fault in mm2_faults:
                    row = with_floor(watch.fault(fault, args.hold), files, stack.monitor_s, stack.canary_s)
                    rows.append(row)
                    run.figures[fault] = {k: v for k, v in row.items() if k != "story"}
                    print(f"{fault}: detect {row.get('detect_s')} s, pages {row['pages_during']}+{row['pages_after']}")
        run.figures["load_average_1m_end"] = os.getloadavg()[0]
        print_table(rows)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    main()
