"""The engine's metrics endpoint (prometheus-client, 127.0.0.1 by default)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server

from ..core.cli import UserError, listen_error
from .metrics import EngineCollector


def start_metrics(engine, host: str, port: int | None, setting: str = "mirror.metrics_port") -> int | None:
    """Serve /metrics; port 0 picks a free one. Returns the port, or None when metrics are off."""
    if port is None:
        return None
    registry = CollectorRegistry()
    registry.register(EngineCollector(engine))
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise UserError(listen_error(exc, host, port, setting), 2) from None
    return server.server_port
