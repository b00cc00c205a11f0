"""Readers for what the page shows. Each returns data or raises :class:`SourceError` with one line that names
the address, so the page can put a banner up instead of a traceback."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from ..core.canary_metrics import CanaryReading, parse_canary_metrics
from ..core.redact import redact_text
from ..core.status import GroupStatus

if TYPE_CHECKING:  # pandas loads with the analytics, when the page reads them
    import pandas as pd


class SourceError(Exception):
    """A source could not be read; the message names the address and the reason."""


# ------------------------------------------------------------------ monitor HTTP API


def _get(url: str, timeout_s: float) -> requests.Response:
    try:
        return requests.get(url, timeout=timeout_s)
    except requests.ConnectionError:
        raise SourceError(f"cannot connect to {url}") from None
    except requests.Timeout:
        raise SourceError(f"no answer from {url} within {timeout_s:g} s") from None
    except requests.RequestException as exc:
        raise SourceError(f"{url}: {type(exc).__name__}") from None


def fetch_flows(monitor_url: str, timeout_s: float) -> list[dict[str, Any]]:
    """The monitor's ``/v1/flows`` list (see mirrorwatch/monitor/api.py for the body)."""
    url = f"{monitor_url}/v1/flows"
    response = _get(url, timeout_s)
    try:
        body = response.json()
    except ValueError:
        raise SourceError(
            f"{url} answered HTTP {response.status_code} without JSON — is this the monitor's API port?"
        ) from None
    if response.status_code != 200 or not isinstance(body, dict) or body.get("error"):
        message = body.get("message") if isinstance(body, dict) else None
        raise SourceError(f"{url} answered HTTP {response.status_code}: {redact_text(str(message or 'error'))}")
    flows = body.get("flows")
    if not isinstance(flows, list):
        raise SourceError(f"{url}: the answer has no 'flows' list — is this the mirrorwatch monitor?")
    return [_normalised(f) for f in flows if isinstance(f, dict)]


def _get_json(url: str, timeout_s: float, key: str) -> dict[str, Any]:
    response = _get(url, timeout_s)
    try:
        body = response.json()
    except ValueError:
        raise SourceError(f"{url} answered HTTP {response.status_code} without JSON") from None
    if (
        response.status_code != 200
        or not isinstance(body, dict)
        or body.get("error")
        or not isinstance(body.get(key), dict)
    ):
        message = body.get("message") if isinstance(body, dict) else None
        raise SourceError(f"{url} answered HTTP {response.status_code}: {redact_text(str(message or 'error'))}")
    answer: dict[str, Any] = body[key]  # a dict: checked above
    return answer


def fetch_recent(monitor_url: str, flow: str, timeout_s: float) -> dict[str, Any]:
    """The monitor's last minutes of one flow (``/v1/flows/<flow>/recent``): ``points`` and ``status_changes``."""
    from urllib.parse import quote

    recent = _get_json(f"{monitor_url}/v1/flows/{quote(flow, safe='')}/recent", timeout_s, "recent")
    points = recent.get("points")
    changes = recent.get("status_changes")
    return {
        "points": [p for p in points if isinstance(p, dict) and isinstance(p.get("ts_ms"), (int, float))]
        if isinstance(points, list)
        else [],
        "status_changes": [c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else [],
    }


def fetch_analytics_status(monitor_url: str, timeout_s: float) -> dict[str, Any]:
    """The scheduled Spark job's last run (``/v1/analytics``): ``state``, ``reason``, times."""
    return _get_json(f"{monitor_url}/v1/analytics", timeout_s, "analytics")


def _normalised(flow: dict[str, Any]) -> dict[str, Any]:
    """The parts the page relies on, with the expected kinds (an unexpected answer degrades, never raises)."""
    flow = dict(flow)
    if not isinstance(flow.get("totals"), dict):
        flow["totals"] = {}
    flow["partitions"] = (
        [p for p in flow.get("partitions") or [] if isinstance(p, dict)]
        if isinstance(flow.get("partitions"), list)
        else []
    )
    for key in ("catch_up_s",):
        if not isinstance(flow.get(key), dict):
            flow[key] = {}
    if not isinstance(flow.get("not_catching_up"), list):
        flow["not_catching_up"] = []
    if not isinstance(flow.get("ts_ms"), (int, float)) or isinstance(flow.get("ts_ms"), bool):
        flow["ts_ms"] = None
    flow["flow"] = str(flow.get("flow", "?"))
    flow["status"] = str(flow.get("status", GroupStatus.UNKNOWN.name))
    return flow


# ------------------------------------------------------------------ canary /metrics


def fetch_canary(canary_url: str, timeout_s: float) -> dict[str, CanaryReading]:
    response = _get(canary_url, timeout_s)
    if response.status_code != 200:
        raise SourceError(f"{canary_url} answered HTTP {response.status_code}")
    try:
        return parse_canary_metrics(response.text)
    except ValueError as exc:  # the parser's complaint about a line; not worth a traceback
        raise SourceError(f"{canary_url}: not Prometheus text ({str(exc)[:80]})") from None


# ------------------------------------------------------------------ analytics output

ANALYTICS_TABLES = ("slo_by_topic", "incidents", "trend_daily")


@dataclass
class Analytics:
    folder: str
    summary: dict[str, Any]
    tables: dict[str, pd.DataFrame]  # name → table (missing tables are absent)
    problems: list[str]  # tables that could not be read, one line each


def read_analytics(folder: str) -> Analytics | None:
    """The ``monitor analyze --out`` folder, or None when nothing has been written there yet."""
    import pandas as pd  # noqa: F401  (pyarrow's to_pandas needs it; imported here to say so)
    import pyarrow.parquet as pq

    base = Path(folder)
    summary_path = base / "summary.json"
    if not summary_path.is_file():
        return None
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SourceError(f"{summary_path}: unreadable ({type(exc).__name__}) — re-run `monitor analyze`") from None
    tables: dict[str, pd.DataFrame] = {}
    problems: list[str] = []
    for name in ANALYTICS_TABLES:
        path = base / name
        if not path.exists():
            problems.append(f"{path}: missing")
            continue
        try:
            tables[name] = pq.read_table(path).to_pandas()
        except Exception as exc:  # a half-written or corrupt file: say which, show the rest
            problems.append(f"{path}: unreadable ({type(exc).__name__})")
    return Analytics(str(base), summary if isinstance(summary, dict) else {}, tables, problems)


def analytics_stamp(folder: str) -> float:
    """Changes when the analytics are rewritten (the cache key for :func:`read_analytics`)."""
    try:
        return (Path(folder) / "summary.json").stat().st_mtime
    except OSError:
        return 0.0
