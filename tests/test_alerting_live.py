"""One page per incident, end to end (issue 27): the real mirror, canary and monitor on the worker's cluster pair,
a real Prometheus evaluating the SHIPPED rules, a real Alertmanager with the SHIPPED configuration
(grafana/alertmanager/alertmanager.yml) whose receivers all point at one local webhook receiver.

To keep the module short, two things are changed, and only these:
- every alert's ``for:`` (and ``keep_firing_for:``) is divided by FOR_FACTOR (20: the flow page's 30 s becomes 1.5 s, the longest paging
  ``for:``, 5 m, 15 s), one factor for all so that their ORDER is kept: which alert fires first decides what
  Alertmanager inhibits. Thresholds inside expressions (30 s of stale heartbeats, 120 s of RPO...) are not
  scaled, so alerts that need them do not fire in these short faults; bench/detection.py runs the file unchanged;
- Alertmanager's group_wait and group_interval are AM_TIMINGS (1 s, 2 s) instead of the file's (tens of s).
Prometheus scrapes and evaluates every second; the canary probes and the monitor samples every second.

Cases, in this order, on one stack: healthy traffic with a burst (no notification, no paging alert even
pending); promtool check metrics on each live exporter, and every PromQL expression of grafana/ returning series
(tests/support/real_stack.py says which may not); the mirror frozen (SIGSTOP: one page, MirrorwatchFlowInTrouble naming the mirror as the cause; SIGCONT:
one resolved notification, no other page); the target broker frozen (one page, MirrorwatchClusterUnreachable,
no flow page; the pair recovers before the module ends, other modules on the worker share it).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from harness.alertmanager import (
    PAGE_RECEIVER,
    alertmanager_server,
    check_config,
    notification_line,
    paged_alerts,
    pages,
)
from harness.helpers import produce_numbered
from harness.prometheus_server import PromQLError, check_metrics, duration_s, prometheus_server, write_rules_scaled
from harness.webhooks import WebhookReceiver
from mirrorwatch.grafana_build import promql

from .support.outages import frozen, local_only
from .support.real_stack import (
    ALERT_RULES,
    FLOW,
    NO_SERIES_WHEN_HEALTHY,
    PARTITIONS,
    Stack,
    checked_expression,
    healthy,
)

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_AM = ROOT / "grafana" / "alertmanager" / "alertmanager.yml"
FOR_FACTOR = 20
AM_TIMINGS = {"group_wait": "1s", "group_interval": "2s"}
BURST = 5000  # records at once on top of the steady 50/s: the true lag jumps, well below the 10,000 page


def group_coordinator_ready(bootstrap: str, timeout_s: float = 180) -> None:
    """Until a group offset commit succeeds: on a pair just started on a loaded machine the group coordinator
    loads for longer than the Stack's own retries wait (seen at load 25: NOT_COORDINATOR for over 10 s)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    from harness.helpers import create_topic

    topic = f"t-alerting-warm-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"warm-{topic}", "enable.auto.commit": False})
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(1)
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def stack(source, target, tmp_path_factory):
    local_only(source, target)
    group_coordinator_ready(source.bootstrap)
    base = tmp_path_factory.mktemp("alerting-live")
    scaled_for = write_rules_scaled(base / "rules.yml", FOR_FACTOR)
    hook = WebhookReceiver()
    s = Stack(source, target, base)
    try:
        s.start()
        config = SHIPPED_AM
        receivers = {r: hook.url for r in ("mirrorwatch-page", "mirrorwatch-ticket", "mirrorwatch-null")}
        with (
            alertmanager_server(config, receivers, AM_TIMINGS, workdir=base / "alertmanager") as am,
            prometheus_server(
                s.targets(), [base / "rules.yml"], workdir=base / "prometheus", alertmanager_url=am.url
            ) as prom,
        ):

            def ready():
                s.check_alive()
                return healthy(prom)

            prom.wait_for(ready, 180, "stack healthy in Prometheus (exporters up, canary OK, evaluator OK)")
            yield SimpleNamespace(s=s, prom=prom, am=am, hook=hook, scaled_for=scaled_for, config=config)
    finally:
        s.stop()
        hook.close()


def paging_for_s(stack) -> float:
    """The longest scaled ``for:`` among the paging (critical) alerts of the shipped rules."""
    from mirrorwatch.grafana_build import promql

    critical = {
        r["alert"] for r in promql.rules_of(promql.load_rules(), "alert") if r["labels"]["severity"] == "critical"
    }
    return max(v for name, v in stack.scaled_for.items() if name in critical)


