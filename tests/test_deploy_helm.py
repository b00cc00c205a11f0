"""The Helm chart (deploy/helm/mirrorwatch): `helm lint` and `helm template` with each values file under its ci/,
every rendered manifest validated against the Kubernetes schemas of every minor still supported upstream
(kubernetes-validate carries them offline), the rendered config loaded by mirrorwatch itself, and the
PrometheusRule's rules checked by promtool. No cluster: render and validate. helm comes from scripts/setup."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from mirrorwatch.core.config_loading import load_config
from mirrorwatch.grafana_build import build, promql
from mirrorwatch.localkafka.jars import cache_dir

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "mirrorwatch"
VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
# Upstream supports the three newest minors (about 14 months each); on 2026-11-25 those are 1.35 to 1.37,
# the newest that kubernetes-validate 1.37 carries. 1.25 is the oldest the chart supports (Chart.yaml; and the
# oldest schema kubernetes-validate carries). docs/deploy.md says the same.
KUBERNETES = ("1.25.0", "1.35.0", "1.36.0", "1.37.0")
PROMETHEUS_OPERATOR = {"ServiceMonitor", "PrometheusRule"}  # CRDs: no schema offline, checked by shape below
NAMESPACE = "mirrorwatch"


def helm_path() -> Path:
    version = re.search(r"^HELM_VERSION=(\S+)", (ROOT / "scripts" / "setup").read_text(), re.M)
    assert version, "scripts/setup names no HELM_VERSION"
    path = cache_dir() / "tools" / f"helm-{version[1]}" / "helm"
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/setup (it installs helm {version[1]})", pytrace=False)
    return path


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(helm_path()), *args], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        pytest.fail(f"helm {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}", pytrace=False)
    return proc


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    """Each ci values file's manifests, one `helm template` each."""
    out = {}
    for values in VALUES:
        text = helm("template", "mw", str(CHART), "--namespace", NAMESPACE, "-f", str(values)).stdout
        out[values.name] = [d for d in yaml.safe_load_all(text) if d]
    return out


def of_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def workloads(docs: list[dict]) -> list[dict]:
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_values_files_exist_and_chart_follows_the_project_version():
    assert {v.name for v in VALUES} >= {"minimal-values.yaml", "full-values.yaml", "strimzi-values.yaml"}
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert chart["appVersion"] == project and chart["version"] == project


def test_helm_lint_each_values_file():
    for values in VALUES:
        out = helm("lint", "--strict", str(CHART), "-f", str(values)).stdout
        assert "0 chart(s) failed" in out, out


def test_no_config_and_a_mistyped_value_are_refused_with_what_to_fix():
    proc = helm("template", "mw", str(CHART), check=False)
    assert proc.returncode != 0
    assert "config: set config.clusters and config.flows" in proc.stderr, proc.stderr
    minimal = str(CHART / "ci" / "minimal-values.yaml")
    proc = helm("template", "mw", str(CHART), "-f", minimal, "--set", "monitor.replica=3", check=False)
    assert proc.returncode != 0 and "'replica' not allowed" in proc.stderr, proc.stderr  # values.schema.json


