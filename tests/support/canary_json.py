"""The schema of `canary check --json` (docs/canary.md), checked against real and built answers."""

from __future__ import annotations

from mirrorwatch.canary.report import JSON_SCHEMA

# The documented schema (docs/canary.md): key → type(s). Shared with the real-cluster test.
SCHEMA = {
    "schema": str,
    "status": str,
    "exit_code": int,
    "message": str,
    "error": (str, type(None)),
    "flow": str,
    "source": str,
    "target": str,
    "source_topic": str,
    "target_topic": str,
    "run_id": str,
    "partitions": list,
    "partitions_total": int,
    "partitions_seen": int,
    "missing_partitions": list,
    "overdue_partitions": list,
    "late_partitions": list,
    "lost_partitions": list,
    "latency_ms": dict,
    "latency_basis": (str, type(None)),
    "lost": int,
    "overdue": int,
    "overdue_for_s": (float, int, type(None)),
    "late": int,
    "late_for_s": (float, int, type(None)),
    "duplicates": int,
    "reordered": int,
    "heartbeat_age_s": (float, type(None)),
    "thresholds": dict,
    "timings_ms": dict,
}


NUMBER_OR_NULL = (float, int, type(None))


def check_json_schema(body: dict) -> None:
    assert set(body) == set(SCHEMA), set(body) ^ set(SCHEMA)
    for key, kind in SCHEMA.items():
        assert isinstance(body[key], kind), (key, body[key])
    assert body["schema"] == JSON_SCHEMA
    assert body["status"] in ("OK", "WARNING", "CRITICAL", "UNKNOWN")
    assert body["exit_code"] == {"OK": 0, "WARNING": 1, "CRITICAL": 2, "UNKNOWN": 3}[body["status"]]
    for entry in body["partitions"]:
        assert set(entry) == {"partition", "seen", "latency_ms", "unsent", "state"}
        assert entry["state"] in ("arrived", "overdue", "lost", "unsent") and entry["seen"] == (
            entry["state"] == "arrived"
        )
        assert isinstance(entry["partition"], int) and isinstance(entry["seen"], bool)
        assert isinstance(entry["latency_ms"], NUMBER_OR_NULL) and isinstance(entry["unsent"], (str, type(None)))
    assert set(body["latency_ms"]) == {"max", "min"} and all(
        isinstance(v, NUMBER_OR_NULL) for v in body["latency_ms"].values()
    )
    assert body["latency_basis"] in (None, "log_append_time", "receive_time")
    assert set(body["thresholds"]) == {"timeout_s", "warn_latency_s", "heartbeat_max_age_s"}
    assert all(isinstance(v, (int, float)) for v in body["timings_ms"].values()) and "total" in body["timings_ms"]
