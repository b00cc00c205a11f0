"""The Prometheus rule file: promtool check/test, its equivalence with the Grafana-managed alert rules,
and that docs/alerts.md and docs/metrics.md agree with it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.prometheus_server import write_rules_copy
from mirrorwatch.grafana_build import build, promql

ROOT = Path(__file__).resolve().parent.parent
TESTS = sorted((promql.RULES.parent / "tests").glob("*.yml"))
PROMTOOL = "promtool"


def promtool(*args: str, cwd: Path = ROOT) -> str:
    proc = subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"promtool {' '.join(args)} failed ({proc.returncode}):\n{out}", pytrace=False)
    return out


def test_promtool_check_rules():
    assert "SUCCESS" in promtool("check", "rules", str(promql.RULES))


def test_promtool_unit_tests():
    promtool("test", "rules", *map(str, TESTS))


def test_enough_alert_cases_and_the_saw_tooth_case():
    cases = [
        c for t in TESTS for test in yaml.safe_load(t.read_text())["tests"] for c in test.get("alert_rule_test", [])
    ]
    assert len(cases) >= 12
    assert any(c["exp_alerts"] for c in cases) and any(not c["exp_alerts"] for c in cases)
    tested = {c["alertname"] for c in cases}
    assert tested == {r["alert"] for r in promql.rules_of(promql.load_rules(), "alert")}
    # THE saw-tooth: committed lag series, no true-lag page.
    saw = yaml.safe_load((promql.RULES.parent / "tests" / "sawtooth.yml").read_text())["tests"][0]
    assert any('kind="committed"' in s["series"] for s in saw["input_series"])
    assert [c["exp_alerts"] for c in saw["alert_rule_test"] if c["alertname"] == "MirrorwatchTrueLagHigh"] == [[], []]


def grafana_rules() -> dict[str, dict]:
    doc = yaml.safe_load(promql.GRAFANA_ALERTS.read_text())
    return {r["title"]: r for g in doc["groups"] for r in g["rules"]}


def test_grafana_alerts_equivalent_to_prometheus_alerts():
    doc = promql.load_rules()
    prom = {r["alert"]: r for r in promql.rules_of(doc, "alert")}
    graf = grafana_rules()
    assert sorted(graf) == sorted(prom)
    for name, p in prom.items():
        g = graf[name]
        data = {d["refId"]: d for d in g["data"]}
        query = data["A"]["model"]["expr"]
        condition = data[g["condition"]]["model"]["expression"]
        ops = re.findall(r"\$B (>=|<=|==|!=|>|<) (-?[\d.]+)", condition)
        rebuilt = query + " " + " ".join(f"{op} {num}" for op, num in ops)
        p_query, p_ops = promql.split_condition(p["expr"])
        expected = build.grafana_query(name, p_query, doc) + " " + " ".join(f"{op} {n:g}" for op, n in p_ops)
        assert rebuilt == expected, name
        assert data["B"]["model"]["expression"] == "A" and data["B"]["model"]["reducer"] == "last"
        assert g["for"] == p.get("for", "0m") and g["labels"] == p["labels"], name
        assert g["noDataState"] == "OK", name  # absent series never alerts in Prometheus either
        assert set(g["annotations"]) == set(p["annotations"]), name
        for key, text in p["annotations"].items():
            assert g["annotations"][key] == text.replace("$value", "$values.B.Value"), (name, key)


def test_grafana_queries_leave_out_what_alertmanager_inhibits():
    """No inhibition in Grafana: each alert that an inhibition rule of grafana/alertmanager/alertmanager.yml can
    silence has the silencing signal in its Grafana query instead (docs/alerts.md)."""
    am = yaml.safe_load((ROOT / "grafana" / "alertmanager" / "alertmanager.yml").read_text())
    alerts = {r["alert"]: r for r in promql.rules_of(promql.load_rules(), "alert")}
    silenced = set()
    for rule in am["inhibit_rules"]:
        targets = [re.fullmatch(r'(\w+)(=~|!~|=)"(.*)"', m).groups() for m in rule["target_matchers"]]
        for name, a in alerts.items():
            if "flow" in rule.get("equal", []) and "flow" not in a["expr"]:
                continue  # no flow label: never equal to a flow alert's
            labels = {"alertname": name, **a["labels"], "job": "mirrorwatch-mirror" if "job" in a["expr"] else ""}
            ok = all(
                (op == "=" and labels.get(k) == v)
                or (op == "=~" and re.fullmatch(v, labels.get(k, "")))
                or (op == "!~" and not re.fullmatch(v, labels.get(k, "")))
                for k, op, v in targets
            )
            if ok and a["labels"]["severity"] != "none":
                silenced.add(name)
    assert silenced == set(build.GRAFANA_UNLESS)
    graf = grafana_rules()
    for name in silenced:
        assert " unless on (" in graf[name]["data"][0]["model"]["expr"], name


def test_checked_in_grafana_alerts_are_generated():
    assert promql.GRAFANA_ALERTS.read_text() == build.outputs()[promql.GRAFANA_ALERTS], "run scripts/build-grafana"


def test_docs_alert_table_matches_rule_file():
    """docs/alerts.md's table (alert | expression | for | severity) is the documented default; keep it true."""
    text = (ROOT / "docs" / "alerts.md").read_text()
    rows = {m[0]: m[1:] for m in re.findall(r"^\| `(Mirrorwatch\w+)` \| `(.+?)` \| (\S+) \| (\w+) \|", text, re.M)}
    prom = {
        r["alert"]: (r["expr"], r.get("for", "0m"), r["labels"]["severity"])
        for r in promql.rules_of(promql.load_rules(), "alert")
    }
    assert rows == {k: (e.replace("|", "\\|"), f, s) for k, (e, f, s) in prom.items()}


