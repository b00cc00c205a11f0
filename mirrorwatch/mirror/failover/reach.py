"""Is a cluster there? A bounded metadata request, for the one-shot commands (exit 3 when not)."""

from __future__ import annotations

from ...core.cli import UserError
from ...core.clients import make_admin

REACH_TIMEOUT_S = 5


def reachable(cluster, alias: str) -> bool:
    try:
        make_admin(cluster, "mirrorwatch-failover", **{"socket.timeout.ms": 3000}).list_topics(timeout=REACH_TIMEOUT_S)
        return True
    except Exception:
        return False


def require_reachable(cluster, alias: str) -> None:
    if not reachable(cluster, alias):
        raise UserError(f"cannot reach cluster '{alias}' at {cluster.bootstrap_servers}", 3)
