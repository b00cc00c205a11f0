"""Small wrappers over Hadoop's FileSystem (through Spark's JVM), so every path is a URI: file://, hdfs://,
s3a://, abfs:// … — whatever the cluster's Hadoop configuration can open. All I/O lives here."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("mirrorwatch.monitor.analytics")


@dataclass(frozen=True)
class RemoteFile:
    uri: str
    length: int


class HadoopFS:
    def __init__(self, spark: SparkSession) -> None:
        jvm, jsc = spark.sparkContext._jvm, spark.sparkContext._jsc
        if jvm is None or jsc is None:  # a stopped SparkContext
            raise RuntimeError("the Spark session has no JVM (stopped?)")
        self._jvm: Any = jvm  # py4j: Java objects are untyped here
        self._conf: Any = jsc.hadoopConfiguration()

    def _path(self, uri: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(uri)

    def _fs(self, path: Any) -> Any:
        return path.getFileSystem(self._conf)

    def exists(self, uri: str) -> bool:
        path = self._path(uri)
        return bool(self._fs(path).exists(path))

    def list_files(self, uri: str, attempts: int = 8) -> list[RemoteFile]:
        """Every file under ``uri``, recursively, in path order.

        The listing failed once in the suite inside ``hasNext`` ("An error occurred while calling o49.hasNext")
        while the monitor ran the job on its own history, which it writes under hidden names and renames when it
        closes a file every few seconds; most likely the listing met a file renamed under it (not reproduced).
        A listing has no side effects, so it is taken again, after a pause that doubles each time (0.2 s to 25 s in
        all): on a loaded machine a listing is slow enough to meet a rename five times in a row at a fixed 0.2 s."""
        path = self._path(uri)
        for attempt in range(attempts):
            try:
                it = self._fs(path).listFiles(path, True)
                out = []
                while it.hasNext():
                    status = it.next()
                    out.append(RemoteFile(status.getPath().toString(), int(status.getLen())))
                return sorted(out, key=lambda f: f.uri)
            except Exception as exc:  # py4j's Py4JJavaError: files changed while listed
                if attempt == attempts - 1:
                    raise
                log.debug("listing %s again: %s", uri, exc)
                time.sleep(0.2 * 2**attempt)
        raise AssertionError("unreachable")

    def read_range(self, uri: str, offset: int, length: int) -> bytes:
        """A few bytes (footer magic and length). Byte by byte on purpose: py4j copies Java byte arrays into
        Python, so a buffer filled on the Java side cannot be shared; a dozen calls per file is cheap."""
        path = self._path(uri)
        stream = self._fs(path).open(path)
        try:
            stream.seek(offset)
            out = bytearray()
            for _ in range(length):
                b = stream.read()
                if b < 0:
                    break
                out.append(b)
            return bytes(out)
        finally:
            stream.close()

    def write_text(self, uri: str, text: str) -> None:
        path = self._path(uri)
        stream = self._fs(path).create(path, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()

    def read_text(self, uri: str) -> str | None:
        """A small text file's content, or None if there is no such file."""
        path = self._path(uri)
        fs = self._fs(path)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            out = bytearray()
            reader = self._jvm.java.io.BufferedReader(self._jvm.java.io.InputStreamReader(stream, "UTF-8"))
            line = reader.readLine()
            while line is not None:
                out += (line + "\n").encode()
                line = reader.readLine()
            return out.decode()
        finally:
            stream.close()

    def delete(self, uri: str) -> None:
        """Remove a file or a folder with everything under it (nothing if it is not there)."""
        path = self._path(uri)
        self._fs(path).delete(path, True)
