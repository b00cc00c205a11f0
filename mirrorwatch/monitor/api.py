"""HTTP status API, Burrow-like JSON (Burrow's /v3 paths where they fit) plus /v1/flows for the three lags.

- ``/v3/kafka``: clusters; ``/v3/kafka/{cluster}``: one cluster;
- ``/v3/kafka/{cluster}/consumer``: groups watched on that cluster (mirror groups and ``monitor.groups``);
- ``/v3/kafka/{cluster}/consumer/{group}/status``: group status, only the partitions that are not OK (Burrow);
- ``/v3/kafka/{cluster}/consumer/{group}/lag``: the same with every partition;
- ``/v1/flows``, ``/v1/flows/{flow}``: per partition committed/read/true lag, time lag, status and forecast;
- ``/v1/flows/{flow}/recent[?since_ms=T]``: the last ``monitor.recent_minutes`` of per-flow figures (three lags,
  RPO seconds, canary round trip and heartbeat age when known, status) and status changes (``recent``);
- ``/v1/analytics``: the scheduled Spark job's last run (state, reason when it failed, times; ``analytics_runs``);
- ``/healthz``, ``/readyz``: the service's probes, as on the metrics port (``core/probes.py``).

A name the monitor does not watch → 404 ``{"error": true, "message": ...}``. A watched group with no
committed offsets answers 200 with status NOTFOUND; an unreachable cluster answers 200 with status UNKNOWN
and the reason (without secrets: errors are redacted where they are made).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, unquote

import numpy as np

from ..core.httpserver import Response, json_response, probe_response
from ..core.probes import ProbeState
from ..core.redact import redact_text
from ..core.status import PARTITION_STATUS, PartitionStatus
from .analytics_runs import RunStatus
from .model import GroupView, Snapshot
from .recent import RecentStore


def _request(path: str) -> dict[str, str]:
    return {"url": path, "host": "mirrorwatch-monitor"}


def _not_found(path: str, message: str) -> Response:
    return json_response(404, {"error": True, "message": message, "request": _request(path)})


def _ok(path: str, message: str, **body: Any) -> Response:
    return json_response(200, {"error": False, "message": message, **body, "request": _request(path)})


def _finite(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and (math.isnan(x) or math.isinf(x))) else x


def _burrow_partition(v: GroupView, i: int) -> dict[str, Any]:
    """Burrow's partition object: start/end = oldest/newest stored commit of the window."""

    def commit(pair: tuple[np.ndarray, np.ndarray], lag: int | float | bool | None) -> dict[str, Any] | None:
        offsets, times = pair
        return None if offsets[i] < 0 else {"offset": int(offsets[i]), "timestamp": int(times[i]), "lag": lag}

    count = int(v.window_count[i]) if v.window_count is not None else 0
    current = v.value("committed_lag", i)
    return {
        "topic": v.topics[i],
        "partition": v.partitions[i],
        "status": _status_name(v, i),
        "start": commit(v.window_start, None) if v.window_start else None,
        "end": commit(v.window_end, current) if v.window_end else None,
        "current_lag": current if current is not None else 0,
        "records_lost": v.value("records_lost", i) or 0,
        "complete": count / v.window_size if v.window_size else 0.0,
    }


def _status_name(v: GroupView, i: int) -> str:
    return PARTITION_STATUS[int(v.status[i])] if v.status is not None else PartitionStatus.UNKNOWN.name


def group_status_body(v: GroupView, all_partitions: bool) -> dict[str, Any]:
    n = len(v.topics)
    partitions = [
        _burrow_partition(v, i) for i in range(n) if all_partitions or _status_name(v, i) != PartitionStatus.OK.name
    ]
    maxlag = _burrow_partition(v, v.maxlag_row) if v.maxlag_row is not None else None
    body: dict[str, Any] = {
        "cluster": v.cluster,
        "group": v.group,
        "status": v.status_name,
        "complete": v.complete,
        "partitions": partitions,
        "partition_count": n,
        "maxlag": maxlag,
        "totallag": v.totallag,
        "records_lost": v.figures.records_lost or 0,  # Burrow-style bodies have always said 0 for unknown
    }
    if v.error:
        body["reason"] = redact_text(v.error)
    if v.kind == "mirror":
        body["flow"], body["target"], body["mirror"] = v.flow, v.target, v.engine
    body["reasons"] = v.reasons
    if v.connect is not None:
        body["connect"] = connect_body(v)
    return body


def connect_body(v: GroupView) -> dict[str, Any] | None:
    """An MM2 flow's connector and task states from its Connect REST API (None when no ``mirror.connect``)."""
    if v.connect is None:
        return None
    return {
        "up": v.connect.up,
        "ts_ms": v.connect.ts_ms,
        "connectors": [c.body() for c in v.connect.connectors],
        "problems": v.connector_problems,
    }