def test_manifests_valid_for_every_supported_kubernetes(rendered):
    problems = []
    for name, docs in rendered.items():
        for doc in docs:
            if doc["kind"] in PROMETHEUS_OPERATOR:
                assert doc["apiVersion"] == "monitoring.coreos.com/v1" and doc["spec"], (name, doc["kind"])
                continue
            for version in KUBERNETES:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    problems.append(f"{name}: {doc['kind']}/{doc['metadata']['name']} on {version}: {e}")
    assert not problems, "\n".join(problems)
    # the validator does refuse a wrong manifest (strict: unknown fields too)
    broken = workloads(rendered["minimal-values.yaml"])[0]
    broken = {**broken, "spec": {**broken["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES[0], strict=True)


def test_rendered_config_is_a_valid_mirrorwatch_config(rendered, tmp_path):
    for name, docs in rendered.items():
        text = of_kind(docs, "ConfigMap")["mw-mirrorwatch"]["data"]["config.yml"]
        raw = yaml.safe_load(text)
        assert raw["leader"]["enabled"] is True, name  # two replicas of monitor and canary: one leads
        path = tmp_path / f"{name}.yml"
        path.write_text(yaml.safe_dump(raw))
        secrets = {v: "x" for v in re.findall(r"\$\{(\w+)\}", text)}
        config = load_config(path, environ=secrets)
        assert config.leader.enabled
        assert (config.monitor.host, config.canary.metrics_host, config.mirror.metrics_host) == ("0.0.0.0",) * 3
        assert config.monitor.history_dir == "/var/lib/mirrorwatch/history"
        services = of_kind(docs, "Service")
        monitor_port = {p["name"]: p["port"] for p in services["mw-mirrorwatch-monitor"]["spec"]["ports"]}
        assert monitor_port == {"http": config.monitor.http_port, "metrics": config.monitor.metrics_port}
        assert config.dashboard.monitor_url == f"http://mw-mirrorwatch-monitor:{config.monitor.http_port}"
        for secret in of_kind(docs, "Secret").values():
            assert not any(v in text for v in secret["stringData"].values()), "a secret in the ConfigMap"


def test_pods_are_hardened_probed_and_writable_where_needed(rendered):
    for name, docs in rendered.items():
        for w in workloads(docs):
            pod = w["spec"]["template"]["spec"]
            (container,) = pod["containers"]
            assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
            assert sc["capabilities"]["drop"] == ["ALL"]
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert {"/tmp", "/var/lib/mirrorwatch", "/etc/mirrorwatch/config.yml"} <= mounts, (name, w["kind"])
            component = w["metadata"]["labels"]["app.kubernetes.io/component"]
            command = container["args"][:2]
            health, ready = ("/_stcore/health", "/_stcore/health") if component == "page" else ("/healthz", "/readyz")
            assert command == {"page": ["monitor", "dashboard"]}.get(component, [component, "run"]), command
            assert container["livenessProbe"]["httpGet"]["path"] == health
            assert container["readinessProbe"]["httpGet"]["path"] == ready
            port_names = {p["name"] for p in container["ports"]}
            assert container["readinessProbe"]["httpGet"]["port"] in port_names


def test_each_component_runs_the_image_of_its_role(rendered):
    """docs/image.md: the page its own image; the monitor the analytics image when its config schedules the Spark job
    (full-values: monitor.analytics.every_s), else the base image, as the canary and the mirror."""
    for name, docs in rendered.items():
        values = yaml.safe_load((CHART / "ci" / name).read_text())
        scheduled = bool(values["config"].get("monitor", {}).get("analytics", {}).get("every_s"))
        for w in workloads(docs):
            component = w["metadata"]["labels"]["app.kubernetes.io/component"]
            image = w["spec"]["template"]["spec"]["containers"][0]["image"]
            role = {"page": "-page"}.get(component, "-analytics" if component == "monitor" and scheduled else "")
            assert image.rsplit(":", 1)[0].endswith(f"/mirrorwatch{role}") or image.startswith(f"mirrorwatch{role}:"), (
                name,
                component,
                image,
            )


def test_replicas_and_disruption_budgets(rendered):
    minimal = rendered["minimal-values.yaml"]
    replicas = {
        w["metadata"]["labels"]["app.kubernetes.io/component"]: w["spec"]["replicas"] for w in workloads(minimal)
    }
    assert replicas == {"monitor": 2, "canary": 2, "page": 1}  # the mirror engine is off by default
    full = rendered["full-values.yaml"]
    assert of_kind(full, "StatefulSet"), "monitor persistence makes the monitor a StatefulSet"
    mirrors = {
        w["metadata"]["name"]: w["spec"]["replicas"]
        for w in workloads(full)
        if w["metadata"]["labels"]["app.kubernetes.io/component"] == "mirror"
    }
    assert mirrors == {"mw-mirrorwatch-mirror-east-west": 3, "mw-mirrorwatch-mirror-west-east": 2}
    for docs in rendered.values():
        budgets = of_kind(docs, "PodDisruptionBudget").values()
        for w in workloads(docs):
            labels = w["spec"]["template"]["metadata"]["labels"]
            covering = [b for b in budgets if matches(b["spec"]["selector"]["matchLabels"], labels)]
            assert len(covering) == (1 if w["spec"]["replicas"] > 1 else 0), w["metadata"]["name"]


def test_service_monitor_scrapes_every_metrics_service(rendered):
    docs = rendered["full-values.yaml"]
    (monitor,) = of_kind(docs, "ServiceMonitor").values()
    selector = monitor["spec"]["selector"]["matchLabels"]
    scraped = {n for n, s in of_kind(docs, "Service").items() if matches(selector, s["metadata"]["labels"])}
    assert scraped == {"mw-mirrorwatch-monitor", "mw-mirrorwatch-canary", "mw-mirrorwatch-mirror"}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    for service in scraped:
        assert "metrics" in {p["name"] for p in of_kind(docs, "Service")[service]["spec"]["ports"]}


def test_chart_rules_are_the_promtool_tested_rules(rendered, tmp_path):
    assert build.HELM_RULES.read_text() == promql.RULES.read_text(), (
        "the chart's rule copy is stale: run scripts/build-grafana"
    )
    (rule,) = of_kind(rendered["full-values.yaml"], "PrometheusRule").values()
    assert rule["spec"]["groups"] == promql.load_rules()["groups"]
    extracted = tmp_path / "rules.yml"
    extracted.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    proc = subprocess.run(["promtool", "check", "rules", str(extracted)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "SUCCESS" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
