"""What one check found: the one line for a tired person, and the JSON object (schema in docs/canary.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .status import CRITICAL, EXIT_CODES, OK, UNKNOWN, WARNING

JSON_SCHEMA = "mirrorwatch.canary.check/1"


@dataclass
class CheckResult:
    flow: str
    source: str
    target: str
    source_topic: str
    target_topic: str
    run_id: str
    timeout_s: float
    warn_latency_s: float
    heartbeat_max_age_s: float
    status: str = UNKNOWN
    error: str | None = None  # why the status is UNKNOWN
    partitions: list[int] = field(default_factory=list)  # source partitions written
    latencies_ms: dict[int, float] = field(default_factory=dict)  # partition → round trip
    missing: list[int] = field(default_factory=list)  # written, not seen within the timeout: overdue or lost
    lost_partitions: list[int] = field(default_factory=list)  # of missing: a later event arrived without it
    overdue_for_s: float | None = None  # age of the missing events when the check stopped waiting
    unsent: dict[int, str] = field(default_factory=dict)  # the source refused the event
    lost: int = 0
    duplicates: int = 0
    reordered: int = 0
    latency_basis: str | None = None
    heartbeat_age_s: float | None = None
    heartbeat_checked: bool = True
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def max_latency_ms(self) -> float | None:
        return max(self.latencies_ms.values()) if self.latencies_ms else None

    @property
    def overdue_partitions(self) -> list[int]:
        """Not seen within the timeout and not known lost: overdue, still expected. ("Late" is one meaning
        everywhere: arrived, but after the timeout, as in ``mirrorwatch_canary_late_total``.)"""
        return [p for p in self.missing if p not in self.lost_partitions]

    def state(self, partition: int) -> str:
        """What became of the event written to ``partition``: arrived, overdue, lost or unsent."""
        if partition in self.latencies_ms:
            return "arrived"
        if partition in self.unsent:
            return "unsent"
        return "lost" if partition in self.lost_partitions else "overdue"

    def judge(self) -> None:
        """Set ``status`` from the figures (UNKNOWN stays when ``error`` is set)."""
        if self.error is not None:
            self.status = UNKNOWN
        elif self.missing or self._heartbeat_too_old():
            self.status = CRITICAL
        elif not self.latencies_ms:
            self.status, self.error = UNKNOWN, "no canary event could be written to the source"
        elif (
            self.duplicates or self.reordered or self.unsent or (self.max_latency_ms or 0) > self.warn_latency_s * 1000
        ):
            self.status = WARNING
        else:
            self.status = OK

    def _heartbeat_too_old(self) -> bool:
        return self.heartbeat_age_s is not None and self.heartbeat_age_s > self.heartbeat_max_age_s

    # ------------------------------------------------------------------ one line
    def line(self) -> str:
        flow = f"{self.source}→{self.target}"
        if self.status == UNKNOWN:
            return f"UNKNOWN {flow} {self.error}"
        parts = [f"{self.status} {flow}"]
        n, seen = len(self.partitions), len(self.latencies_ms)
        if self.missing:
            parts.append(f"{seen}/{n} canary events mirrored within {_num(self.timeout_s)} s ({self._missing_text()})")
        else:
            parts.append(f"round trip {_ms(self.max_latency_ms)} ({seen}/{n} partitions)")
        text = " ".join(parts)
        extras = []
        if self.status == WARNING and (self.max_latency_ms or 0) > self.warn_latency_s * 1000:
            extras.append(f"above warn {_num(self.warn_latency_s)} s")
        if self.duplicates:
            extras.append(f"{self.duplicates} duplicate{'s' if self.duplicates > 1 else ''}")
        if self.reordered:
            extras.append(f"{self.reordered} reordered")
        if self.unsent:
            extras.append(f"{len(self.unsent)} not written to the source")
        extras.append(self._heartbeat_text())
        extras = [e for e in extras if e]
        if not extras:
            return text
        return text + (", " if not self.missing else "; ") + "; ".join(extras)

    def _missing_text(self) -> str:
        """Overdue (may still come) vs lost (a later event of the partition arrived without it: it never will)."""
        out = []
        if self.lost_partitions:
            them = "them" if len(self.lost_partitions) > 1 else "it"
            out.append(f"lost {_partitions(self.lost_partitions)}: a later event arrived without {them}")
        if self.overdue_partitions:
            counting = f": {_num(round(self.overdue_for_s))} s and counting" if self.overdue_for_s is not None else ""
            out.append(f"overdue {_partitions(self.overdue_partitions)}{counting}")
        return "; ".join(out)

    def _heartbeat_text(self) -> str:
        if not self.heartbeat_checked:
            return ""
        if self.heartbeat_age_s is None:
            return "no heartbeat seen"
        if self.missing or self._heartbeat_too_old():
            limit = f" (limit {_num(self.heartbeat_max_age_s)} s)" if self._heartbeat_too_old() else ""
            return f"last heartbeat {_num(round(self.heartbeat_age_s, 1))} s ago{limit}"
        return f"heartbeat {_num(round(self.heartbeat_age_s, 1))} s"

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict[str, Any]:
        return {
            "schema": JSON_SCHEMA,
            "status": self.status,
            "exit_code": self.exit_code,
            "message": self.line(),
            "error": self.error,
            "flow": self.flow,
            "source": self.source,
            "target": self.target,
            "source_topic": self.source_topic,
            "target_topic": self.target_topic,
            "run_id": self.run_id,
            "partitions": [
                {
                    "partition": p,
                    "seen": p in self.latencies_ms,
                    "latency_ms": _round(self.latencies_ms.get(p)),
                    "unsent": self.unsent.get(p),
                    "state": self.state(p),
                }
                for p in self.partitions
            ],
            "partitions_total": len(self.partitions),
            "partitions_seen": len(self.latencies_ms),
            "missing_partitions": list(self.missing),
            "overdue_partitions": self.overdue_partitions,
            "late_partitions": self.overdue_partitions,  # deprecated alias of overdue_partitions (docs/canary.md)
            "lost_partitions": list(self.lost_partitions),
            "latency_ms": {
                "max": _round(self.max_latency_ms),
                "min": _round(min(self.latencies_ms.values()) if self.latencies_ms else None),
            },
            "latency_basis": self.latency_basis,
            "lost": self.lost,
            "overdue": len(self.overdue_partitions),
            "overdue_for_s": _round(self.overdue_for_s),
            "late": len(self.overdue_partitions),  # deprecated alias of overdue
            "late_for_s": _round(self.overdue_for_s),  # deprecated alias of overdue_for_s
            "duplicates": self.duplicates,
            "reordered": self.reordered,
            "heartbeat_age_s": _round(self.heartbeat_age_s),
            "thresholds": {
                "timeout_s": self.timeout_s,
                "warn_latency_s": self.warn_latency_s,
                "heartbeat_max_age_s": self.heartbeat_max_age_s,
            },
            "timings_ms": {k: _round(v) for k, v in self.timings_ms.items()},
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 3)


def _partitions(partitions: list[int]) -> str:
    return f"partition{'s' if len(partitions) > 1 else ''} {', '.join(map(str, partitions))}"


def _num(value: float) -> str:
    return f"{value:g}"


def _ms(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


__all__ = ["CheckResult", "JSON_SCHEMA", "OK", "WARNING", "CRITICAL", "UNKNOWN"]
