"""The engine's metrics endpoint with its probes (/metrics, /healthz, /readyz; 127.0.0.1 by default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.httpserver import probe_registry, serve_metrics
from .metrics import EngineCollector

if TYPE_CHECKING:
    from .engine import MirrorEngine


def start_metrics(
    engine: MirrorEngine, host: str, port: int | None, setting: str = "mirror.metrics_port"
) -> int | None:
    """Serve /metrics, /healthz and /readyz; port 0 picks a free one. Returns the port, or None when off."""
    registry = probe_registry(engine.probes, "mirror")
    registry.register(EngineCollector(engine))
    server = serve_metrics(host, port, registry, engine.probes, "metrics", setting, 2)
    return None if server is None else server.port
