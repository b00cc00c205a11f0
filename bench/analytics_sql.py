"""Plain Spark SQL yardstick for ``monitor analyze``: the same ten tables, written the way a Spark user would.

    .venv/bin/python -m bench.analytics_sql --history DIR --out DIR [--master local[*]]

One SQL view of the enriched samples (spacing, the hour's median spacing, weights, flags), cached once; then each
table as one SQL statement over it, written as one Parquet file. Same definitions as the job (docs/analytics.md):
exact hourly percentiles, KLL percentiles over days and topics, time-weighted compliance, incidents by
sessionization. What it leaves out, and the job does: the footer check of every file, incremental state, hour
partials, ``summary.json``. ``bench/analytics.py`` runs it in its own process, in the same sitting as the job,
and prints job ÷ this.
"""

from __future__ import annotations

import argparse
import time

from mirrorwatch.monitor.analytics.definitions import SKETCH_K
from mirrorwatch.monitor.analytics.session import spark_session

SLO_LAG, SLO_TIME_S, GAP = 10_000, 60.0, 3.0
P = "array(0.5, 0.95, 0.99)"
S = "flow, source, target, `group`, topic, `partition`"  # a series
T = "flow, source, target, `group`, topic"
F = "flow, source, target, `group`"

ENRICHED = f"""
WITH base AS (
  SELECT {S}, mirror, unix_millis(ts) AS ts_ms, floor(unix_millis(ts) / 3600000) * 3600000 AS hour_ms,
         true_lag, committed_lag, time_lag_s, status,
         lead(unix_millis(ts)) OVER w AS next_ts_ms, lead(true_lag) OVER w AS next_true_lag
  FROM raw WINDOW w AS (PARTITION BY {S} ORDER BY ts)
), spaced AS (
  SELECT *, next_ts_ms - ts_ms AS spacing_ms,
         percentile(CASE WHEN next_ts_ms < hour_ms + 3600000 THEN next_ts_ms - ts_ms END, 0.5)
           OVER (PARTITION BY {S}, hour_ms) AS median_spacing_ms
  FROM base
)
SELECT *,
  CASE WHEN median_spacing_ms IS NULL THEN 0L WHEN spacing_ms IS NULL THEN floor(median_spacing_ms)
       ELSE least(spacing_ms, floor({GAP} * median_spacing_ms)) END AS weight_ms,
  CASE WHEN spacing_ms IS NULL THEN 0L WHEN median_spacing_ms IS NULL THEN spacing_ms
       ELSE greatest(spacing_ms - floor({GAP} * median_spacing_ms), 0L) END AS unobserved_ms,
  coalesce(spacing_ms > {GAP} * median_spacing_ms, false) AS gap_after,
  coalesce(true_lag > {SLO_LAG}, false) OR coalesce(time_lag_s > {SLO_TIME_S}, false) AS breach,
  coalesce(true_lag <= {SLO_LAG} AND time_lag_s <= {SLO_TIME_S}, false) AS compliant
FROM spaced
"""

MIRRORS = """
SELECT flow, source, target, coalesce(max(CASE WHEN mirror != '' THEN struct(ts_ms, mirror) END).mirror, '') AS mirror
FROM e GROUP BY flow, source, target
"""


def _lag_columns(sketch: bool) -> str:
    cols = []
    for kind in ("true_lag", "committed_lag", "time_lag_s"):
        if sketch:
            typ = "double" if kind == "time_lag_s" else "bigint"
            pcts = f"kll_sketch_get_quantile_{typ}(kll_sketch_agg_{typ}({kind}, {SKETCH_K}), {P})"
            pcts = f"CASE WHEN count({kind}) > 0 THEN {pcts} END"
        else:
            pcts = f"percentile({kind}, {P})"
        cols.append(f"{pcts} AS {kind}_pcts, max({kind}) AS {kind}_max, count({kind}) AS {kind}_known")
    return ", ".join(cols)


