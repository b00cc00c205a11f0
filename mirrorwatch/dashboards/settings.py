"""Where the page reads from, resolved from the one config file (``dashboard:`` section).

Unset addresses are derived from the sections the other services read, so a config that runs the monitor
and the canary needs no ``dashboard:`` section at all. Only addresses are taken from the config: cluster
properties (which may hold SASL passwords) are never copied here, so the page cannot show them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.config import Config
from ..core.config_loading import load_config

CONFIG_ENV = "MIRRORWATCH_CONFIG"  # how ``monitor dashboard`` hands the config path to the page process
DEFAULT_ANALYTICS_DIR = ".cache/analytics"


@dataclass(frozen=True)
class FlowInfo:
    name: str
    source: str
    target: str


@dataclass(frozen=True)
class PageSettings:
    monitor_url: str
    canary_url: str | None  # None: no canary configured (its light is then not part of the verdict)
    analytics_dir: str
    refresh_s: float
    overview_minutes: float  # the overview's charts: the last minutes of the monitor's recent figures
    timeout_s: float
    heartbeat_max_age_s: float
    heartbeats_expected: bool  # mirror.heartbeats: with them off, a missing heartbeat is no news
    warn_time_lag_s: float  # the canary's warning latency: how long a record may wait before it is worth a colour
    monitor_interval_s: float
    history_dir: str  # the monitor's lag history (for the `monitor analyze` hint)
    flows: tuple[FlowInfo, ...]


def _url_host(host: str) -> str:
    # a service bound to every interface is reached on loopback from the same machine
    return "127.0.0.1" if host in ("0.0.0.0", "", "::") else host


def page_settings(config: Config) -> PageSettings:
    dash, monitor, canary = config.dashboard, config.monitor, config.canary
    monitor_url = dash.monitor_url or f"http://{_url_host(monitor.host)}:{monitor.http_port or 9644}"
    if dash.canary_url is not None:
        canary_url = dash.canary_url or None
    elif canary.metrics_port:
        canary_url = f"http://{_url_host(canary.metrics_host)}:{canary.metrics_port}/metrics"
    else:
        canary_url = None
    return PageSettings(
        monitor_url=monitor_url.rstrip("/"),
        canary_url=canary_url,
        analytics_dir=dash.analytics_dir or monitor.analytics.out or DEFAULT_ANALYTICS_DIR,
        refresh_s=dash.refresh_s,
        overview_minutes=dash.overview_minutes,
        timeout_s=dash.timeout_s,
        heartbeat_max_age_s=canary.heartbeat_max_age_s,
        heartbeats_expected=config.mirror.heartbeats,
        warn_time_lag_s=canary.warn_latency_s,
        monitor_interval_s=monitor.interval_s,
        history_dir=monitor.history_dir,
        flows=tuple(FlowInfo(n, f.source, f.target) for n, f in config.flows.items()),
    )


def settings_from_path(path: str | os.PathLike[str]) -> PageSettings:
    """Raises :class:`mirrorwatch.core.config.ConfigError` (one line naming the key) on a bad file."""
    return page_settings(load_config(path))
