"""How much history a run reads, and the shuffle partitions that follows (``analytics/inputs.py``): plain values."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from mirrorwatch.monitor.analytics.inputs import HISTORY_BYTES_PER_SHUFFLE_PARTITION, day_share, shuffle_partitions

DAY_FILE = "file:///h/lag/date=2026-01-05/part-0.parquet"


def at(day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(2026, 1, day, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("uri", "start", "end", "share"),
    [
        (DAY_FILE, None, None, 1.0),  # no period: all of it
        (DAY_FILE, at(5), at(6), 1.0),  # the whole day
        (DAY_FILE, at(5, 22), None, 2 / 24),  # a scheduled run: the day's last two hours
        (DAY_FILE, at(5, 22), at(5, 23, 30), 1.5 / 24),
        (DAY_FILE, None, at(5, 6), 6 / 24),
        (DAY_FILE, at(4, 12), at(7), 1.0),  # the period spans the day
        (DAY_FILE, at(6), None, 0.0),  # the day is before the period (listed by its date, read for nothing)
        (DAY_FILE, None, at(5), 0.0),
        ("file:///h/lag/part-0.parquet", at(5, 22), None, 1.0),  # no date folder: its rows may be anywhere
    ],
)
def test_the_share_of_a_day_file_a_run_reads(uri: str, start: datetime, end: datetime, share: float) -> None:
    assert day_share(uri, start, end) == pytest.approx(share)


MB = 1024 * 1024


@pytest.mark.parametrize(
    ("configured", "read_bytes", "partitions"),
    [
        (4, 0, 4),  # nothing new since the state
        (4, 5 * MB, 4),  # an hour of a small flow: the configured count
        (4, 4 * HISTORY_BYTES_PER_SHUFFLE_PARTITION, 4),
        (4, 4 * HISTORY_BYTES_PER_SHUFFLE_PARTITION + 1, 5),
        (4, 1400 * MB, 44),  # 50 M generated samples, as the monitor writes them
        (200, 1400 * MB, 200),  # spark-submit's default stands when it is more
        (4, 200 * MB * 0.5, 4),  # half of a day's file counts half
    ],
)
def test_shuffle_partitions_grow_with_the_history_read(configured: int, read_bytes: float, partitions: int) -> None:
    assert shuffle_partitions(configured, read_bytes) == partitions
