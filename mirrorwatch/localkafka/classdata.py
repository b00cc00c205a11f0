"""Application class-data sharing (AppCDS) for the Java processes the launchers start from the jar cache.

A broker start spends much of its CPU loading and verifying the same few thousand classes every time (so does
the storage format run before a new cluster's first start). The JVM can map them from an archive instead: the
first run of a kind that finds none writes one when it exits cleanly (``-XX:ArchiveClassesAtExit``, a dynamic
archive: JDK 13+), and later runs map it (``-XX:SharedArchiveFile``). Measured with C1 only (the suite's JVMs):
a broker's start to ready 5.2 → 2.6-2.9 s of CPU, the format run 3.4 → 1.1 s. It changes how classes are loaded,
never which: a missing, stale or unusable archive only means a slower start (the JVM loads the classes itself).
``MIRRORWATCH_JVM_CDS=0`` turns it off.

One process writes an archive at a time (a lock it holds while its JVM runs; the OS releases it if the process
dies); the archive is published only after a clean exit (a JVM killed half-way through writing leaves nothing).
Archives live beside the jars, one per kind and JVM build: ``<cache>/kafka-<version>/cds/<kind>-<jvm>.jsa``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path
from typing import TextIO


def _jvm_key(java: str) -> str:
    """The JVM build an archive belongs to (its archive is refused by any other): its binary's path and stamp."""
    real = os.path.realpath(java)
    libjvm = Path(real).parent.parent / "lib" / "server" / "libjvm.so"
    stat = (libjvm if libjvm.exists() else Path(real)).stat()
    return hashlib.sha256(f"{real}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]


class ClassDataArchive:
    """The archive of one kind of Java run (``broker``, ``format``…); ``options()`` before each start and
    ``exited(returncode)`` after each exit."""

    def __init__(self, folder: Path, kind: str, java: str):
        self.path = folder / f"{kind}-{_jvm_key(java)}.jsa"
        self._lock: TextIO | None = None  # the archive's lock file, held while this process writes it
        self._writing: Path | None = None

    def options(self) -> list[str]:
        if os.environ.get("MIRRORWATCH_JVM_CDS") == "0":  # to compare, or to rule it out
            return []
        if self.path.exists():
            return [f"-XX:SharedArchiveFile={self.path}"]
        if self._lock is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            lock = open(self.path.with_suffix(".lock"), "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process is writing it: this run goes without
                lock.close()
                return []
            self._lock = lock
        self._writing = self.path.with_name(f"{self.path.name}.{os.getpid()}.part")
        self._writing.unlink(missing_ok=True)
        # its dump lists every class it cannot archive as a warning on stdout (the process's log): not news
        return [f"-XX:ArchiveClassesAtExit={self._writing}", "-Xlog:cds=off"]

    def exited(self, returncode: int | None) -> None:
        """Publish what a clean exit wrote (exit status 0, or 143 after a SIGTERM); drop anything else."""
        if self._writing is not None:
            if returncode in (0, 143) and self._writing.exists() and self._writing.stat().st_size > 0:
                os.replace(self._writing, self.path)
            else:
                self._writing.unlink(missing_ok=True)
            self._writing = None
        if self._lock is not None and self.path.exists():
            self._lock.close()
            self._lock = None
