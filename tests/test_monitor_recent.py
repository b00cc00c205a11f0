"""The monitor's pure parts added for the status page: the recent per-flow figures, the canary scrape's
arithmetic, and the scheduled analytics runner's outcomes (with stand-in commands instead of Spark: what is
tested here is the runner — timeout, failure reason, the atomic swap — not the job)."""

from __future__ import annotations

import dataclasses
import sys
import time
from datetime import UTC

import numpy as np
import pytest

from mirrorwatch.core.canary_metrics import parse_canary_metrics as parse
from mirrorwatch.core.config import AnalyticsSchedule
from mirrorwatch.core.redact import register_secret
from mirrorwatch.core.status import GROUP_STATUS, PartitionStatus
from mirrorwatch.monitor.analytics_runs import AnalyticsRunner, failure_reason, job_argv
from mirrorwatch.monitor.canary_scrape import CanaryScraper
from mirrorwatch.monitor.model import GroupView, Snapshot
from mirrorwatch.monitor.recent import CanaryFigures, RecentStore

OK, ERR = GROUP_STATUS.index("OK"), GROUP_STATUS.index("ERR")


def view(ts_ms: int, status: int = OK, true_lag=(0, 0), time_lag=(0.0, 0.0), error=None) -> GroupView:
    return GroupView(
        kind="mirror",
        flow="ew",
        cluster="east",
        target="west",
        group="g",
        ts_ms=ts_ms,
        group_status=status,
        error=error,
        topics=["t", "t"],
        partitions=[0, 1],
        committed_lag=np.array([5, -1]),
        read_lag=np.array([0, 0]),
        true_lag=np.array(true_lag),
        time_lag_s=np.array(time_lag, dtype=float),
    )


def snap(v: GroupView) -> Snapshot:
    return Snapshot(v.ts_ms, [v], {})


def test_recent_points_sums_rpo_status_changes_and_the_time_limit():
    store = RecentStore(minutes=1)
    t0 = 1_767_571_200_000
    store.record(snap(view(t0)))
    store.record(snap(view(t0)))  # the same sample twice: one point
    store.record(
        snap(view(t0 + 30_000, ERR, true_lag=(7, 3), time_lag=(2.5, float("nan")))),
        {"ew": CanaryFigures(t0 + 29_000, 0.05, 1.5, "OK")},
        canary_fresh_ms=5000,
    )
    store.record(
        snap(view(t0 + 61_000, OK, true_lag=(-1, 4), time_lag=(float("nan"), float("nan")))),
        {"ew": CanaryFigures(t0 + 29_000, 0.05, 1.5, "OK")},
        canary_fresh_ms=5000,
    )  # stale canary
    body = store.body("ew")
    points = body["points"]
    assert [p["ts_ms"] for p in points] == [t0 + 30_000, t0 + 61_000]  # t0 is older than a minute now
    assert points[0]["true_lag"] == 10 and points[0]["committed_lag"] == 5 and points[0]["rpo_seconds"] == 2.5
    assert points[0]["canary_round_trip_s"] == 0.05 and points[0]["heartbeat_age_s"] == 1.5
    assert points[1]["true_lag"] == 4 and points[1]["rpo_seconds"] is None and points[1]["canary_round_trip_s"] is None
    assert [(c["from"], c["to"]) for c in body["status_changes"]] == [("OK", "ERR"), ("ERR", "OK")]
    assert store.body("ew", since_ms=t0 + 60_000)["points"] == points[1:]
    assert store.body("nope") is None


def test_rpo_seconds_is_the_flows_oldest_waiting_record():
    assert view(1, time_lag=(0.5, 3.25)).figures.rpo_seconds == 3.25
    assert view(1, time_lag=(float("nan"), float("nan"))).figures.rpo_seconds is None


def test_every_surface_reads_the_flows_figures_from_one_place():
    """The HTTP API's totals, monitor lag's TOTAL line, the exporter's flow series and the recent figures are one
    FlowFigures (core.lag.flow_figures), computed once per view. Before, each computed its own copy, and two
    disagreed: the API's records_lost said 0 where no partition's loss was known, the recent figures None."""
    from dataclasses import replace

    from mirrorwatch.monitor.api import flow_body
    from mirrorwatch.monitor.commands import _totals_line
    from mirrorwatch.monitor.exporter import TextRenderer

    v = replace(view(1_767_571_200_000, true_lag=(7, 3), time_lag=(2.5, 0.75)), status=np.zeros(2, np.int8))
    assert v.figures is v.figures  # computed once
    totals = flow_body(v)["totals"]
    assert (totals["true_lag"], totals["committed_lag"], totals["rpo_seconds"]) == (10, 5, 2.5)
    assert "true-lag 10" in _totals_line(v, v.rows()) and "RPO 2.5s" in _totals_line(v, v.rows())
    store = RecentStore(minutes=1)
    store.record(snap(v))
    (point,) = store.body("ew")["points"]
    assert (point["true_lag"], point["rpo_seconds"]) == (10, 2.5)
    text = TextRenderer().render(snap(v)).decode()
    assert 'mirrorwatch_flow_rpo_seconds{flow="ew",source="east",target="west",group="g"} 2.5' in text, text


