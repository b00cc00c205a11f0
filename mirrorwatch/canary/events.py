"""Canary events on the wire, and when one arrived on the target."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Message

from ..core.records import CANARY_MARKER_HEADER, CanaryEvent, RecordFormatError

MARKER_VALUE = b"1"
BASIS_LOG_APPEND = "log_append_time"  # the target broker's append time, carried in the record
BASIS_RECEIVE = "receive_time"  # this reader's clock when the record came out of poll()


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def now_ms() -> float:
    return time.time() * 1000.0


@dataclass(frozen=True, slots=True)
class Arrival:
    event: CanaryEvent
    target_partition: int
    arrived_ms: float
    basis: str


def is_canary(msg: Message) -> bool:
    headers = msg.headers() or []
    # a received record's headers are (key, value) pairs; the client's type also allows the dict produce() takes
    return any(k == CANARY_MARKER_HEADER for k in (headers if isinstance(headers, dict) else (k for k, _ in headers)))


def arrival_of(msg: Message, received_ms: float) -> Arrival | None:
    """The event a target record carries and its arrival time, or None for anything that is not a canary event.

    Arrival is the broker's append time when the target topic uses LogAppendTime (every reader sees the same
    number, and reader polling delay is excluded), else the time this reader received it.
    """
    if not is_canary(msg):
        return None
    try:
        event = CanaryEvent.from_value(msg.value())
    except RecordFormatError:
        return None  # a newer or foreign writer: not ours to judge
    partition = msg.partition()
    if partition is None:  # an event, not a record
        return None
    ts_type, ts = msg.timestamp()
    if ts_type == TIMESTAMP_LOG_APPEND_TIME and ts > 0:
        return Arrival(event, partition, float(ts), BASIS_LOG_APPEND)
    return Arrival(event, partition, received_ms, BASIS_RECEIVE)
