"""bench/scrape.py's pure parts: reading a process's CPU and memory from /proc, and the cost per 1,000
partitions from figures at several sizes. No Kafka, no benchmark is run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.scrape import CLOCK_TICKS, cpu_seconds, per_thousand, rss_mb


@pytest.mark.parametrize(
    "comm",
    ["python", "my (odd) name", "a) b"],  # the command name may hold spaces and parentheses
)
def test_cpu_seconds_counts_fields_after_the_command_name(comm):
    rest = ["S", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", str(3 * CLOCK_TICKS), str(CLOCK_TICKS), "0"]
    assert cpu_seconds(f"123 ({comm}) " + " ".join(rest)) == 4.0


def test_cpu_seconds_and_rss_of_this_process():
    proc = Path(f"/proc/{os.getpid()}")
    assert cpu_seconds((proc / "stat").read_text()) > 0
    assert rss_mb((proc / "status").read_text()) > 1
    assert rss_mb("Name:\tx\nVmRSS:\t  2048 kB\n") == 2048 * 1024 / 1e6
    with pytest.raises(ValueError):
        rss_mb("Name:\tx\n")


def _f(scrape_bytes, scrape_ms, rss, cores):
    return {"scrape_bytes": scrape_bytes, "scrape_ms": scrape_ms, "rss_mb": rss, "cpu_cores": cores,
            "cpu_s_per_cycle": cores * 5}  # fmt: skip


@pytest.mark.parametrize(
    "figures, expected",
    [
        # memory and CPU: slope between the sizes, and the fixed part left at 0 partitions
        (
            {1000: _f(900_000, 10, 120, 0.02), 5000: _f(4_400_000, 45, 160, 0.06)},
            {"scrape_bytes_per_1000": 880_000, "scrape_ms_per_1000": 9, "rss_mb_per_1000": 10, "rss_mb_base": 110,
             "cpu_cores_per_1000": 0.01, "cpu_cores_base": 0.01, "cpu_s_per_cycle_per_1000": 0.05,
             "cpu_s_per_cycle_base": 0.05},
        ),
        # one size: value per thousand, no base
        (
            {2000: _f(200_000, 4, 100, 0.1)},
            {"scrape_bytes_per_1000": 100_000, "scrape_ms_per_1000": 2, "rss_mb_per_1000": 50, "rss_mb_base": 0,
             "cpu_cores_per_1000": 0.05, "cpu_cores_base": 0, "cpu_s_per_cycle_per_1000": 0.25,
             "cpu_s_per_cycle_base": 0},
        ),
    ],
)  # fmt: skip
def test_per_thousand(figures, expected):
    got = per_thousand(figures)
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value), name
