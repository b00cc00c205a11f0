"""``monitor dashboard --config FILE [--port P]``: runs ``streamlit run`` on the page file, headless, bound to
127.0.0.1 (the page has no login), usage statistics off. The config path reaches the page in the environment
(``MIRRORWATCH_CONFIG``) and after ``--`` (what ``streamlit run`` documents)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..core.cli import run_click
from ..core.extras import require_extra
from .settings import CONFIG_ENV

PAGE = Path(__file__).with_name("app.py")


def streamlit_argv(config_path: str, port: int, host: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(PAGE),
        "--server.headless",
        "true",
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--global.developmentMode",
        "false",
        "--client.toolbarMode",
        "viewer",
        "--client.showErrorDetails",
        "type",  # a bug shows its type in the browser, the traceback only in the log
        "--",
        "--config",
        config_path,
    ]


@click.command(
    "dashboard",
    help="Serve the Streamlit status page (read-only; reads the monitor's HTTP API, "
    "the canary's metrics and the analytics output).",
)
@click.option("--config", "config_path", required=True, type=click.Path(dir_okay=False), help="the YAML config")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="default: dashboard.port (8501)")
def dashboard(config_path: str, port: int | None) -> None:
    require_extra("page", "monitor dashboard")  # Streamlit runs in the process exec'd below: say it here
    from ..core.config_loading import load_config

    config = load_config(config_path)  # a bad file is one line here rather than an error page later
    settings = config.dashboard
    path = str(Path(config_path).resolve())
    argv = streamlit_argv(path, port or settings.port, settings.host)
    click.echo(f"status page on http://{settings.host}:{port or settings.port}/ (config {path})", err=True)
    sys.stderr.flush()
    # replace this process: SIGTERM/Ctrl-C from whoever started us (the demo, systemd) reach Streamlit itself
    os.execve(argv[0], argv, {**os.environ, CONFIG_ENV: path})


commands = [dashboard]

# ``python -m mirrorwatch.dashboards.cli --config FILE`` until ``monitor dashboard`` is registered
main = run_click(dashboard, "dashboard")

if __name__ == "__main__":
    main()