def _lag_select(bucket_ms: int, median: str) -> str:
    cols = []
    for kind in ("true_lag", "committed_lag", "time_lag_s"):
        cols += [f"double({kind}_pcts[{i}]) AS {kind}_p{p}" for i, p in enumerate((50, 95, 99))]
        cols.append(f"{kind}_max")
    expected = f"try_divide(double({bucket_ms}), {median})"
    return (
        "samples, true_lag_known, committed_lag_known, time_lag_s_known, " + ", ".join(cols) + ", "
        f"{expected} AS expected_samples, least(1.0, try_divide(samples, {expected})) AS coverage, gaps, "
        "unobserved_ms / 1000.0 AS unobserved_s"
    )


TABLES = {
    "lag_hourly": f"""
SELECT {S}, timestamp_millis(hour_ms) AS bucket_start, {_lag_select(3_600_000, "median_spacing_ms")} FROM (
  SELECT {S}, hour_ms, count(1) AS samples, {_lag_columns(False)}, max(median_spacing_ms) AS median_spacing_ms,
         sum(CAST(gap_after AS BIGINT)) AS gaps, sum(unobserved_ms) AS unobserved_ms
  FROM e GROUP BY {S}, hour_ms)""",
    "lag_daily": f"""
SELECT {S}, timestamp_millis(day_ms) AS bucket_start, {_lag_select(86_400_000, "median_spacing_ms")} FROM (
  SELECT {S}, day_ms, sum(samples) AS samples, {
        ", ".join(
            f"kll_sketch_get_quantile_{'double' if k == 'time_lag_s' else 'bigint'}(CASE WHEN sum({k}_known) > 0 "
            f"THEN kll_merge_agg_{'double' if k == 'time_lag_s' else 'bigint'}({k}_sk) END, {P}) AS {k}_pcts, "
            f"max({k}_max) AS {k}_max, sum({k}_known) AS {k}_known"
            for k in ("true_lag", "committed_lag", "time_lag_s")
        )
    },
         percentile(median_spacing_ms, 0.5) AS median_spacing_ms, sum(gaps) AS gaps, sum(unobserved_ms) AS unobserved_ms
  FROM (SELECT {S}, hour_ms, floor(hour_ms / 86400000) * 86400000 AS day_ms, count(1) AS samples,
          {
        ", ".join(
            f"kll_sketch_agg_{'double' if k == 'time_lag_s' else 'bigint'}({k}, {SKETCH_K}) AS {k}_sk, "
            f"max({k}) AS {k}_max, count({k}) AS {k}_known"
            for k in ("true_lag", "committed_lag", "time_lag_s")
        )
    },
          max(median_spacing_ms) AS median_spacing_ms, sum(CAST(gap_after AS BIGINT)) AS gaps,
          sum(unobserved_ms) AS unobserved_ms
        FROM e GROUP BY {S}, hour_ms)
  GROUP BY {S}, day_ms)""",
    "sampling_gaps": f"""
SELECT {S}, timestamp_millis(ts_ms) AS gap_start, timestamp_millis(next_ts_ms) AS gap_end, spacing_ms / 1000.0 AS gap_s,
       median_spacing_ms / 1000.0 AS median_spacing_s, try_divide(spacing_ms, median_spacing_ms) AS spacing_ratio,
       unobserved_ms / 1000.0 AS unobserved_s
FROM e WHERE gap_after""",
    "slo_by_topic": "SLO:" + T,
    "slo_by_flow": "SLO:" + F,
    "incidents": f"""
WITH marked AS (
  SELECT *, sum(CAST(starts AS INT)) OVER (PARTITION BY {S} ORDER BY ts_ms
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS incident_no
  FROM (SELECT {S}, ts_ms, true_lag, time_lag_s, status, breach, gap_after, next_ts_ms, next_true_lag,
               lead(compliant) OVER w AS next_compliant,
               breach AND (NOT lag(breach, 1, false) OVER w OR lag(gap_after, 1, false) OVER w) AS starts
        FROM e WINDOW w AS (PARTITION BY {S} ORDER BY ts_ms))
), g AS (
  SELECT {S}, min(ts_ms) AS start_ms, max(ts_ms) AS end_ms, count(1) AS samples,
         max(struct(true_lag, -ts_ms AS neg_ts)) AS peak, max(time_lag_s) AS peak_time_lag_s,
         array_sort(collect_set(status)) AS statuses,
         max_by(struct(gap_after, next_ts_ms, next_true_lag, next_compliant, true_lag), ts_ms) AS last
  FROM marked WHERE breach GROUP BY {S}, incident_no
), r AS (
  SELECT *, last.next_ts_ms IS NOT NULL AND NOT last.gap_after AND coalesce(last.next_compliant, false) AS rec,
         CASE WHEN peak.true_lag IS NOT NULL THEN -peak.neg_ts END AS peak_ms FROM g
), ref AS (
  SELECT *, CASE WHEN rec THEN last.next_ts_ms ELSE end_ms END AS ref_ms,
         CASE WHEN rec THEN last.next_true_lag ELSE last.true_lag END AS ref_lag FROM r
)
SELECT {S}, timestamp_millis(start_ms) AS start, timestamp_millis(end_ms) AS `end`,
       CASE WHEN rec THEN timestamp_millis(last.next_ts_ms) END AS recovered, NOT rec AS open,
       (ref_ms - start_ms) / 1000.0 AS duration_s, samples, peak.true_lag AS peak_true_lag,
       timestamp_millis(peak_ms) AS peak_ts, peak_time_lag_s,
       CASE WHEN ref_lag IS NOT NULL AND peak_ms IS NOT NULL AND ref_ms != peak_ms
            THEN (peak.true_lag - ref_lag) / ((ref_ms - peak_ms) / 1000.0) END AS catch_up_rate_per_s,
       statuses
FROM ref""",
    "incidents_by_topic": f"""
WITH u AS (SELECT *, coalesce(recovered, `end`) AS until FROM incidents_out),
n AS (SELECT *, max(until) OVER (PARTITION BY {T} ORDER BY start, `partition`
                                 ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_until FROM u),
w AS (SELECT *, sum(CAST(prev_until IS NULL OR start > prev_until AS INT)) OVER (PARTITION BY {T}
        ORDER BY start, `partition` ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS window_no FROM n)
SELECT {T}, min(start) AS start, max(until) AS `end`,
       (unix_millis(max(until)) - unix_millis(min(start))) / 1000.0 AS duration_s,
       count(DISTINCT `partition`) AS partitions, count(1) AS partition_incidents,
       max(peak_true_lag) AS max_partition_peak_true_lag, max(peak_time_lag_s) AS peak_time_lag_s,
       bool_or(open) AS open
FROM w GROUP BY {T}, window_no""",
    "committed_view": f"""
SELECT {T}, samples, cmt_min AS committed_minus_true_min, cmt_sum / samples AS committed_minus_true_mean,
       double(q[0]) AS committed_minus_true_p50, double(q[1]) AS committed_minus_true_p95,
       double(q[2]) AS committed_minus_true_p99, cmt_max AS committed_minus_true_max, committed_pages, false_pages,
       false_pages / samples AS false_page_share, missed_breaches
FROM (SELECT {T}, count(d) AS samples, min(d) AS cmt_min, sum(d) AS cmt_sum, max(d) AS cmt_max,
             kll_sketch_get_quantile_bigint(kll_sketch_agg_bigint(d, {SKETCH_K}), {P}) AS q,
             count(CASE WHEN d IS NOT NULL AND committed_lag > {SLO_LAG} THEN 1 END) AS committed_pages,
             count(CASE WHEN d IS NOT NULL AND committed_lag > {SLO_LAG} AND compliant THEN 1 END) AS false_pages,
             count(CASE WHEN d IS NOT NULL AND committed_lag <= {SLO_LAG} AND breach THEN 1 END) AS missed_breaches
      FROM (SELECT *, committed_lag - true_lag AS d FROM e) GROUP BY {T})
WHERE samples > 0""",
    "trend_daily": f"""
SELECT *, true_lag_p99 - lag(true_lag_p99) OVER w AS true_lag_p99_change,
       time_lag_s_p99 - lag(time_lag_s_p99) OVER w AS time_lag_s_p99_change
FROM (SELECT {T}, day, count(1) AS samples,
             double(kll_sketch_get_quantile_bigint(CASE WHEN count(true_lag) > 0
               THEN kll_sketch_agg_bigint(true_lag, {SKETCH_K}) END, 0.99)) AS true_lag_p99,
             double(kll_sketch_get_quantile_double(CASE WHEN count(time_lag_s) > 0
               THEN kll_sketch_agg_double(time_lag_s, {SKETCH_K}) END, 0.99)) AS time_lag_s_p99
      FROM (SELECT *, to_date(timestamp_millis(floor(ts_ms / 86400000) * 86400000)) AS day FROM e)
      GROUP BY {T}, day)
WINDOW w AS (PARTITION BY {T} ORDER BY day)""",
    "trend": f"""
SELECT *, last_true_lag_p99 - first_true_lag_p99 AS true_lag_p99_change,
       CASE WHEN first_true_lag_p99 > 0 THEN (last_true_lag_p99 - first_true_lag_p99) / first_true_lag_p99 END
         AS true_lag_p99_change_ratio
FROM (SELECT {T}, count(1) AS days, min(day) AS first_day, max(day) AS last_day,
             min_by(true_lag_p99, day) AS first_true_lag_p99, max_by(true_lag_p99, day) AS last_true_lag_p99,
             regr_slope(true_lag_p99, day_index) AS true_lag_p99_slope_per_day,
             regr_slope(time_lag_s_p99, day_index) AS time_lag_s_p99_slope_per_day
      FROM (SELECT *, datediff(day, min(day) OVER (PARTITION BY {T})) AS day_index FROM trend_daily_out)
      GROUP BY {T})""",
}


