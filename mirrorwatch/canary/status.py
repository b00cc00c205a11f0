"""Nagios statuses: the words, their exit codes, and which is worse."""

from __future__ import annotations

OK, WARNING, CRITICAL, UNKNOWN = "OK", "WARNING", "CRITICAL", "UNKNOWN"
EXIT_CODES = {OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3}


def worst(*statuses: str | None) -> str:
    """The most severe status; UNKNOWN outranks CRITICAL because then nothing else can be trusted."""
    present = [s for s in statuses if s is not None]
    return max(present, key=EXIT_CODES.__getitem__) if present else UNKNOWN