def contract_metrics() -> set[str]:
    text = (ROOT / "docs" / "metrics.md").read_text()
    return set(re.findall(r"^\| `(mirrorwatch_\w+)` \|", text, re.M))


def test_every_metric_used_is_in_the_contract():
    contract = contract_metrics()
    assert contract, "docs/metrics.md has no metric table"
    used = set()
    for _, expr in promql.all_promql_expressions():
        used |= set(re.findall(r"(?<![\w:])(mirrorwatch_\w+)", expr))
    unknown = {m for m in used if m not in contract and re.sub(r"_(bucket|count|sum)$", "", m) not in contract}
    assert not unknown, f"metrics not in docs/metrics.md: {sorted(unknown)}"


def test_rules_copy_with_short_for_and_threshold(tmp_path):
    copy = write_rules_copy(tmp_path / "rules.yml", "5s", {"MirrorwatchTrueLagHigh": 10})
    alerts = {r["alert"]: r for r in promql.rules_of(promql.load_rules(copy), "alert")}
    assert {r["for"] for r in alerts.values()} == {"5s"}
    query, _ = promql.split_condition(alerts["MirrorwatchTrueLagHigh"]["expr"])
    assert alerts["MirrorwatchTrueLagHigh"]["expr"] == f"{query} > 10"
    assert query.startswith("(flow:mirrorwatch_true_lag_records:sum * on (flow, source, target) group_left (mirror)")
    promtool("check", "rules", str(copy))


@pytest.mark.parametrize(
    "expr,query,ops",
    [
        ("x > 10000", "x", [(">", 10000.0)]),
        ("max by (a) (x) >= 2 <= 5", "max by (a) (x)", [(">=", 2.0), ("<=", 5.0)]),
        ('up{job=~"a|b"} == 0', 'up{job=~"a|b"}', [("==", 0.0)]),
        ("(x * on (f) group_left (m) i or on (f) x) < 1", "(x * on (f) group_left (m) i or on (f) x)", [("<", 1.0)]),
    ],
)
def test_split_condition(expr, query, ops):
    assert promql.split_condition(expr) == (query, ops)
    with pytest.raises(ValueError):
        promql.split_condition("rate(x[5m])")