def story(hook: WebhookReceiver, since: int = 0, t0: float | None = None) -> str:
    """The notifications from index ``since``, one a line, each with its arrival in s after ``t0``."""
    lines = [
        (f"+{at - t0:5.1f} s " if t0 is not None else "") + notification_line(b)
        for b, at in zip(hook.bodies[since:], hook.received_at[since:], strict=True)
    ]
    return "\n".join(lines) or "(none)"


def critical_alerts(prom) -> list[str]:
    """Paging alerts pending or firing in Prometheus."""
    return [
        f"{r['metric']['alertname']} {r['metric']['alertstate']}" for r in prom.query('ALERTS{severity="critical"}')
    ]


def wait_for_page(stack, since: int, timeout_s: float = 120) -> dict:
    return stack.prom.wait_for(
        lambda: (
            (stack.s.check_alive(mirror_too=False) or pages(stack.hook.bodies[since:]))
            and pages(stack.hook.bodies[since:])[0]
        ),
        timeout_s,
        "a page",
    )


def hold_and_watch(stack, seconds: float) -> None:
    """Keep the fault on for ``seconds`` (long enough for every other paging alert's scaled ``for:``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stack.s.check_alive(mirror_too=False)
        time.sleep(0.5)


def resolved(stack, since: int, alertname: str) -> bool:
    """A page notification told that ``alertname`` resolved (a group's notification lists each of its alerts with
    its own status; the body's status stays firing while another alert of the group fires)."""
    return any(
        a["labels"]["alertname"] == alertname and a["status"] == "resolved"
        for b in stack.hook.bodies[since:]
        if b["receiver"] == PAGE_RECEIVER
        for a in b["alerts"]
    )


def wait_telling(stack, predicate, timeout_s: float, what: str, since: int, t0: float) -> None:
    """Wait for ``predicate``; on timeout, fail with the notifications so far (what happened instead)."""
    try:
        stack.prom.wait_for(predicate, timeout_s, what)
    except AssertionError as exc:
        pytest.fail(f"{what}: not within {timeout_s} s; notifications:\n{story(stack.hook, since, t0)}\n{exc}")


def back_to_healthy(stack, what: str) -> None:
    """Healthy again, and then a few more seconds: a flow's other alerts that outlive its page notify within a
    group_interval or two of the page's resolution, and they count against "one page"."""
    stack.prom.wait_for(lambda: (stack.s.check_alive() or True) and healthy(stack.prom), 180, what)
    hold_and_watch(stack, 3 * max(duration_s(v) for v in AM_TIMINGS.values()))


def test_the_config_under_test_checks_with_amtool(stack):
    assert check_config(stack.config) == ""


def test_healthy_traffic_with_a_burst_sends_no_notification(stack):
    # the rules' longest `for:` (scaled: TranslationCoverageLow's 15 m is 45 s here), + a few evaluations, so that any
    # `for:` started at the burst can complete: no notification of any kind, no paging alert even pending
    watch_s = max(stack.scaled_for.values()) + 3
    started = time.monotonic()
    produce_numbered(stack.s.source.bootstrap, stack.s.topic, BURST, PARTITIONS, start=10**6)
    seen: set[str] = set()
    while time.monotonic() - started < watch_s:
        stack.s.check_alive()
        seen.update(critical_alerts(stack.prom))
        time.sleep(0.5)
    assert not seen, f"paging alerts pending or firing on a healthy stack: {sorted(seen)}"
    assert stack.hook.bodies == [], f"notifications on a healthy stack:\n{story(stack.hook)}"


# grafana/ against the real exporters, on this stack while it is healthy (they were a module of their own, with a
# stack and a Prometheus of their own: one stack for both saves a minute and a half of the suite)
def test_promtool_check_metrics_on_each_live_exporter(stack):
    # by now the canary has judged probes and the mirror acknowledged records: histograms have observations
    for name in ("mirror", "canary", "monitor"):
        url = stack.s.url(name)
        text = requests.get(url, timeout=10).text
        assert "mirrorwatch_" in text, f"{name} exporter serves no mirrorwatch metrics:\n{text[:2000]}"
        findings = check_metrics(url)
        assert findings == "", f"promtool check metrics on the live {name} exporter ({url}):\n{findings}"


def test_every_expression_parses_and_returns_series(stack):
    """Every PromQL expression of grafana/ (``promql.all_promql_expressions()``: recording rules, alert queries,
    dashboard panels, Grafana-managed rules) parses in the real Prometheus and returns series from the real
    exporters, except the documented ``NO_SERIES_WHEN_HEALTHY`` (their metric families must be declared)."""
    s, prom = stack.s, stack.prom
    expressions = promql.all_promql_expressions()
    alert_names = {r["alert"] for r in promql.rules_of(promql.load_rules(), "alert")}
    assert alert_names == ALERT_RULES, (
        "the rule file's alerts changed: update ALERT_RULES (tests/support/real_stack.py)"
    )
    stale = set(NO_SERIES_WHEN_HEALTHY) - {w for w, _ in expressions}
    assert not stale, f"exceptions for expressions that no longer exist: {stale}"

    for where, expr in expressions:
        try:
            prom.query(expr)  # a parse error raises here, with Prometheus's message
        except PromQLError as e:
            pytest.fail(f"{where}: {expr}\n{e}", pytrace=False)

    def empty() -> list[str]:
        s.check_alive()
        return [f"{w}: {q}" for w, e in expressions if (q := checked_expression(w, e)) and not prom.query(q)]

    try:  # rate()/increase() need two scrapes of a series, recording rules an evaluation: poll
        prom.wait_for(lambda: not empty(), 90, "every expression returning series")
    except AssertionError:
        pytest.fail("expressions without series on the real exporters:\n" + "\n".join(empty()), pytrace=False)

    for where, (exporter, family, _reason) in NO_SERIES_WHEN_HEALTHY.items():
        families = {
            f.name: f.type for f in text_string_to_metric_families(requests.get(s.url(exporter), timeout=10).text)
        }
        assert families.get(family) in ("counter", "gauge"), f"{where}: {family} not declared by the live {exporter}"


def test_a_frozen_mirror_pages_once_naming_the_mirror_and_resolves_once(stack):
    since = len(stack.hook.bodies)
    pid = stack.s.mirror.proc.pid
    os.kill(pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        page = wait_for_page(stack, since)
        detected_s = time.monotonic() - frozen_at
        hold_and_watch(stack, paging_for_s(stack) + 3)
    finally:
        os.kill(pid, signal.SIGCONT)
        thawed_s = time.monotonic() - frozen_at
    wait_telling(
        stack, lambda: resolved(stack, since, "MirrorwatchFlowInTrouble"), 120, "page resolved", since, frozen_at
    )
    back_to_healthy(stack, "healthy again after the thaw")
    bodies, told = stack.hook.bodies[since:], story(stack.hook, since, frozen_at)
    print(f"frozen mirror: paged after {detected_s:.1f} s, thawed at +{thawed_s:.1f} s; notifications:\n{told}")

    assert len(pages(bodies)) == 1, f"one page expected:\n{told}"
    (alert,) = paged_alerts(page)
    assert alert["labels"]["alertname"] == "MirrorwatchFlowInTrouble", told
    assert (alert["labels"]["flow"], alert["labels"].get("mirror")) == (FLOW, "mirrorwatch")
    assert alert["annotations"]["cause"] == "mirror down", alert["annotations"]
    assert alert["annotations"]["runbook_url"].endswith("/docs/runbooks/MirrorwatchFlowInTrouble.md")
    page_bodies = [b for b in bodies if b["receiver"] == PAGE_RECEIVER]
    assert [b["status"] for b in page_bodies] == ["firing", "resolved"], told


def test_a_frozen_target_broker_pages_once_for_the_cluster_and_no_flow_page(stack, target):
    stack.prom.wait_for(lambda: healthy(stack.prom), 180, "healthy before the freeze")  # whatever the last test left
    since = len(stack.hook.bodies)
    with frozen(target):
        frozen_at = time.monotonic()
        page = wait_for_page(stack, since)
        detected_s = time.monotonic() - frozen_at
        hold_and_watch(stack, paging_for_s(stack) + 3)
    thawed_s = time.monotonic() - frozen_at
    wait_telling(
        stack, lambda: resolved(stack, since, "MirrorwatchClusterUnreachable"), 120, "page resolved", since, frozen_at
    )
    back_to_healthy(stack, "the pair and the stack recovered after the thaw")  # other modules share the pair
    bodies, told = stack.hook.bodies[since:], story(stack.hook, since, frozen_at)
    print(f"frozen target broker: paged after {detected_s:.1f} s, thawed at +{thawed_s:.1f} s; notifications:\n{told}")

    assert len(pages(bodies)) == 1, f"one page expected:\n{told}"
    (alert,) = paged_alerts(page)
    assert (alert["labels"]["alertname"], alert["labels"]["cluster"]) == ("MirrorwatchClusterUnreachable", "west")
    page_names = {a["labels"]["alertname"] for b in bodies if b["receiver"] == PAGE_RECEIVER for a in b["alerts"]}
    assert page_names == {"MirrorwatchClusterUnreachable"}, told
