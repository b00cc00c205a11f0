"""Bounded one-shot commands (`monitor lag`, `mirror failover check`, `mirror topology`): an answer within
``--timeout`` (15 s by default), and a cluster that is away named in one line, not a 40 s wait and a raw
client error.

First every cluster the command needs gets one small metadata request, all at once, bounded by a third of the
timeout (at most 5 s): a cluster that does not answer is named with its address and the command exits 3. Then
the command runs under the whole timeout; a cluster that stops answering half-way (a frozen broker accepts
connections and never replies, and some client calls outlive their own timeouts) still gets an answer in time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import click

from .cli import UserError

if TYPE_CHECKING:  # the config model and the client library load when a cluster is probed, not for --help
    from .config import ClusterConfig

DEFAULT_TIMEOUT_S = 15.0
UNREACHABLE_EXIT = 3

timeout_option = click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="seconds to answer within (a cluster that is away: exit 3)",
)


def _reason(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    if err is not None and hasattr(err, "str"):  # a KafkaError
        return str(err.str())
    return str(exc) or type(exc).__name__


def probe_timeout(timeout_s: float) -> float:
    return max(1.0, min(5.0, timeout_s / 3))


def require_clusters(
    clusters: list[tuple[str, ClusterConfig]], timeout_s: float, role: dict[str, str] | None = None
) -> None:
    """One bounded metadata request per cluster, concurrently; UserError (exit 3) naming the first that is away."""
    from .access import AccessProblem, connection_problem, serve_callbacks
    from .clients import make_admin

    wait_s = probe_timeout(timeout_s)

    def probe(item: tuple[str, ClusterConfig]) -> str | None:
        alias, cluster = item
        admin = make_admin(cluster, "mirrorwatch-probe", **{"socket.connection.setup.timeout.ms": int(wait_s * 1000)})
        try:
            if not admin.list_topics(timeout=wait_s).brokers:
                return "no brokers in the metadata answer"
        except Exception as exc:  # KafkaException: timed out, transport failure, authentication
            serve_callbacks(admin)  # a failed handshake is recorded by the error callback (core.access), said instead
            return connection_problem(cluster.bootstrap_servers, alias) or _reason(exc)
        return None

    unique = list(dict(clusters).items())
    with ThreadPoolExecutor(max_workers=max(1, len(unique))) as pool:
        for (alias, cluster), problem in zip(unique, pool.map(probe, unique)):
            if problem is not None:
                recorded = connection_problem(cluster.bootstrap_servers, alias)
                if recorded:
                    raise AccessProblem(recorded, UNREACHABLE_EXIT)
                what = f"{role[alias]} cluster" if role and alias in role else "cluster"
                raise UserError(
                    f"cannot reach {what} '{alias}' at {cluster.bootstrap_servers} within {wait_s:g} s: {problem}",
                    UNREACHABLE_EXIT,
                )


def within(timeout_s: float, work: Callable[[], Any], what: str) -> Any:
    """``work()``'s result, or a UserError (exit 3) after ``timeout_s``.

    The work runs on a daemon thread, so a client call stuck past its own timeout is not waited for: the
    interpreter tears down without joining it, and the clients that thread holds are never freed under it."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="one-shot", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise UserError(
            f"no answer within {timeout_s:g} s ({what}); a cluster may be frozen or overloaded "
            "(--timeout to wait longer)",
            UNREACHABLE_EXIT,
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
