"""The newest mirrored heartbeat for one (source, target) pair, as seen on the target."""

from __future__ import annotations

from ..core.mm2 import any_heartbeat
from ..core.records import RecordFormatError

HEARTBEAT_LOOKBACK = 200  # records read back per heartbeat partition at start: several flows may share it


class HeartbeatWatch:
    """``any_pair``: every beat in the topic counts (MirrorMaker 2's mirrored ``<source>.heartbeats`` holds the
    beats its heartbeat connector wrote on the source, which name other pairs than this flow's)."""

    def __init__(self, source: str, target: str, any_pair: bool = False):
        self.source, self.target, self.any_pair = source, target, any_pair
        self.newest_ms: int | None = None

    def offer(self, value: bytes | None, key: bytes | None = None) -> None:
        try:
            beat = any_heartbeat(key, value)
        except RecordFormatError:
            return
        if (self.any_pair or (beat.source == self.source and beat.target == self.target)) and isinstance(
            beat.ts_ms, int
        ):
            if self.newest_ms is None or beat.ts_ms > self.newest_ms:
                self.newest_ms = beat.ts_ms

    def age_s(self, now_ms: float) -> float | None:
        return None if self.newest_ms is None else max(0.0, (now_ms - self.newest_ms) / 1000.0)


def lookback_offset(end: int) -> int:
    # below the low watermark the reader's auto.offset.reset=earliest moves it up to the first kept record
    return max(0, end - HEARTBEAT_LOOKBACK)
