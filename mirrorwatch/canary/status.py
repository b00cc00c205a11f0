"""Nagios statuses: the words, their exit codes, and which is worse (the codes live in core.status)."""

from __future__ import annotations

from ..core.status import CanaryStatus

# The canary's reports and JSON carry the word; the metric and the exit code carry CanaryStatus's value.
OK, WARNING, CRITICAL, UNKNOWN = (s.name for s in CanaryStatus)
EXIT_CODES = {s.name: int(s) for s in CanaryStatus}


def worst(*statuses: str | None) -> str:
    """The most severe status; UNKNOWN outranks CRITICAL because then nothing else can be trusted."""
    present = [s for s in statuses if s is not None]
    return max(present, key=EXIT_CODES.__getitem__) if present else UNKNOWN
