"""The real-Prometheus harness (harness/prometheus_server.py), exercised against a stand-in exporter.

The stand-in is a tiny prometheus_client server exposing one series of every metric in docs/metrics.md
(names, types and labels parsed from its tables). It exists only to test the harness and the PromQL in
grafana/; the test against the real exporters comes with them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from harness.prometheus_server import PromQLError, check_metrics, free_port, prometheus_server, write_rules_copy
from mirrorwatch.core.connect_rest import STATES as CONNECT_STATES
from mirrorwatch.grafana_build import promql

METRICS_MD = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"
LABEL_VALUES = {
    "flow": "east-west",
    "source": "east",
    "target": "west",
    "topic": "orders",
    "partition": "0",
    "group": "mirrorwatch-east-west",
    "cluster": "east",
    "retriable": "false",
    "role": "source",
    "mirror": "mirrorwatch",
    "service": "monitor",
    "outcome": "committed",  # mirrorwatch_mirror_transactions_total (exactly-once)
    # MM2 connector state (docs/metrics.md): one RUNNING series, so that no connector alert holds
    "connector": "src->dst.MirrorSourceConnector",
    "task": "0",
    "state": "RUNNING",
}
# Values chosen so that exactly one metric-driven alert holds: true lag 20000 > 10000.
GAUGE_VALUES = {
    "mirrorwatch_lag_records": {"committed": 500, "read": 100, "true": 20000},
    "mirrorwatch_canary_status": 0,
    "mirrorwatch_group_status": 0,
    "mirrorwatch_partition_status": 0,
    "mirrorwatch_cluster_up": 1,
    "mirrorwatch_records_lost": 0,
    "mirrorwatch_canary_overdue_events": 0,  # healthy: nothing late
    "mirrorwatch_canary_oldest_overdue_seconds": 0,
    "mirrorwatch_hanging_transactions": 0,  # healthy: no transaction open past monitor.hanging_transaction_s
    "mirrorwatch_open_transaction_seconds": 0.2,
}
# counters are incremented by 10, except those whose alert fires on any value above 0
COUNTER_VALUES = {"mirrorwatch_mirror_records_lost_total": 0}


def stand_in_registry() -> tuple[CollectorRegistry, dict]:
    """The registry and its series: {(name, kind or None): child}."""
    registry, series = CollectorRegistry(), {}
    rows = re.findall(r"^\| `(mirrorwatch_\w+)` \| (\w+) \| ([^|]+) \|", METRICS_MD.read_text(), re.M)
    assert rows, "no metric table in docs/metrics.md"
    for name, kind, labels_cell in rows:
        if any(seen == name for seen, _ in series):  # documented once per service (e.g. mirrorwatch_is_leader)
            continue
        labels, kinds = [], [None]
        for part in (p.strip() for p in labels_cell.split(",")):
            if part == "(none)":  # e.g. mirrorwatch_is_leader: the scrape's own labels tell replicas apart
                continue
            label, _, values = part.partition("=")
            labels.append(label)
            if values:  # kind=`read`/`acked`/`committed`: one series per value
                kinds = re.findall(r"`(\w+)`", values)
        if "state" in labels:  # one series per possible state, 1 for the current (RUNNING), as the exporter does
            kinds = list(CONNECT_STATES)
        cls = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}[kind]
        metric = cls(name.removesuffix("_total"), name, labels, registry=registry)
        for k in kinds:
            values = {**LABEL_VALUES, **({"state": k} if "state" in labels else {"kind": k} if k else {})}
            child = series[name, k] = metric.labels(**{label: values[label] for label in labels}) if labels else metric
            value = GAUGE_VALUES.get(name, 1) if "state" not in labels else int(k == "RUNNING")
            {
                "counter": lambda: child.inc(COUNTER_VALUES.get(name, 10)),
                "histogram": lambda: [child.observe(0.05) for _ in range(3)],
                "gauge": lambda: child.set(value[k] if isinstance(value, dict) else value),
            }[kind]()
    return registry, series


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    registry, series = stand_in_registry()
    httpd, _thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    rules = write_rules_copy(tmp_path_factory.mktemp("rules") / "rules.yml", "2s")
    targets = {
        "mirrorwatch-monitor": [f"127.0.0.1:{httpd.server_port}"],
        "mirrorwatch-canary": [f"127.0.0.1:{free_port()}"],
    }  # nothing listens: up == 0
    try:
        with prometheus_server(targets, [rules], workdir=tmp_path_factory.mktemp("prometheus")) as prom:
            yield prom, series, f"http://127.0.0.1:{httpd.server_port}/metrics"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_scrapes_and_queries(live):
    prom = live[0]
    up = prom.wait_for(
        lambda: {r["metric"]["job"]: r["value"][1] for r in prom.query("up")}.get("mirrorwatch-monitor"),
        what="stand-in scraped",
    )
    assert up == "1"
    lag = prom.query('mirrorwatch_lag_records{kind="true"}')
    assert [r["metric"]["flow"] for r in lag] == ["east-west"] and lag[0]["value"][1] == "20000"
    with pytest.raises(PromQLError, match="parse error"):
        prom.query("sum(mirrorwatch_lag_records")


def test_check_metrics_on_live_output(live):
    assert check_metrics(live[2]) == ""


def query_part(where: str, expr: str) -> str:
    """Alert expressions only return series while they hold; check that their query part returns data."""
    return promql.split_condition(expr)[0] if where.startswith("rule Mirrorwatch") else expr


def test_every_expression_parses_and_returns_series(live):
    prom = live[0]
    expressions = promql.all_promql_expressions()
    assert len(expressions) > 40
    for where, expr in expressions:
        try:
            prom.query(expr)  # a parse error raises here, naming the expression
        except PromQLError as e:
            pytest.fail(f"{where}: {expr}\n{e}", pytrace=False)

    def empty() -> list[str]:
        return [f"{w}: {e}" for w, e in expressions if not prom.query(query_part(w, e))]

    # rate()/increase() need two scrapes and recording rules one evaluation: poll, then report what is empty
    try:
        prom.wait_for(lambda: not empty(), 60, "every expression returning series")
    except AssertionError:
        pytest.fail("expressions without series:\n" + "\n".join(empty()), pytrace=False)


def test_short_for_alerts_fire_and_resolve(live):
    prom, series, _ = live
    firing = lambda: sorted({a["labels"]["alertname"] for a in prom.alerts() if a["state"] == "firing"})  # noqa: E731
    prom.wait_for(
        lambda: firing() == ["MirrorwatchExporterDown", "MirrorwatchTrueLagHigh"],
        60,
        "true-lag and exporter-down alerts firing",
    )
    (lag,) = prom.firing("MirrorwatchTrueLagHigh")
    assert lag["labels"]["flow"] == "east-west" and lag["labels"]["severity"] == "critical"
    assert lag["annotations"]["summary"] == "Mirror flow east-west is 20k records behind (true lag)"
    assert "--flow east-west" in lag["annotations"]["runbook"]
    (down,) = prom.firing("MirrorwatchExporterDown")
    assert down["labels"]["job"] == "mirrorwatch-canary"

    series["mirrorwatch_lag_records", "true"].set(10)
    prom.wait_for(lambda: not prom.firing("MirrorwatchTrueLagHigh"), 60, "true-lag alert resolved")