def slo_sql(keys: str) -> str:
    return f"""
SELECT *, CASE WHEN compliant_ms + breach_ms > 0 THEN compliant_ms / (compliant_ms + breach_ms) END AS compliance,
       CASE WHEN compliant_ms + breach_ms + unknown_ms + unobserved_ms > 0
            THEN compliant_ms / (compliant_ms + breach_ms + unknown_ms + unobserved_ms) END AS compliance_lower_bound
FROM (SELECT {keys}, count(1) AS samples,
             coalesce(sum(CASE WHEN compliant THEN weight_ms END), 0L) AS compliant_ms,
             coalesce(sum(CASE WHEN breach THEN weight_ms END), 0L) AS breach_ms,
             coalesce(sum(CASE WHEN NOT compliant AND NOT breach THEN weight_ms END), 0L) AS unknown_ms,
             sum(unobserved_ms) AS unobserved_ms,
             timestamp_millis(min(ts_ms)) AS first_sample, timestamp_millis(max(ts_ms)) AS last_sample
      FROM e GROUP BY {keys})"""


def run(history: str, out: str, master: str) -> dict[str, float]:
    started = time.monotonic()
    spark, _ = spark_session(master, app_name="mirrorwatch-analytics-plain-sql")
    times = {"start_s": time.monotonic() - started}
    spark.read.parquet(f"{history}/lag").createOrReplaceTempView("raw")
    spark.sql(ENRICHED).createOrReplaceTempView("e")
    spark.sql("CACHE TABLE e")  # eager: one scan of the input, the windows computed once
    spark.sql(MIRRORS).createOrReplaceTempView("mirrors")
    spark.sql("CACHE TABLE mirrors")
    for name, sql in TABLES.items():
        sql = slo_sql(sql[4:]) if sql.startswith("SLO:") else sql
        df = spark.sql(sql).join(spark.table("mirrors").hint("broadcast"), ["flow", "source", "target"], "left")
        if name in ("incidents", "trend_daily"):  # read back by the next table, as the job does
            df.coalesce(1).write.mode("overwrite").parquet(f"{out}/{name}")
            spark.read.parquet(f"{out}/{name}").createOrReplaceTempView(f"{name}_out")
        else:
            df.coalesce(1).write.mode("overwrite").parquet(f"{out}/{name}")
    times["total_s"] = time.monotonic() - started
    spark.stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--history", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    times = run(args.history, args.out, args.master)
    print(f"plain SQL: Spark start {times['start_s']:.1f}s, total {times['total_s']:.1f}s", flush=True)


if __name__ == "__main__":
    main()