CANARY_TEXT = """\
mirrorwatch_canary_round_trip_seconds_sum{{flow="ew",source="east",target="west"}} {sum}
mirrorwatch_canary_round_trip_seconds_count{{flow="ew",source="east",target="west"}} {count}
mirrorwatch_canary_heartbeat_age_seconds{{flow="ew",source="east",target="west"}} {age}
mirrorwatch_canary_status{{flow="ew",source="east",target="west"}} 0.0
"""


def test_canary_round_trip_is_the_mean_of_new_probes_held_for_a_while():
    scraper = CanaryScraper("http://unused", hold_s=5)
    scraper.update(parse(CANARY_TEXT.format(sum=10.0, count=100.0, age="NaN")), 1_000)
    assert scraper.latest["ew"].round_trip_s is None and scraper.latest["ew"].heartbeat_age_s is None
    scraper.update(parse(CANARY_TEXT.format(sum=10.6, count=103.0, age=0.5)), 2_000)
    assert scraper.latest["ew"].round_trip_s == pytest.approx(0.2) and scraper.latest["ew"].status == "OK"
    scraper.update(parse(CANARY_TEXT.format(sum=10.6, count=103.0, age=4.0)), 6_000)  # no new probe: held
    assert scraper.latest["ew"].round_trip_s == pytest.approx(0.2) and scraper.latest["ew"].heartbeat_age_s == 4.0
    scraper.update(parse(CANARY_TEXT.format(sum=10.6, count=103.0, age=9.0)), 7_500)  # none for too long
    assert scraper.latest["ew"].round_trip_s is None


def test_first_probe_back_after_a_reading_without_the_histogram():
    """The canary creates the round-trip series with its first probe back: the reading before has no sum or count
    (this once raised KeyError on every scrape, so the recent figures never had a canary round trip)."""
    scraper = CanaryScraper("http://unused", hold_s=5)
    no_probe_yet = "\n".join(line for line in CANARY_TEXT.splitlines() if "round_trip" not in line)
    scraper.update(parse(no_probe_yet.format(age=0.3)), 1_000)
    assert scraper.latest["ew"].round_trip_s is None and scraper.latest["ew"].heartbeat_age_s == 0.3
    scraper.update(parse(CANARY_TEXT.format(sum=0.06, count=3.0, age=0.4)), 2_000)
    assert scraper.latest["ew"].round_trip_s == pytest.approx(0.02)


def test_failure_reason_is_the_jobs_last_line_redacted():
    assert failure_reason(2, "spark noise\nmonitor: history not found: /x\n") == "monitor: history not found: /x"
    assert failure_reason(1, "") == "exit code 1"
    internal = (
        "analyze: internal error: Py4JJavaError: calling o81.parquet.\n\tat org.apache...\n(set MIRRORWATCH_DEBUG=1)"
    )
    assert failure_reason(1, internal).startswith("analyze: internal error: Py4JJavaError")
    assert failure_reason(-9, "").startswith("killed by signal 9")
    register_secret("hunter2-scheduled")  # as loading a config with that password does
    assert "hunter2" not in failure_reason(1, "failed with sasl.password=hunter2-scheduled")


def test_job_argv_is_monitor_analyze_over_the_lookback():
    from datetime import datetime

    argv = job_argv(
        AnalyticsSchedule(every_s=60, master="spark://h:7077", lookback_days=1),
        "/h",
        "/o",
        datetime(2026, 1, 5, 12, tzinfo=UTC),
    )
    assert argv[1:3] == ["-m", "mirrorwatch.monitor.analytics.job"]
    assert (
        argv[argv.index("--from") + 1] == "2026-01-04T12:00:00Z"
        and argv[argv.index("--master") + 1] == "spark://h:7077"
    )


def test_scheduled_runs_are_incremental_as_of_now():
    from datetime import datetime

    now = datetime(2026, 1, 5, 12, tzinfo=UTC)
    argv = job_argv(AnalyticsSchedule(every_s=60), "/h", "/o.run-1", now, state="/o.state")
    assert argv[argv.index("--state") + 1] == "/o.state" and argv[argv.index("--to") + 1] == "2026-01-05T12:00:00Z"
    assert argv[argv.index("--from") + 1] == "2025-12-29T00:00:00Z"  # whole days: the look-back's first midnight
    assert "--late" not in argv  # the job's default: files that close within the hour
    runner = AnalyticsRunner(AnalyticsSchedule(every_s=60), "/h", "/srv/analytics")
    assert runner.state == "/srv/analytics.state"  # beside the output folder, which each run replaces whole


