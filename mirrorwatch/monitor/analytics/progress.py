"""Stage progress for the analytics job: a rich status line per stage on a terminal, nothing with ``quiet``.

Warnings (e.g. a skipped corrupt file) always go to stderr, quiet or not: they change what the output means.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Progress:
    def __init__(self, quiet: bool = False):
        self.quiet = quiet
        self._console = None
        if not quiet:
            from rich.console import Console

            self._console = Console(stderr=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        if self._console is None:
            yield
            return
        started = time.monotonic()
        # rich shows a spinner only on a terminal; elsewhere only the completion line is printed.
        with self._console.status(f"{name} …"):
            yield
        self._console.print(f"[green]✓[/green] {name} [dim]({time.monotonic() - started:.1f}s)[/dim]", highlight=False)

    def warn(self, message: str) -> None:
        print(f"monitor: warning: {message}", file=sys.stderr, flush=True)
