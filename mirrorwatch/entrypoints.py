"""Console scripts that compose packages: ``monitor`` is the monitor's commands plus ``monitor dashboard``.

The status page lives in ``dashboards/`` and the monitor must not import it (dashboards read the monitor's
HTTP API, not its internals), so the two meet here, outside both packages.
"""

from __future__ import annotations

from .core.cli import run_click
from .dashboards.cli import commands as dashboard_commands
from .monitor.cli import cli as monitor_cli

for _command in dashboard_commands:
    monitor_cli.add_command(_command)

monitor_main = run_click(monitor_cli, "monitor")