@pytest.mark.parametrize(("history_roll_s", "late"), [(3600.0, "3900"), (300.0, "600"), (60.0, "360"), (0.5, "300.5")])
def test_scheduled_runs_allow_samples_as_late_as_the_monitors_files_close(history_roll_s, late):
    from datetime import datetime

    runner = AnalyticsRunner(AnalyticsSchedule(every_s=60), "/h", "/srv/analytics", history_roll_s=history_roll_s)
    argv = runner.command(AnalyticsSchedule(every_s=60), "/h", "/o.run-1", datetime(2026, 1, 5, 12, tzinfo=UTC))
    assert argv[argv.index("--late") + 1] == late


@pytest.fixture
def history(tmp_path):
    folder = tmp_path / "history" / "lag" / "date=2026-01-05"
    folder.mkdir(parents=True)
    (folder / "part-1.parquet").write_bytes(b"stand-in: the runner only checks that a closed file exists")
    return tmp_path / "history"


def runner_with(command: str, history, out, timeout_s: float = 30) -> AnalyticsRunner:
    runner = AnalyticsRunner(AnalyticsSchedule(every_s=60, timeout_s=timeout_s), str(history), str(out))
    runner.command = lambda settings, history_dir, out_dir, now: [sys.executable, "-c", command, out_dir]
    return runner


WRITE_OUTPUT = (
    "import os, sys; os.makedirs(sys.argv[1]); open(os.path.join(sys.argv[1], 'summary.json'), 'w').write('{}')"
)


def test_a_good_run_replaces_the_output_whole(history, tmp_path):
    out = tmp_path / "analytics"
    out.mkdir()
    (out / "stale-table").write_text("from the previous run")
    status = runner_with(WRITE_OUTPUT, history, out).run()
    assert status.state == "ok" and status.reason is None and status.last_ok_ms and status.runs == 1
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["analytics", "history"]  # no staging or old folder left


def test_a_failed_run_keeps_the_last_output_and_says_why(history, tmp_path):
    out = tmp_path / "analytics"
    out.mkdir()
    (out / "summary.json").write_text("{}")
    status = runner_with(
        "import sys; print('monitor: no readable lag history files under x', file=sys.stderr); sys.exit(2)",
        history,
        out,
    ).run()
    assert status.state == "failed" and status.reason == "monitor: no readable lag history files under x"
    assert status.failures == 1 and (out / "summary.json").exists()


def test_a_slow_run_is_killed_after_the_timeout(history, tmp_path):
    started = time.monotonic()
    status = runner_with("import time; time.sleep(60)", history, tmp_path / "analytics", timeout_s=1).run()
    assert status.state == "timeout" and "timeout_s" in status.reason
    assert time.monotonic() - started < 30  # killed, not waited for


def test_no_closed_history_file_yet_is_waiting_not_failed(tmp_path):
    status = runner_with(WRITE_OUTPUT, tmp_path / "empty", tmp_path / "analytics").run()
    assert status.state == "waiting" and "history_roll_s" in status.reason and status.runs == 0


def test_runs_never_overlap_whoever_starts_them(history, tmp_path):
    import threading

    runner = runner_with("import time; time.sleep(3)", history, tmp_path / "analytics")
    first = threading.Thread(target=runner.run)
    first.start()
    deadline = time.monotonic() + 20
    while runner.status().state != "running" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert runner.run().state == "running" and runner.status().runs == 1  # returned at once, no second run
    first.join(30)


def test_the_api_body_masks_credentials_in_uris():
    from mirrorwatch.monitor.analytics_runs import RunStatus

    body = RunStatus(
        state="failed",
        master="spark://h:7077",
        out="s3a://AKIA:s3cr3t@bucket/analytics",
        reason="cannot write s3a://AKIA:s3cr3t@bucket/analytics/x",
    ).body()
    assert "s3cr3t" not in str(body) and body["out"] == "s3a://***@bucket/analytics"


def test_a_status_change_says_why():
    """The recent figures' status changes carry the new status's reasons, as every surface does (the page shows
    them beside each change): not only an UNKNOWN's error."""
    store = RecentStore(minutes=1)
    stopped = dataclasses.replace(view(1_000, ERR), status=np.array([PartitionStatus.STOP, PartitionStatus.OK]))
    store.record(snap(view(0)))
    store.record(snap(stopped))
    store.record(snap(view(2_000, error=None)))
    changes = store.body("ew")["status_changes"]
    assert [(c["to"], c["reason"]) for c in changes] == [
        ("OK", None),
        ("ERR", "1 partition STOP (the mirror stopped committing while new records arrived): t-0"),
        ("OK", None),
    ]
