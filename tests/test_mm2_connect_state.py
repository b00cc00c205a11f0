"""MM2 connector and task state from a REAL Kafka Connect worker's REST API (the shared ``mm2_connect`` session
fixture: MM2's three connectors under Strimzi's names). One ``monitor run`` for the module, scraped by a real
Prometheus with the shipped rules (every ``for:`` 5 s). Flows: ``ew`` (the fixture's MM2) and ``fail`` (an extra
MirrorSourceConnector that test 3 creates and makes fail; until then Connect answers 404 for it).

Tests that change the shared connectors put them back in ``finally``.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import uuid

import pytest
import requests
import yaml

from harness.connect_mm2 import SOURCE_ALIAS, SOURCE_CONNECTOR, TARGET_ALIAS, flow_config
from harness.helpers import create_topic, produce_numbered
from harness.mirror_harness import BIN, wait_until
from harness.prometheus_server import check_metrics, free_port, prometheus_server, write_rules_copy
from harness.services import Service
from mirrorwatch.localkafka.connect import mirror_connector_configs
from mirrorwatch.localkafka.jars import LauncherError

FAIL_ID = uuid.uuid4().hex[:6]
FAIL_CONNECTOR = f"{SOURCE_ALIAS}->{TARGET_ALIAS}.cmfail-{FAIL_ID}.MirrorSourceConnector"
FAIL_TOPIC = f"cmfail-{FAIL_ID}-big"
SECRET = "pw-n0t-in-any-output"


def monitor_lag(path, *args, timeout=150, env=None) -> subprocess.CompletedProcess:
    # the command's own deadline (15 s by default, for a person) well above what it needs here (3-4 s): the tests
    # check what it says, not how fast, and under the whole suite on 2 cores it once needed more than 15 s
    out = subprocess.run(
        [str(BIN / "monitor"), "lag", "--config", str(path), "--samples", "1", "--timeout", "90", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    print(f"$ monitor lag {' '.join(args)}\n{out.stdout}{out.stderr}")  # docs/mirrormaker2.md quotes it (-s)
    return out


@pytest.fixture(scope="module")
def stack(mm2_connect, tmp_path_factory):
    env = mm2_connect
    work = tmp_path_factory.mktemp("connect-state")
    body = flow_config(env)
    fail = json.loads(json.dumps(body["flows"]["ew"]))
    fail["topics"] = [f"cmfail-{FAIL_ID}-.*"]
    fail["mirror"]["connector"] = FAIL_CONNECTOR
    body["flows"]["fail"] = fail
    ports = {"metrics": free_port(), "http": free_port()}
    body["monitor"].update({"metrics_port": ports["metrics"], "http_port": ports["http"], "window": 5})
    path = work / "mirrorwatch.yaml"
    path.write_text(yaml.safe_dump(body))
    rules = write_rules_copy(work / "rules.yml", "5s")
    monitor = Service("monitor", [str(BIN / "monitor"), "run", "--config", str(path)], work)
    try:
        with prometheus_server(
            {"mirrorwatch-monitor": [f"127.0.0.1:{ports['metrics']}"]}, [rules], workdir=work / "prometheus"
        ) as prom:
            api = f"http://127.0.0.1:{ports['http']}"
            yield env, path, api, f"http://127.0.0.1:{ports['metrics']}/metrics", prom, monitor
    finally:
        monitor.stop()


def flow(api: str, name: str) -> dict:
    try:  # {} until the monitor's API answers and has sampled the flow
        return requests.get(f"{api}/v1/flows/{name}", timeout=5).json().get("flow") or {}
    except requests.ConnectionError:
        return {}


def states(prom, family: str, flow_name: str = "ew") -> dict:
    return {
        (r["metric"]["role"], r["metric"].get("task")): r["metric"]["state"]
        for r in prom.query(f'{family}{{flow="{flow_name}"}} == 1')
    }


def test_three_connectors_running_on_monitor_lag_api_and_metrics(stack):
    env, path, api, metrics, prom, monitor = stack
    running = {"source": "RUNNING", "checkpoint": "RUNNING", "heartbeat": "RUNNING"}

    def api_running():
        assert monitor.alive(), monitor.log_tail()
        connect = flow(api, "ew").get("connect") or {}
        return connect.get("up") and {c["role"]: c["state"] for c in connect["connectors"]} == running

    wait_until(api_running, 60, 0.5, "the API showing three RUNNING connectors")
    body = flow(api, "ew")
    assert body["connect"]["problems"] == [] and body["reasons"] == []
    source = next(c for c in body["connect"]["connectors"] if c["role"] == "source")
    assert source["name"] == SOURCE_CONNECTOR and [t["state"] for t in source["tasks"]] == ["RUNNING"]
    assert source["worker_id"] and source["tasks"][0]["worker_id"]

    out = monitor_lag(path, "--flow", "ew")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "connectors: source RUNNING (1/1 tasks RUNNING), checkpoint RUNNING" in out.stdout
    assert "heartbeat RUNNING (1/1 tasks RUNNING)" in out.stdout
    as_json = json.loads(monitor_lag(path, "--flow", "ew", "--json").stdout)
    (ew,) = as_json["flows"]
    assert ew["connect"]["up"] and {c["role"]: c["state"] for c in ew["connect"]["connectors"]} == running

    prom.wait_for(
        lambda: (
            states(prom, "mirrorwatch_mm2_connector_state")
            == {
                ("source", None): "RUNNING",
                ("checkpoint", None): "RUNNING",
                ("heartbeat", None): "RUNNING",
            }
        ),
        30,
        "connector states in Prometheus",
    )
    assert states(prom, "mirrorwatch_mm2_task_state")[("source", "0")] == "RUNNING"
    assert [float(r["value"][1]) for r in prom.query('mirrorwatch_mm2_connect_up{flow="ew"}')] == [1.0]
    # the connector that test 3 creates is not there yet: Connect answers 404, the API says so in one line, and
    # the REST API is up (it answered: one connector is missing, not the API down)
    assert [float(r["value"][1]) for r in prom.query('mirrorwatch_mm2_connect_up{flow="fail"}')] == [1.0]
    assert "no connector named" in " ".join(flow(api, "fail")["reasons"])
    assert check_metrics(metrics) == ""


def test_paused_source_connector_leaves_ok_with_its_state_among_the_reasons_and_alerts(stack):
    env, path, api, metrics, prom, monitor = stack
    stop = threading.Event()

    def traffic():
        while not stop.wait(0.2):
            produce_numbered(env.source.bootstrap, env.lag_topic, 3, partitions=3)

    thread = threading.Thread(target=traffic, daemon=True)
    thread.start()
    try:

        def committed_everywhere():  # a partition MM2 never committed has nothing to judge: it stays OK
            body = flow(api, "ew")
            rows = body.get("partitions") or []
            return body.get("status") == "OK" and rows and all(r["committed"] is not None for r in rows)

        wait_until(committed_everywhere, 120, 0.5, "MM2 committed every partition of flow ew before the pause")
        env.worker.pause(SOURCE_CONNECTOR)
        paused = f"source connector {SOURCE_CONNECTOR} PAUSED"

        def left_ok():
            body = flow(api, "ew")
            # WARN first (lag not shrinking), then ERR once the silent partitions pass the STOP rule's span
            return (
                body.get("status") == "ERR"
                and any(p["status"] == "STOP" for p in body["partitions"])
                and any(r.startswith(paused) for r in body["reasons"])
            )

        try:
            wait_until(left_ok, 90, 0.5, "the evaluator leaving OK with the paused connector among its reasons")
        except AssertionError as exc:
            body = flow(api, "ew")
            raise AssertionError(
                f"{exc}: {body.get('status')} {body.get('reasons')} {body.get('partitions')}"
            ) from None
        alert = prom.wait_for(lambda: prom.firing("MirrorwatchMm2ConnectorPaused"), 60, "the paused alert firing")
        assert {(a["labels"]["connector"], a["labels"]["role"], a["labels"]["mirror"]) for a in alert} == {
            (SOURCE_CONNECTOR, "source", "mm2")
        }
        out = monitor_lag(path, "--flow", "ew")
        assert "connectors: source PAUSED" in out.stdout and paused in out.stdout, out.stdout
    finally:
        env.worker.resume(SOURCE_CONNECTOR)
        stop.set()
        thread.join(10)
    # the connector's state is polled on its own thread and timer: the lag may be judged OK again a poll before
    # the REST API's RUNNING reaches the reasons
    wait_until(
        lambda: (lambda body: body.get("status") == "OK" and body["reasons"] == [])(flow(api, "ew")),
        120,
        0.5,
        "flow ew OK, with no reason left, after the resume",
    )
    prom.wait_for(lambda: not prom.firing("MirrorwatchMm2ConnectorPaused"), 60, "the paused alert resolved")


def test_failed_task_shows_its_trace_on_monitor_lag_the_page_and_alerts(stack, tmp_path, monkeypatch):
    from confluent_kafka import Producer
    from streamlit.testing.v1 import AppTest

    from mirrorwatch.dashboards.settings import CONFIG_ENV

    from .support.status_page import PAGE, texts

    env, path, api, metrics, prom, monitor = stack
    create_topic(env.source.bootstrap, FAIL_TOPIC, 1)
    # the target copy refuses records over 1 KiB: MM2's producer gets RecordTooLargeException and the task fails
    create_topic(env.target.bootstrap, f"{SOURCE_ALIAS}.{FAIL_TOPIC}", 1, {"max.message.bytes": "1024"})
    config = mirror_connector_configs(
        SOURCE_ALIAS,
        TARGET_ALIAS,
        env.source.bootstrap,
        env.target.bootstrap,
        f"cmfail-{FAIL_ID}-.*",
        **{"refresh.topics.interval.seconds": "1", "sync.topic.configs.enabled": "false"},
    )["source"]
    producer = Producer({"bootstrap.servers": env.source.bootstrap})
    for i in range(3):
        producer.produce(FAIL_TOPIC, value=b"x" * 4000, key=str(i).encode())
    producer.flush(10)
    env.worker.put_connector(FAIL_CONNECTOR, config)
    try:

        def failed():
            try:  # a connector just submitted has no status for a moment (404)
                tasks = env.worker.status(FAIL_CONNECTOR).get("tasks") or []
            except LauncherError:
                return None
            return [t for t in tasks if t["state"] == "FAILED"]

        (task,) = wait_until(failed, 120, 0.5, "the extra connector's task FAILED on the real worker")
        first = task["trace"].strip().splitlines()[0].strip()
        assert "RecordTooLargeException" in task["trace"], task["trace"]
        line = f"source connector {FAIL_CONNECTOR} task 0 FAILED on {task['worker_id']}: {first} (caused by "

        wait_until(
            lambda: any(r.startswith(line) for r in flow(api, "fail").get("reasons", [])),
            60,
            0.5,
            "the API showing the failed task",
        )
        out = monitor_lag(path, "--flow", "fail")
        assert out.returncode == 0 and f"  {line}org.apache.kafka.common.errors.RecordTooLargeException" in out.stdout
        assert "connectors: source RUNNING (0/1 tasks RUNNING)" in out.stdout

        alert = prom.wait_for(lambda: prom.firing("MirrorwatchMm2ConnectorFailed"), 60, "the failed alert firing")
        assert {(a["labels"]["flow"], a["labels"]["connector"], a["labels"].get("task")) for a in alert} == {
            ("fail", FAIL_CONNECTOR, "0")
        }

        page_config = {**yaml.safe_load(path.read_text())}
        page_config["dashboard"] = {"monitor_url": api, "canary_url": "", "refresh_s": 60}
        page_path = tmp_path / "page.yaml"
        page_path.write_text(yaml.safe_dump(page_config))
        monkeypatch.setenv(CONFIG_ENV, str(page_path))
        at = AppTest.from_file(str(PAGE), default_timeout=60).run()
        assert not at.exception, [e.value for e in at.exception]
        text = texts(at)
        assert line in text and "Status: DOWN" in text, text[:3000]
    finally:
        env.worker.delete(FAIL_CONNECTOR)


def test_refused_rest_url_is_one_line_with_no_secret_and_the_figures_stay(mm2_connect, tmp_path):
    body = flow_config(mm2_connect)
    closed = f"http://127.0.0.1:{free_port()}"
    body["flows"]["ew"]["mirror"]["connect"] = {
        "url": closed,
        "username": "mirrorwatch",
        "password": "${MW_CONNECT_PASSWORD}",
        "timeout_s": 2,
    }
    path = tmp_path / "refused.yaml"
    path.write_text(yaml.safe_dump(body))
    out = monitor_lag(path, "--flow", "ew", env={**os.environ, "MW_CONNECT_PASSWORD": SECRET})
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"source connector {SOURCE_CONNECTOR}: state unknown (cannot connect to {closed})" in out.stdout
    assert "connectors: source UNKNOWN, checkpoint UNKNOWN, heartbeat UNKNOWN" in out.stdout
    assert f"cm-{mm2_connect.run}-lag" in out.stdout and "TOTAL" in out.stdout  # the figures are all there
    assert "Traceback" not in out.stdout + out.stderr and SECRET not in out.stdout + out.stderr
    as_json = monitor_lag(path, "--flow", "ew", "--json", env={**os.environ, "MW_CONNECT_PASSWORD": SECRET})
    (ew,) = json.loads(as_json.stdout)["flows"]
    assert ew["connect"]["up"] is False and ew["totals"]["committed_lag"] is not None
    assert SECRET not in as_json.stdout + as_json.stderr
