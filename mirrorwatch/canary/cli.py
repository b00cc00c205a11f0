"""``canary``: the continuous service (``run``) and the on-call one-shot (``check``)."""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import TYPE_CHECKING, Any

import click

from ..core.cli import UserError, quiet_client_logs, run_click, setup_logging
from .status import UNKNOWN

if TYPE_CHECKING:
    from .report import CheckResult

# The config model and the probes are imported inside the commands: `canary check` runs every minute under
# Nagios-style checkers, and its --help and argument errors answer without them (bench/startup.py).

CHECK_GRACE_S = 5.0  # on top of connect + timeout: closing clients, printing


@click.group(help="Round-trip canary for Kafka mirrors: write on the source, read on the target, judge.")
def cli() -> None:
    pass


@cli.command(help="One probe now. Prints one line (or --json) and exits 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False), help="YAML config file")
@click.option("--flow", default=None, help="flow name (needed when the config has several)")
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0.5),
    default=None,
    help="seconds to wait for the events (default: canary.crit_latency_s)",
)
@click.option("--json", "as_json", is_flag=True, help="print one JSON object with every figure")
@click.option("-v", "--verbose", is_flag=True, help="log to stderr")
def check(config_path: str, flow: str | None, timeout_s: float | None, as_json: bool, verbose: bool) -> int:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.CRITICAL, stream=sys.stderr)
    quiet_client_logs(not verbose)  # the client library's own lines only with -v
    from ..core.config_loading import load_config

    config = load_config(config_path)
    config.flow(flow)  # a bad --flow is a config error (exit 3) before any cluster is touched
    from .check import run_check

    wait_s = timeout_s or config.canary.crit_latency_s
    budget = wait_s + min(config.canary.connect_timeout_s, wait_s) + CHECK_GRACE_S
    outcome: dict[str, CheckResult] = {}
    worker = threading.Thread(target=lambda: outcome.update(result=run_check(config, flow, timeout_s)), daemon=True)
    worker.start()
    worker.join(budget)
    if "result" not in outcome:
        # a broker that accepts connections and never answers can hold a client call past its timeout; the
        # on-call answer must still come, so give it and leave: the worker is a daemon thread, not waited for
        # at teardown, and the clients it holds are never freed under it (docs/design.md, "Teardown")
        _emit(None, as_json, f"UNKNOWN probe did not finish within {budget:.0f} s", 3)
        return 3
    worker.join(CHECK_GRACE_S)  # the result is set as its last step: the thread is ending
    result = outcome["result"]
    code: int = result.exit_code
    _emit(result.to_json() if as_json else None, as_json, result.line(), code)
    return code


def _emit(body: dict[str, Any] | None, as_json: bool, line: str, code: int) -> None:
    if as_json:
        click.echo(json.dumps(body if body is not None else {"status": UNKNOWN, "exit_code": code, "message": line}))
    else:
        click.echo(line)


@cli.command(help="The continuous canary service: probes on an interval, metrics on a Prometheus endpoint.")
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False), help="YAML config file")
@click.option("--flow", "flows", multiple=True, help="flow(s) to probe (default: all)")
@click.option("-v", "--verbose", is_flag=True)
def run(config_path: str, flows: tuple[str, ...], verbose: bool) -> int:
    setup_logging(verbose)
    from ..core.config_loading import load_config

    config = load_config(config_path)
    names = list(flows) or list(config.flows)
    if not names:
        raise UserError("flows: no flow is defined; add one under 'flows:'", exit_code=2)
    for name in names:
        config.flow(name)
    from .service import CanaryService

    CanaryService(config, names).run_forever()
    return 0


# exit 3 (UNKNOWN) for bad input and for our own faults alike: on-call tools must not read them as WARNING
main = run_click(
    cli,
    "canary",
    config_exit_code=3,
    internal_exit_code=3,
    json_error_fields={"schema": "mirrorwatch.canary.check/1", "status": UNKNOWN},
)
