"""``mirror``: run the engine, list upstream clusters from heartbeats, failover tools."""

from __future__ import annotations

import logging
import signal
import sys
from types import FrameType

import click

from ..core.cli import LazyGroup, UserError, run_click, setup_logging
from .options import config_option, flow_option

log = logging.getLogger("mirrorwatch.mirror")


# The failover tools and the topology are imported when run: `mirror --help` and `mirror run` need neither.
@click.group(
    cls=LazyGroup,
    help="The mirrorwatch mirror engine and its failover tools.",
    lazy={
        "failover": (
            "mirrorwatch.mirror.failover.commands:failover",
            "Failover tools: translate group offsets, reset to a time.",
        ),
        "failback": (
            "mirrorwatch.mirror.failover.failback:failback",
            "Failback after an unplanned failover: save the old source's unmirrored tail; plan the way home.",
        ),
        "topology": (
            "mirrorwatch.mirror.topology:topology",
            "List the upstream clusters mirrored into a cluster and the age of their latest heartbeat.",
        ),
    },
)
def cli() -> None:
    pass


@cli.command(help="Replicate the flow's topics from source to target until SIGTERM/SIGINT.")
@config_option
@flow_option
@click.option("-v", "--verbose", is_flag=True)
def run(config_path: str, flow: str | None, verbose: bool) -> int:
    from ..core.config_loading import load_config
    from .acknowledgement import MirrorFailure
    from .engine import MirrorEngine
    from .outage import UNREACHABLE_EXIT, ClustersUnreachable
    from .serve import start_metrics

    setup_logging(verbose)
    config = load_config(config_path)
    engine = MirrorEngine(config, flow)
    port = start_metrics(engine, config.mirror.metrics_host, config.mirror.metrics_port, "mirror.metrics_port")
    if port is not None:
        log.info("metrics on http://%s:%d/metrics", config.mirror.metrics_host, port)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("%s received: stopping (flush, commit what the target acknowledged)", signal.Signals(signum).name)
        engine.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info(
        "mirroring flow %s: %s → %s (group %s, policy %s)",
        engine.flow_name,
        engine.flow.source,
        engine.flow.target,
        engine.group,
        engine.flow.policy,
    )
    try:
        engine.run()
    except MirrorFailure as exc:
        raise UserError(str(exc), exc.exit_code) from None
    except ClustersUnreachable as exc:
        raise UserError(str(exc), UNREACHABLE_EXIT) from None
    log.info("stopped cleanly")
    return 0


main = run_click(cli, "mirror")

if __name__ == "__main__":
    sys.exit(main())