def flow_body(v: GroupView) -> dict[str, Any]:
    rows = v.rows()
    f = v.figures
    totals = {
        "committed_lag": f.committed_lag,
        "read_lag": f.read_lag,
        "true_lag": f.true_lag,
        "rpo_seconds": f.rpo_seconds,
        "max_time_lag_s": f.rpo_seconds,  # the old name of rpo_seconds, kept for API clients (docs/metrics.md)
        "records_lost": f.records_lost or 0,
    }
    body: dict[str, Any] = {
        "flow": v.flow,
        "source": v.cluster,
        "target": v.target,
        "group": v.group,
        "status": v.status_name,
        "ts_ms": v.ts_ms,
        "last_ok_ms": v.last_ok_ms,
        "complete": v.complete,
        "totals": totals,
        "catch_up_s": {t: _finite(s) for t, s in v.topic_catch_up_s.items()},
        "not_catching_up": sorted(t for t, s in v.topic_catch_up_s.items() if math.isinf(s)),
        "partitions": rows,
        "mirror": v.engine,
        "coverage": v.coverage,
        # target partitions whose transaction has been open past monitor.hanging_transaction_s (None: the target
        # is not transactional, so not watched); what to run is in reasons
        "hanging_transactions": v.hanging_transactions(),
        "reasons": v.reasons,
    }
    if v.engine == "mm2":
        body["heartbeat_age_s"] = None if v.heartbeat_age_s is None else round(v.heartbeat_age_s, 3)
        body["connect"] = connect_body(v)
    if v.error:
        body["reason"] = redact_text(v.error)
    return body


def make_router(
    snapshot: Callable[[], Snapshot],
    clusters: list[str],
    recent: RecentStore | None = None,
    analytics: Callable[[], RunStatus] | None = None,
    probes: ProbeState | None = None,
) -> Callable[[str], Response]:
    def route(path: str) -> Response:
        probe = probe_response(path, probes) if probes is not None else None
        if probe is not None:  # /healthz, /readyz: the same answers as on the metrics port
            return probe
        path, _, query = path.partition("?")
        parts = [unquote(p) for p in path.strip("/").split("/") if p]
        snap = snapshot()
        if parts == ["v3", "kafka"]:
            return _ok(path, "cluster list returned", clusters=sorted(clusters))
        if parts[:2] == ["v3", "kafka"] and len(parts) >= 3:
            cluster = parts[2]
            if cluster not in clusters:
                return _not_found(path, f"cluster '{cluster}' not found")
            if len(parts) == 3:
                return _ok(
                    path, "cluster detail returned", module={"name": cluster, "up": snap.cluster_up.get(cluster)}
                )
            if parts[3] != "consumer":
                return _not_found(path, f"no such path: {path}")
            groups = sorted({v.group for v in snap.views if v.cluster == cluster})
            if len(parts) == 4:
                return _ok(path, "consumer list returned", consumers=groups)
            group = parts[4]
            view = snap.view(cluster, group)
            if view is None:
                return _not_found(path, f"consumer group '{group}' not found on cluster '{cluster}'")
            if len(parts) == 5 or (len(parts) == 6 and parts[5] == "lag"):
                return _ok(path, "consumer status returned", status=group_status_body(view, all_partitions=True))
            if len(parts) == 6 and parts[5] == "status":
                return _ok(path, "consumer status returned", status=group_status_body(view, all_partitions=False))
            return _not_found(path, f"no such path: {path}")
        if parts[:2] == ["v1", "flows"]:
            flows = snap.flow_views()
            if len(parts) == 2:
                return _ok(path, "flows returned", flows=[flow_body(v) for v in flows])
            if len(parts) == 3:
                for v in flows:
                    if v.flow == parts[2]:
                        return _ok(path, "flow returned", flow=flow_body(v))
                return _not_found(path, f"flow '{parts[2]}' not found")
            if len(parts) == 4 and parts[3] == "recent" and recent is not None:
                since = parse_qs(query).get("since_ms", [None])[0]
                if since is not None and not since.lstrip("-").isdigit():
                    return json_response(
                        400,
                        {"error": True, "message": "since_ms: expected epoch milliseconds", "request": _request(path)},
                    )
                body = recent.body(parts[2], int(since) if since is not None else None)
                if body is None:
                    return _not_found(path, f"flow '{parts[2]}' not found (or not sampled yet)")
                return _ok(path, "recent figures returned", recent=body)
        if parts == ["v1", "analytics"]:
            if analytics is None:
                return _ok(
                    path,
                    "analytics are not scheduled",
                    analytics={
                        "state": "off",
                        "reason": ("monitor.analytics.every_s is not set: the monitor does not run the Spark job"),
                    },
                )
            return _ok(path, "analytics status returned", analytics=analytics().body())
        return _not_found(path, f"no such path: {path}")

    return route
