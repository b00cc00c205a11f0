"""Console scripts that compose packages: ``monitor`` is the monitor's commands plus ``monitor dashboard``.

The status page lives in ``dashboards/`` and the monitor must not import it (dashboards read the monitor's
HTTP API, not its internals), so the two meet here, outside both packages. The page's command is registered
lazily, like the monitor's own (core.cli.LazyGroup): it needs the `page` extra, which the base install lacks.
"""

from __future__ import annotations

from .core.cli import run_click
from .monitor.cli import cli as monitor_cli

monitor_cli.lazy["dashboard"] = (
    "mirrorwatch.dashboards.cli:dashboard",
    "Serve the Streamlit status page (read-only; reads the monitor's HTTP API, the canary's metrics and the "
    "analytics output).",
)

monitor_main = run_click(monitor_cli, "monitor")
