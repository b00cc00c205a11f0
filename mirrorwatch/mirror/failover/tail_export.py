"""Where ``mirror failback tail`` saves the unmirrored records, without loss, and proves it did.

Two destinations:

- a file of JSON lines, one record per line (format ``mirrorwatch-tail/1``, docs/dr.md)::

      {"topic": "orders", "partition": 0, "offset": 1234, "timestamp": 1795770000000, "timestamp_type": "create",
       "key": "<base64>" | null, "value": "<base64>" | null, "headers": [["name", "<base64>" | null], ...]}

- quarantine topics on the new primary, ``<source>.<topic>.unmirrored`` (never the mirrored topic), the same
  partition numbers, key, value, headers and CreateTime timestamp kept, plus one header
  ``mirrorwatch.tail.origin`` = ``<source>:<topic>:<partition>:<offset>``; created with ``retention.ms=-1`` so
  that old timestamps do not expire at once.

Either way the export is read back and compared, record by record identity (topic, partition, offset), with
what was read from the source, before the manifest is written: a manifest exists only for a complete, verified
export. ``mirror failback plan`` reads it as the proof that the tail is saved.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Message, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from ...core.clients import make_admin, make_consumer, make_producer
from ...core.config import ClusterConfig
from ...core.reading import end_offsets, read_to_end
from .reads import CannotTell, partitions_of, reason

FORMAT = "mirrorwatch-tail/1"
ORIGIN_HEADER = "mirrorwatch.tail.origin"
Origin = tuple[str, int, int]  # source topic, partition, offset


def quarantine_topic(source_alias: str, topic: str) -> str:
    return f"{source_alias}.{topic}.unmirrored"


def manifest_path(out: Path) -> Path:
    return out.with_name(out.name + ".manifest.json")


def _b64(data: str | bytes | None) -> str | None:
    if isinstance(data, str):
        data = data.encode()
    return None if data is None else base64.b64encode(data).decode()


def headers_of(msg: Message) -> list[tuple[str, bytes | None]]:
    out = []
    for header in msg.headers() or []:
        value = header[1]
        out.append((str(header[0]), value.encode() if isinstance(value, str) else value))
    return out


def record_line(msg: Message) -> str:
    """One record as a line of the file format (keys sorted, so the file's digest is reproducible)."""
    ts_type, ts = msg.timestamp()
    headers = [[name, _b64(value)] for name, value in headers_of(msg)]
    row = {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": ts,
        "timestamp_type": "log_append" if ts_type == TIMESTAMP_LOG_APPEND_TIME else "create",
        "key": _b64(msg.key()),
        "value": _b64(msg.value()),
        "headers": headers,
    }
    return json.dumps(row, sort_keys=True) + "\n"


def read_lines(path: Path) -> Iterable[dict[str, Any]]:
    """The records of a tail file, in order (for replay and for verification)."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


@dataclass
class FileSink:
    """Writes to ``<out>.partial`` and renames it to ``out`` once verified."""

    out: Path
    written: list[Origin] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._partial = self.out.with_name(self.out.name + ".partial")
        self._handle = self._partial.open("w", encoding="utf-8")

    def write(self, msg: Message) -> None:
        self._handle.write(record_line(msg))
        self.written.append((str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0)))

    def finish(self) -> dict[str, Any]:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        back = [(r["topic"], r["partition"], r["offset"]) for r in read_lines(self._partial)]
        _compare(back, self.written, str(self.out))
        self._partial.replace(self.out)
        digest = hashlib.sha256(self.out.read_bytes()).hexdigest()
        return {"file": str(self.out.resolve()), "sha256": digest}


class TopicSink:
    """Produces to the quarantine topics on the new primary (idempotent, acks=all), then reads them back."""

    def __init__(self, cluster: ClusterConfig, alias: str, source_alias: str, partitions: dict[str, int]):
        self.cluster, self.alias, self.source_alias = cluster, alias, source_alias
        self.written: list[Origin] = []
        self.topics = {t: quarantine_topic(source_alias, t) for t in partitions}
        self._create(partitions)
        self._producer = make_producer(
            cluster, "mirrorwatch-failback-tail", **{"acks": "all", "enable.idempotence": True}
        )
        self._failed: list[str] = []

    def _create(self, partitions: dict[str, int]) -> None:
        admin = make_admin(self.cluster, "mirrorwatch-failback-tail")
        consumer = make_consumer(self.cluster, "mirrorwatch-failback-tail")
        try:
            for topic, count in sorted(partitions.items()):
                name = self.topics[topic]
                existing = partitions_of(consumer, name, self.alias, 10)
                if existing is not None:
                    held = sum(
                        h - lo
                        for lo, h in (consumer.get_watermark_offsets(TopicPartition(name, p), 10) for p in existing)
                    )
                    if held:
                        raise CannotTell(
                            f"an empty quarantine topic {name} on '{self.alias}'",
                            f"it already holds {held} records (an earlier export?): delete it, or export to a file",
                        )
                    continue
                config = {"retention.ms": "-1", "message.timestamp.type": "CreateTime"}
                future = admin.create_topics([NewTopic(name, count, config=config)])[name]
                try:
                    future.result(30)
                except Exception as exc:
                    raise CannotTell(f"a quarantine topic {name} on '{self.alias}'", reason(exc, 30)) from None
        finally:
            consumer.close()

    def write(self, msg: Message) -> None:
        topic, partition, offset = str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0)
        origin = f"{self.source_alias}:{topic}:{partition}:{offset}".encode()
        ts_type, ts = msg.timestamp()
        self._producer.produce(
            self.topics[topic],
            value=msg.value(),
            key=msg.key(),
            partition=partition,
            timestamp=ts if ts_type != TIMESTAMP_LOG_APPEND_TIME else 0,
            headers=[*headers_of(msg), (ORIGIN_HEADER, origin)],
            on_delivery=self._delivered,
        )
        self._producer.poll(0)
        self.written.append((topic, partition, offset))

    def _delivered(self, err: Any, _msg: Message) -> None:
        if err is not None:
            self._failed.append(str(err))

    def finish(self) -> dict[str, Any]:
        left = self._producer.flush(60)
        if left or self._failed:
            why = self._failed[0] if self._failed else f"{left} records undelivered after 60 s"
            raise CannotTell(f"the delivery of the tail to '{self.alias}'", why)
        _compare(self._read_back(), self.written, f"the quarantine topics on '{self.alias}'")
        return {"topics": dict(sorted(self.topics.items())), "cluster": self.alias}

    def _read_back(self) -> list[Origin]:
        consumer = make_consumer(self.cluster, "mirrorwatch-failback-tail", None, **{"enable.partition.eof": True})
        try:
            positions: dict[tuple[str, int], int] = {}
            for name in self.topics.values():
                positions |= {(name, p): 0 for p in partitions_of(consumer, name, self.alias, 10) or []}
            ends = end_offsets(consumer, list(positions), 30)
            consumer.assign([TopicPartition(t, p, 0) for t, p in positions])
            back = []
            for msg in read_to_end(consumer, positions, 60, ends):
                found = dict(headers_of(msg)).get(ORIGIN_HEADER)
                _, topic, partition, offset = (found or b"?:?:-1:-1").decode().rsplit(":", 3)
                back.append((topic, int(partition), int(offset)))
            return back
        finally:
            consumer.close()


def _compare(back: list[Origin], written: list[Origin], where: str) -> None:
    if sorted(back) != sorted(written):
        missing, extra = len(set(written) - set(back)), len(back) - len(set(back) & set(written))
        raise CannotTell(
            f"the export back from {where}", f"{missing} records missing, {extra} unexpected: the export is not saved"
        )


def write_manifest(path: Path, manifest: dict[str, Any]) -> None:
    """Written last, atomically: its presence is the proof that the export is complete and verified."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"format": FORMAT, **manifest}, indent=2, sort_keys=True) + "\n")
    partial.replace(path)


def read_manifest(path: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads(path.read_text())
    if manifest.get("format") != FORMAT or not manifest.get("verified"):
        raise ValueError(f"{path} is not a verified {FORMAT} manifest")
    return manifest
