"""bench.mm2's pure logic: which variants a run measures and in what order, the ratios it prints, and the
transaction interval trade-off read from its figures. No Kafka, no benchmark is run."""

from __future__ import annotations

import argparse

import pytest

from bench.mm2 import (
    GOALS,
    LATENCY_GOALS,
    THROUGHPUT_RATIOS,
    add_ratios,
    chosen_variants,
    goal_lines,
    interval_trade_off,
    median,
    sitting_order,
    spread,
)


def flags(**skips) -> argparse.Namespace:
    names = ("skip_mm2", "skip_eos", "skip_mm2_eos", "fixed_timer")
    return argparse.Namespace(transaction_interval=0.1, **{n: skips.get(n, False) for n in names})


@pytest.mark.parametrize(
    "skips, sweep, expected",
    [
        ({}, [0.05, 0.1, 0.5], ["ours", "mm2", "ours_eos", "mm2_eos", "ours_eos_50ms", "ours_eos_500ms"]),
        ({}, [], ["ours", "mm2", "ours_eos", "mm2_eos"]),
        ({"skip_mm2": True, "skip_mm2_eos": True}, [0.5], ["ours", "ours_eos", "ours_eos_500ms"]),
        ({"skip_eos": True}, [0.05], ["ours", "mm2", "mm2_eos"]),
        ({"skip_mm2": True, "fixed_timer": True}, [], ["ours", "ours_eos", "mm2_eos", "ours_eos_timer"]),
        ({"skip_eos": True, "fixed_timer": True}, [], ["ours", "mm2", "mm2_eos"]),
    ],
)
def test_chosen_variants(skips, sweep, expected):
    assert [v.name for v in chosen_variants(flags(**skips), sweep)] == expected


def test_sitting_order_interleaves_rounds_every_other_one_reversed():
    variants = chosen_variants(flags(), [])
    names = ["ours", "mm2", "ours_eos", "mm2_eos"]
    assert [v.name for v in sitting_order(variants)] == names + names[::-1]
    assert [v.name for v in sitting_order(variants, rounds=3)] == names + names[::-1] + names
    assert sitting_order(variants, once=True) == tuple(variants)


@pytest.mark.parametrize(
    "values,middle,noise",
    [([100, 100, 100], 100, 0.0), ([90, 100, 110, 400], 105, 310 / 105), ([208, 342], 275, 134 / 275)],
)
def test_median_and_spread(values, middle, noise):
    assert median(values) == middle
    assert spread(values) == pytest.approx(noise)


def test_ratios_only_for_variants_that_ran():
    summary = {
        "ours": {"records_per_s": 200.0, "mb_per_s_per_core": 20.0, "records_per_cpu_s": 250.0},
        "ours_eos": {"records_per_s": 160.0, "mb_per_s_per_core": 16.0, "records_per_cpu_s": 200.0},
        "mm2_eos": {"records_per_s": 40.0, "mb_per_s_per_core": 4.0, "records_per_cpu_s": 50.0},
    }
    shown = add_ratios(summary, THROUGHPUT_RATIOS)
    assert summary["ours_eos_over_ours_records_per_s"] == 0.8
    assert summary["ours_eos_over_mm2_eos_records_per_cpu_s"] == 4.0
    assert "ours_over_mm2_records_per_s" not in summary  # MM2 at-least-once did not run
    assert len(shown) == 3


def test_interval_trade_off_reads_the_runs_figures():
    variants = chosen_variants(flags(skip_mm2=True, skip_mm2_eos=True), [0.5, 0.05])
    per = {"ours": 1.0, "ours_eos": 2.0, "ours_eos_50ms": 3.0, "ours_eos_500ms": 4.0}
    figures = {
        "throughput": {"100_bytes": {v: {"records_per_s": x} for v, x in per.items()}},
        "latency": {"5000_per_s": {v: {"p99_ms": x * 10} for v, x in per.items()}},
    }
    trade_off = interval_trade_off(figures, variants)
    assert list(trade_off) == ["50_ms", "100_ms", "500_ms"]
    assert trade_off["100_ms"] == {"variant": "ours_eos", "100_bytes_records_per_s": 2.0, "5000_per_s_p99_ms": 20.0}


@pytest.mark.parametrize(
    "summary,goals,expected",
    [
        (
            {"ours_eos_over_ours_records_per_s": 0.93},
            GOALS,
            ["our exactly-once / at-least-once records/s = 0.93 (goal >= 0.9: met)"],
        ),
        (
            {"ours_eos_over_ours_records_per_s": 0.85},
            GOALS,
            ["our exactly-once / at-least-once records/s = 0.85 (goal >= 0.9: NOT met)"],
        ),
        (
            {"ours_eos_over_mm2_eos_p50": 0.6, "ours_eos_over_mm2_eos_p99": 1.2},
            LATENCY_GOALS,
            [
                "our exactly-once / MM2 exactly-once p50 = 0.60 (goal <= 1.0: met)",
                "our exactly-once / MM2 exactly-once p99 = 1.20 (goal <= 1.0: NOT met)",
            ],
        ),
        ({}, LATENCY_GOALS, []),
    ],
)
def test_goal_lines_say_met_or_not(summary, goals, expected):
    assert goal_lines(summary, goals, "") == expected


def test_the_fixed_timer_stays_out_of_the_interval_trade_off():
    args = flags(skip_mm2=True, skip_mm2_eos=True, fixed_timer=True)
    variants = chosen_variants(args, [])
    figures = {"throughput": {"100_bytes": {v.name: {"records_per_s": 1.0} for v in variants}}}
    assert [row["variant"] for row in interval_trade_off(figures, variants).values()] == ["ours_eos"]


def test_the_min_interval_sweep_adds_a_variant_per_value():
    args = flags(skip_mm2=True, skip_mm2_eos=True)
    args.min_interval_sweep = [0.0, 0.02]
    variants = chosen_variants(args, [])
    assert [v.name for v in variants] == ["ours", "ours_eos", "ours_eos_min0ms", "ours_eos_min20ms"]
    assert [v.transaction_min_interval_s for v in variants[2:]] == [0.0, 0.02]
