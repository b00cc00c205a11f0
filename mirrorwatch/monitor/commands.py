"""The monitor's own commands: ``monitor run`` (the service) and ``monitor lag`` (a one-shot table)."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any, TypedDict

import click

from ..core.cli import UserError, setup_logging
from ..core.oneshot import probe_timeout, require_clusters, timeout_option, within
from ..core.status import NOT_MOVING_AFTER_S, CanaryStatus, GroupStatus

if TYPE_CHECKING:  # the sampler, the model and numpy load when a command runs; `monitor lag --help` needs none
    from ..core.config import Config
    from .model import GroupView, Snapshot

EXIT_UNKNOWN = int(CanaryStatus.UNKNOWN)  # a cluster could not be reached (the Nagios code the canary uses too)


def _load(path: str) -> Config:
    from ..core.config_loading import load_config

    return load_config(path)


@click.command(
    "run",
    help="Run the monitor service: sampling, evaluator, history, Prometheus and status API. "
    "SIGUSR1 runs the scheduled Spark job (monitor.analytics) at once.",
)
@click.option("--config", "config_path", required=True, help="mirrorwatch YAML config file")
@click.option("-v", "--verbose", is_flag=True)
def run(config_path: str, verbose: bool) -> None:
    config = _load(config_path)
    setup_logging(verbose)
    from .service import MonitorService, run_until_signalled

    service = MonitorService(config)
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("mirrorwatch.monitor").info("monitor: signal %d, stopping", signum)
        stop.set()

    def on_run_analytics(_signum: int, _frame: FrameType | None) -> None:
        # `kill -USR1 <pid>`: the Spark job now (after an incident, say), not at the next interval; a thread of its
        # own, since a signal handler must not wait on the scheduler's locks
        threading.Thread(target=service.run_analytics_now, name="analytics-now", daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_run_analytics)
    try:
        run_until_signalled(service, stop)
    except OSError as exc:  # e.g. the port is taken
        raise UserError(f"cannot start the monitor: {exc.strerror or exc}") from None


@click.command("lag", help="One-shot lag table: committed, read and true lag, time lag and status per partition.")
@click.option("--config", "config_path", required=True, help="mirrorwatch YAML config file")
@click.option("--flow", "flow_name", default=None, help="only this flow (default: every flow and watched group)")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of a table")
@click.option(
    "--samples",
    default=3,
    show_default=True,
    type=click.IntRange(1, 100),
    help="samples taken (the status needs more than one to tell STOP from STALL from progress)",
)
@click.option("--every", default=1.0, show_default=True, type=click.FloatRange(0.1, 60), help="seconds between samples")
@timeout_option
@click.option("-v", "--verbose", is_flag=True, help="log to stderr (client library lines included)")
def lag(
    config_path: str, flow_name: str | None, as_json: bool, samples: int, every: float, timeout_s: float, verbose: bool
) -> None:
    config = _load(config_path)
    if flow_name is not None:
        name, flow = config.flow(flow_name)
        config = config.model_copy(
            update={"flows": {name: flow}, "monitor": config.monitor.model_copy(update={"groups": []})}
        )
    if not config.flows and not config.monitor.groups:
        raise UserError("nothing to watch: the config defines no flows and no monitor.groups")
    if verbose:
        setup_logging(True)
    else:
        logging.basicConfig(level=logging.ERROR, stream=sys.stderr)  # librdkafka retries are noise in a one-shot
    roles: dict[str, str] = {}
    for flow in config.flows.values():
        roles.setdefault(flow.source, "source")
        roles.setdefault(flow.target, "target")
    needed = {a for f in config.flows.values() for a in (f.source, f.target)} | {
        g.cluster for g in config.monitor.groups
    }
    require_clusters([(a, config.clusters[a]) for a in sorted(needed)], timeout_s, roles)
    first, last = within(timeout_s, lambda: _sample(config, samples, every, timeout_s), "monitor lag")
    from .one_look import judge_snapshot

    snap = judge_snapshot(first, last, config.monitor.allowed_lag)
    judged = _judged(first, last)
    # exit 3 only for what could not be read; a status one look could not tell is in the output, with its reason
    unknown = [v for v in snap.views if v.group_status == GroupStatus.UNKNOWN and v.error is not None]
    reason = (unknown[0].error or f"cannot reach cluster '{unknown[0].cluster}'") if unknown else None
    if as_json:
        body = dict(snapshot_json(snap), judged=judged)
        if reason:
            body.update(error=reason, exit_code=EXIT_UNKNOWN)
        click.echo(json.dumps(body, indent=2, allow_nan=False))
        if reason:  # exactly one JSON object on stdout: the reason is in it, and on stderr for a person
            click.echo(f"monitor: {reason}", err=True)
            raise click.exceptions.Exit(EXIT_UNKNOWN)
        return
    print_tables(snap)
    if snap.views and not (reason and len(unknown) == len(snap.views)):
        click.echo(
            f"status judged from one look: {judged['samples']} sample(s) over {judged['span_s']:g} s (OK: caught up "
            f"or seen moving; STOP: not moving with RPO or heartbeats over {judged['not_moving_after_s']:g} s; "
            "UNKNOWN: could not tell; docs/monitor.md)"
        )
    if reason:
        raise UserError(reason, EXIT_UNKNOWN)


def _sample(config: Config, samples: int, every: float, timeout_s: float) -> tuple[Snapshot, Snapshot]:
    """The first and the last of ``samples`` samples ``every`` seconds apart (one judges movement between them)."""
    from .sampler import Sampler

    sampler = Sampler(config, timeout_s=probe_timeout(timeout_s))
    try:
        sampler.wait_caught_up(min(10.0, 2 * sampler.timeout_s))
        # the Connect REST state is polled on a thread of its own (started with the sampler): its first answer
        for watch in sampler.connect.values():
            watch.first.wait(min(timeout_s / 2, len(watch.names) * watch.settings.timeout_s + 1))
        first = snap = sampler.sample()
        for _ in range(samples - 1):
            time.sleep(every)
            snap = sampler.sample()
    finally:
        sampler.close()
    return first, snap


class Judged(TypedDict):
    """How the printed status was judged."""

    by: str
    samples: int
    span_s: float
    not_moving_after_s: float


def _judged(first: Snapshot, last: Snapshot) -> Judged:
    """How the printed status was judged (the JSON's ``judged``; the table's last line)."""
    return {
        "by": "one look",
        "samples": last.seq - first.seq + 1,
        "span_s": round((last.ts_ms - first.ts_ms) / 1000, 1),
        "not_moving_after_s": NOT_MOVING_AFTER_S,
    }


def snapshot_json(snap: Snapshot) -> dict[str, Any]:
    from .api import flow_body, group_status_body

    return {
        "ts_ms": snap.ts_ms,
        "clusters": {c: {"up": up} for c, up in snap.cluster_up.items()},
        "flows": [flow_body(v) for v in snap.views if v.kind == "mirror"],
        "groups": [
            dict(group_status_body(v, all_partitions=True), partitions_detail=v.rows())
            for v in snap.views
            if v.kind == "group"
        ],
    }


def _n(x: object) -> str:
    return "-" if x is None else str(x)


def _t(x: float | None) -> str:
    from ..core.lag import format_duration

    return "-" if x is None else format_duration(x)


def _rpo(x: float | None) -> str:
    # a healthy mirror's RPO is milliseconds: "0.0s" would hide the difference between 0 and 40 ms
    from ..core.lag import format_duration

    return "-" if x is None else f"{x * 1000:.0f}ms" if x < 1 else format_duration(x)


def print_tables(snap: Snapshot) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False, width=max(160, Console().width))
    for v in snap.views:
        if v.kind == "mirror" and v.engine == "mm2":
            title = f"flow {v.flow}: {v.cluster} → {v.target}, MirrorMaker 2 ({v.group})"
        elif v.kind == "mirror":
            title = f"flow {v.flow}: {v.cluster} → {v.target}, group {v.group}"
        else:
            title = f"group {v.group} on {v.cluster}"
        table = Table(title=f"{title} — {v.status_name}", title_justify="left")
        mirror = v.kind == "mirror"
        txns = v.transactions is not None  # a transactional target: its last stable offset and open transaction
        headers = ["TOPIC", "PARTITION", "SOURCE-END", "COMMITTED", "COMMITTED-LAG"]
        if mirror:
            headers += ["READ-LAG", "TRUE-LAG", "RPO", "TARGET-END", "FORECAST"]
        if txns:
            headers += ["TARGET-LSO", "OPEN-TXN"]
        headers += ["LOST", "STATUS"]
        for h in headers:
            table.add_column(h, justify="left" if h in ("TOPIC", "STATUS", "FORECAST") else "right")
        rows = v.rows()
        for r in rows:
            cells = [r["topic"], str(r["partition"]), _n(r["source_end"]), _n(r["committed"]), _n(r["committed_lag"])]
            if mirror:
                flag = " (!)" if r.get("target_behind") else ""
                cells += [
                    _n(r["read_lag"]),
                    _n(r["true_lag"]),
                    _rpo(r["rpo_seconds"]),
                    _n(r["target_end"]) + flag,
                    r["forecast"],
                ]
            if txns:
                cells += [_n(r["target_stable_end"]), _t(r["open_transaction_s"])]
            cells += [_n(r["records_lost"]), r["status"]]
            table.add_row(*cells)
        if not rows and v.group_status == GroupStatus.UNKNOWN:
            continue  # nothing to draw: the reason follows in one line
        console.print(table)
        console.print(_totals_line(v, rows))
        if v.coverage and v.coverage.get("error"):
            console.print(f"translation coverage unknown: {v.coverage['error']}", highlight=False, soft_wrap=True)
        elif v.coverage and v.coverage["groups"]:
            c = v.coverage
            console.print(
                f"translation coverage {c['translated']}/{c['groups']} groups"
                + "".join(f"\n  {u['group']}: {u['reason']}" for u in c["untranslated"])
            )
        if v.connect is not None:
            console.print(connect_line(v), highlight=False, soft_wrap=True)
        for line in v.reasons:  # whole lines: a trace's first line, a command to copy; people grep for them
            console.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)


def connect_line(v: GroupView) -> str:
    """``connectors: source RUNNING (1/1 tasks RUNNING), ...``: the flow's MM2 connectors from Connect's REST API."""
    assert v.connect is not None
    parts = []
    for c in v.connect.connectors:
        running = sum(t.state == "RUNNING" for t in c.tasks)
        tasks = f" ({running}/{len(c.tasks)} tasks RUNNING)" if c.tasks else ""
        parts.append(f"{c.role} {c.state}{tasks}")
    return "connectors: " + ", ".join(parts)


def _totals_line(v: GroupView, rows: list[dict[str, Any]]) -> str:
    from ..core.lag import describe_forecast, slowest_catch_up

    f = v.figures
    parts = [f"TOTAL {len(rows)} partitions", f"committed-lag {_n(f.committed_lag)}"]
    if v.kind == "mirror":
        parts += [
            f"read-lag {_n(f.read_lag)}",
            f"true-lag {_n(f.true_lag)}",
            f"RPO {_rpo(f.rpo_seconds)}",
            f"forecast {describe_forecast(slowest_catch_up(v.topic_catch_up_s))}",
        ]
    lost = f.records_lost
    if lost:
        parts.append(f"records lost {lost}")
    if v.engine == "mm2":
        parts.append(f"heartbeat {_t(v.heartbeat_age_s)}")
    parts.append(f"status {v.status_name}")
    if v.group_status != GroupStatus.UNKNOWN:
        parts.append(f"window complete {v.complete:.0%}")
    return "  ".join(parts)


commands = [run, lag]
