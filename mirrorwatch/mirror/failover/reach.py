"""Is a cluster there? A bounded metadata request, for the one-shot commands (exit 3 when not)."""

from __future__ import annotations

from ...core.access import AccessProblem, wait_for_connection
from ...core.cli import UserError
from ...core.clients import make_admin
from ...core.config import ClusterConfig

REACH_TIMEOUT_S = 5
EXIT_UNREACHABLE = 3


def reachable(cluster: ClusterConfig, alias: str) -> bool:
    """True when metadata comes; AccessProblem (exit 3) when authentication or TLS fails."""
    admin = make_admin(cluster, "mirrorwatch-failover", **{"socket.timeout.ms": 3000})
    try:
        return wait_for_connection(admin, cluster.bootstrap_servers, alias, REACH_TIMEOUT_S)
    except AccessProblem as exc:
        raise AccessProblem(str(exc), EXIT_UNREACHABLE) from None


def require_reachable(cluster: ClusterConfig, alias: str) -> None:
    if not reachable(cluster, alias):
        raise UserError(f"cannot reach cluster '{alias}' at {cluster.bootstrap_servers}", EXIT_UNREACHABLE)
