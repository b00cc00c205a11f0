"""SASL_SSL on real brokers: the mirror as a least-privilege principal, every ACL it needs taken away in turn,
credentials and TLS failures as one line each, and no secret in any output.

One pair of SASL_SSL clusters (tests/support/sasl.py, session-scoped) serves every test here and in test_doctor.py.
Each test uses its own source alias and topic names, so the ACLs one test grants or withholds touch nothing
another test uses.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from harness.helpers import admin, create_topic, end_offsets, produce_numbered, read_all, wait_for_topic
from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from harness.services import Service
from mirrorwatch.core.acls import exactly_once_needs, mirror_needs
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.naming import mirror_group, transactional_id

from .error_cases import CREDENTIAL_CASES, message_pattern, missing_acl_cases, transactional_id_case
from .support.sasl import ADMIN_PASSWORD, MIRROR_PASSWORD

BIN = Path(sys.executable).parent

# The bad inputs and their exact answers are rows of docs/errors.md: tests/error_cases.py holds them
# (CREDENTIAL_CASES, missing_acl_cases) and these tests run them on the SASL_SSL pair.


def flow_setup(sasl_pair, tmp_path, **mirror):
    """A fresh source alias, topic and heartbeats topic: names no other test grants anything on."""
    tag = uuid.uuid4().hex[:6]
    alias, topic = f"e{tag}", f"orders-{tag}"
    cfg = sasl_pair.config(alias, "west", topics=[topic])
    cfg["mirror"] = fast_mirror_settings(heartbeats_topic=f"hb-{tag}", **mirror)
    cfg["canary"] = {"topic": f"canary-{tag}", "metrics_port": None}
    return cfg, alias, topic


def admin_auth(cluster) -> dict:
    return cluster.client_config()


def test_mirror_as_least_privilege_principal(sasl_pair, tmp_path):
    cfg, alias, topic = flow_setup(sasl_pair, tmp_path)
    needs = [n for n in mirror_needs(config_from_dict(cfg), None) if n.required]
    sasl_pair.grant(needs)
    east, west = sasl_pair.east, sasl_pair.west
    create_topic(east.bootstrap, topic, 3, auth=admin_auth(east))
    produce_numbered(
        east.bootstrap,
        topic,
        300,
        partitions=3,
        **{k: v for k, v in admin_auth(east).items() if k != "bootstrap.servers"},
    )
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        records = read_all(west.bootstrap, f"{alias}.{topic}", timeout_s=60, expect=300, auth=admin_auth(west))
        assert mirror.running(), mirror.log_text()[-2000:]
    assert sorted(int(r.key()[1:]) for r in records) == list(range(300))
    assert MIRROR_PASSWORD not in mirror.log_text()


def _template_needs() -> list:
    cfg = {
        "clusters": {"eTAG": {"bootstrap.servers": "x:1"}, "west": {"bootstrap.servers": "x:2"}},
        "flows": {"f": {"source": "eTAG", "target": "west", "topics": ["orders-TAG"]}},
        "mirror": {"heartbeats_topic": "hb-TAG"},
        "canary": {"topic": "canary-TAG"},
    }
    return [n for n in mirror_needs(config_from_dict(cfg), None) if n.required]


REQUIRED = _template_needs()


@pytest.fixture(scope="module")
def missing_acl_outcomes(sasl_pair, tmp_path_factory) -> dict[int, tuple[dict, object, int, list[str]]]:
    """Every missing-ACL case at once: index → (config, withheld need, exit code, log lines).

    Each case has its own alias and topic names, so one case's grants never cover another's withheld ACL, and the
    mirrors run side by side: one after another they took ~60 s of the suite, nearly all of it waiting."""
    cases = []
    for index in range(len(REQUIRED)):
        cfg, alias, topic = flow_setup(sasl_pair, tmp_path_factory.mktemp(f"acl{index}"))
        needs = [n for n in mirror_needs(config_from_dict(cfg), None) if n.required]
        assert len(needs) == len(REQUIRED)
        cases.append((index, cfg, topic, needs[index], [n for i, n in enumerate(needs) if i != index]))
    sasl_pair.grant([n for *_, granted in cases for n in granted])
    east = sasl_pair.east
    # every case's topics in one request, and their records through one producer (a client per topic, each with
    # its own SASL_SSL handshake, took most of this fixture's time)
    client = admin(east.bootstrap, admin_auth(east))
    wanted = [NewTopic(topic, 2, 1) for _, _, topic, *_ in cases] + [
        NewTopic(c["canary"]["topic"], 1, 1) for _, c, *_ in cases
    ]
    for future in client.create_topics(wanted).values():
        future.result(30)
    for new in wanted:
        wait_for_topic(east.bootstrap, new.topic, new.num_partitions, auth=admin_auth(east))
    producer, failed = Producer({**admin_auth(east), "acks": "all"}), []
    for _, _, topic, *_ in cases:
        for i in range(20):
            producer.produce(
                topic, f"v{i}".encode(), f"k{i}".encode(), i % 2, on_delivery=lambda err, _m: err and failed.append(err)
            )
    assert producer.flush(60) == 0 and not failed, failed
    mirrors = [
        MirrorProcess(cfg, tmp_path_factory.mktemp(f"acl{index}-run") / "m.yaml").start(wait_ready=False)
        for index, cfg, *_ in cases
    ]
    outcomes = {}
    try:
        for (index, cfg, _, withheld, _), mirror in zip(cases, mirrors):
            code = mirror.wait(180)  # generous: seconds normally, but brokers share two cores with other suites
            outcomes[index] = (cfg, withheld, code, mirror.log_text().strip().splitlines())
    finally:
        for mirror in mirrors:
            mirror.kill()
    return outcomes


@pytest.mark.parametrize(
    "index",
    range(len(REQUIRED)),
    ids=[f"{n.role}-{n.operation}-{n.resource_type}-{n.name.replace('TAG', '')}" for n in REQUIRED],
)
def test_each_missing_mirror_acl_is_named(missing_acl_outcomes, index):
    cfg, withheld, code, lines = missing_acl_outcomes[index]
    case = missing_acl_cases(config_from_dict(cfg))[index]  # its row in docs/errors.md, for this test's names
    assert case["need"] == withheld
    assert code == case["exit"] and message_pattern(case["message"]).fullmatch(lines[-1]), "\n".join(lines[-8:])


def test_exactly_once_without_transactional_id_acl_stops_at_start(sasl_pair, tmp_path):
    """``delivery: exactly_once`` as a principal with every ACL the mode needs but WRITE on its transactional id:
    init_transactions is refused, ``mirror run`` exits 1 with the one line docs/errors.md shows, and the target
    topic gets nothing (not even an aborted record or a marker)."""
    cfg, alias, topic = flow_setup(sasl_pair, tmp_path, delivery="exactly_once")
    config = config_from_dict(cfg)
    withheld = [n for n in exactly_once_needs(config, None) if n.resource_type == "transactional id"]
    assert len(withheld) == 1
    sasl_pair.grant([n for n in mirror_needs(config, None) if n.required and n not in withheld])
    east, west = sasl_pair.east, sasl_pair.west
    create_topic(east.bootstrap, topic, 2, auth=admin_auth(east))
    produce_numbered(
        east.bootstrap,
        topic,
        20,
        partitions=2,
        **{k: v for k, v in admin_auth(east).items() if k != "bootstrap.servers"},
    )
    mirror = MirrorProcess(cfg, tmp_path / "m.yaml").start(wait_ready=False)
    try:
        code = mirror.wait(120)
    finally:
        mirror.kill()
    log = mirror.log_text()
    lines = log.strip().splitlines()
    case = transactional_id_case(source=alias, group=mirror_group(alias, "west", None, f"{alias}-west"))
    assert code == case["exit"] and message_pattern(case["message"]).fullmatch(lines[-1]), "\n".join(lines[-8:])
    expected_id = transactional_id(mirror_group(alias, "west", None, f"{alias}-west"), socket.gethostname())
    assert f"transactional id {expected_id} on cluster 'west'" in lines[-1]
    assert sum("not authorised" in line for line in lines) == 1, log[-3000:]  # said once, not logged and repeated
    assert "Traceback" not in log
    target_topic = admin(west.bootstrap, admin_auth(west)).list_topics(f"{alias}.{topic}", timeout=30).topics
    if target_topic[f"{alias}.{topic}"].error is None:  # created before the refusal: it must hold nothing at all
        assert end_offsets(west.bootstrap, f"{alias}.{topic}", admin_auth(west)) == {0: 0, 1: 0}


# ---------------------------------------------------------------- credentials and TLS: one line each
def _bad_config(sasl_pair, tmp_path, kind: str) -> Path:
    cfg = sasl_pair.config("east", "west")
    east = cfg["clusters"]["east"]
    if kind == "wrong-password":
        east["sasl.password"] = "not-the-password"
    elif kind == "unknown-user":
        east["sasl.username"] = "ghost"
    else:
        from mirrorwatch.localkafka.tls import write_ca_only

        east["ssl.ca.location"] = str(write_ca_only(tmp_path / "other-ca.pem"))
    cfg["mirror"] = fast_mirror_settings()
    cfg["canary"] = {"metrics_port": None, "connect_timeout_s": 5}
    path = tmp_path / f"{kind}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def credential_outcomes(sasl_pair, tmp_path_factory) -> list[tuple[int, str, str]]:
    """Every credentials/TLS case at once (they only wait on handshakes): (exit code, stdout, stderr) per case."""
    procs = []
    for case in CREDENTIAL_CASES:
        path = _bad_config(sasl_pair, tmp_path_factory.mktemp(case["kind"]), case["kind"])
        argv = [str(path) if arg == "m.yaml" else arg for arg in case["command"].split()]
        procs.append(
            subprocess.Popen([str(BIN / argv[0]), *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    outcomes = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=180)
            outcomes.append((proc.returncode, stdout, stderr))
    finally:
        for proc in procs:
            proc.kill()
    return outcomes


@pytest.mark.parametrize(
    "index", range(len(CREDENTIAL_CASES)), ids=[f"{c['tool']}-{c['kind']}" for c in CREDENTIAL_CASES]
)
def test_credentials_and_tls_failures_are_one_line(credential_outcomes, index):
    case = CREDENTIAL_CASES[index]
    returncode, stdout, stderr = credential_outcomes[index]
    output = (stdout + stderr).strip()
    if case["tool"] in ("monitor", "mirror"):  # the reason is the last line: `mirror run` logs (it is a service), and
        output = output.splitlines()[-1]  # `monitor lag` may draw its table first
    expected = message_pattern(case["message"]).fullmatch(output)
    if not expected and "certificate verify failed" in case["message"]:
        # librdkafka may have reported only its short wording of the handshake failure by the time the tool
        # answers (core.access keeps the longer one when both came): the same line without the hint
        short = case["message"].replace("SSL handshake failed: ", "").split(": broker certificate")[0]
        expected = message_pattern(
            short + "; check ssl.ca.location" + case["message"].split("; check ssl.ca.location")[1]
        ).fullmatch(output)
    assert returncode == case["exit"] and expected, f"exit {returncode}:\n{output}"
    assert MIRROR_PASSWORD not in stdout + stderr and "not-the-password" not in stdout + stderr


# ---------------------------------------------------------------- every tool on the SASL pair, no secret anywhere
def _run(*argv, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=timeout)


def _free_port() -> int:
    from mirrorwatch.localkafka.launcher import free_port

    return free_port()


def test_tools_on_sasl_pair_and_no_secret_anywhere(sasl_pair, tmp_path):
    from mirrorwatch.core.acls import all_needs

    cfg, alias, topic = flow_setup(sasl_pair, tmp_path)
    cfg["canary"].update({"crit_latency_s": 20, "warn_latency_s": 10})
    monitor_http, monitor_metrics = _free_port(), _free_port()
    cfg["monitor"] = {
        "interval_s": 1,
        "http_port": monitor_http,
        "metrics_port": monitor_metrics,
        "history_dir": str(tmp_path / "history"),
    }
    config = config_from_dict(cfg)
    sasl_pair.grant([n for n in all_needs(config, None) if n.required])
    east, west = sasl_pair.east, sasl_pair.west
    create_topic(east.bootstrap, topic, 2, auth=admin_auth(east))
    produce_numbered(
        east.bootstrap,
        topic,
        50,
        partitions=2,
        **{k: v for k, v in admin_auth(east).items() if k != "bootstrap.servers"},
    )
    path = tmp_path / "mw.yaml"
    outputs: dict[str, str] = {}
    with MirrorProcess(cfg, tmp_path / "mirror.yaml") as mirror:
        read_all(west.bootstrap, f"{alias}.{topic}", timeout_s=60, expect=50, auth=admin_auth(west))
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        check = _run("canary", "check", "--config", str(path), "--json")
        outputs["canary check --json"] = check.stdout + check.stderr
        body = json.loads(check.stdout)
        assert check.returncode in (0, 1) and body["status"] in ("OK", "WARNING"), outputs["canary check --json"]

        lag = _run("monitor", "lag", "--config", str(path), "--json")
        outputs["monitor lag --json"] = lag.stdout + lag.stderr
        assert lag.returncode == 0, outputs["monitor lag --json"]
        flows = json.loads(lag.stdout)["flows"]
        assert flows and flows[0]["status"] not in ("UNKNOWN",), lag.stdout[:2000]

        failover = _run("mirror", "failover", "check", "--config", str(path), "--json", "--timeout", "60")
        outputs["failover check --json"] = failover.stdout + failover.stderr
        assert failover.returncode in (0, 1, 2) and json.loads(failover.stdout), outputs["failover check --json"]

        monitor = Service("monitor", [str(BIN / "monitor"), "run", "--config", str(path)], tmp_path)
        try:
            deadline = time.monotonic() + 60
            answers = {}
            while time.monotonic() < deadline and len(answers) < 2:
                try:
                    answers["api"] = requests.get(f"http://127.0.0.1:{monitor_http}/v3/kafka", timeout=2).text
                    answers["metrics"] = requests.get(f"http://127.0.0.1:{monitor_metrics}/metrics", timeout=2).text
                except requests.RequestException:
                    time.sleep(1)
            assert monitor.alive() and "mirrorwatch" in answers.get("metrics", ""), monitor.log_tail()
            time.sleep(3)  # a few cycles: samples, evaluator, history
            for route in ("/v3/kafka", f"/v3/kafka/{alias}/consumer/mirrorwatch-{alias}-west/lag", "/v1/flows"):
                answers[route] = requests.get(f"http://127.0.0.1:{monitor_http}{route}", timeout=5).text
            answers["metrics"] = requests.get(f"http://127.0.0.1:{monitor_metrics}/metrics", timeout=5).text
            outputs.update(_status_page(path, tmp_path, f"{alias}-west"))  # the page reads this monitor's API
        finally:
            monitor.stop()
        outputs.update({f"monitor run {k}": v for k, v in answers.items()})
        outputs["monitor run log"] = monitor.log_text()
        port = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", mirror.log_text()).group(1)
        outputs["mirror metrics"] = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    outputs["mirror log"] = mirror.log_text()
    doctor = _run("mirrorwatch", "doctor", "--config", str(path), "--json")
    outputs["doctor --json"] = doctor.stdout + doctor.stderr
    assert doctor.returncode in (0, 1), outputs["doctor --json"]
    secrets = {
        "the mirror's password": MIRROR_PASSWORD,
        "the admin's password": ADMIN_PASSWORD,
        "a PEM private key": "PRIVATE KEY",
        **_key_lines(sasl_pair),
    }
    for name, text in outputs.items():
        assert text, f"{name}: no output captured"
        for what, secret in secrets.items():
            assert secret not in text, f"{what} appears in {name}"


def _key_lines(sasl_pair) -> dict[str, str]:
    """Each base64 line of the brokers' private keys: key material, whatever frames it."""
    lines = {}
    for cluster in (sasl_pair.east, sasl_pair.west):
        pem = cluster.tls.keystore.read_text()
        body = pem[pem.index("-----BEGIN PRIVATE KEY-----") : pem.index("-----END PRIVATE KEY-----")].splitlines()[1:]
        lines.update(
            {f"line {i} of {cluster.name}'s broker key": line for i, line in enumerate(body) if len(line) >= 40}
        )
    assert lines
    return lines


def _status_page(config_path: Path, logs: Path, flow: str) -> dict[str, str]:
    """The status page served for this config, loaded once in headless Chromium (as tests/test_dashboard_live.py
    does): its text, its HTML once the flow is drawn, and the page server's log."""
    from playwright.sync_api import sync_playwright

    from harness.chromium import CHROMIUM, CHROMIUM_FLAGS

    port = _free_port()
    server = Service(
        "dashboard",
        [sys.executable, "-m", "mirrorwatch.dashboards.cli", "--config", str(config_path), "--port", str(port)],
        logs,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert server.alive(), server.log_tail()
            try:
                if requests.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"http://127.0.0.1:{port}/", timeout=120_000)
                # drawn: the flow's card with its status, and the sidebar naming the sources it reads
                page.wait_for_function(
                    "([flow]) => document.body.innerText.includes(flow) && "
                    "document.body.innerText.includes('Status:') && "
                    "document.body.innerText.includes('Monitor API')",
                    arg=[flow],
                    timeout=120_000,
                )
                text, html = page.evaluate("document.body.innerText"), page.content()
            finally:
                browser.close()
    finally:
        server.stop()
    return {"status page text": text, "status page HTML": html, "status page log": server.log_text()}


def test_monitor_names_a_group_it_may_not_describe_instead_of_calling_it_absent(sasl_pair, tmp_path):
    """Fail closed: the monitor's principal lacks DESCRIBE on the mirror group and on a watched group. Each view is
    UNKNOWN, naming the group it could not describe and the broker's refusal; never OK (the mirror's view read as
    "no commits yet") nor NOTFOUND (the watched group read as absent)."""
    from mirrorwatch.core.acls import monitor_needs
    from mirrorwatch.monitor.sampler import Sampler

    cfg, alias, topic = flow_setup(sasl_pair, tmp_path)
    watched = f"app-{topic}"
    cfg["monitor"] = {"history": False, "groups": [{"cluster": alias, "group": watched}]}
    config = config_from_dict(cfg)
    sasl_pair.grant([n for n in monitor_needs(config, None) if n.required and n.resource_type != "group"])
    create_topic(sasl_pair.east.bootstrap, topic, 2, auth=admin_auth(sasl_pair.east))
    sampler = Sampler(config, timeout_s=10)
    try:
        flow, plain = sampler.sample().views
    finally:
        sampler.close()
    mirror = mirror_group(alias, "west", None, f"{alias}-west")
    for view, group in ((flow, mirror), (plain, watched)):
        assert view.status_name == "UNKNOWN", (group, view.status_name, view.error)
        assert f"cannot describe group '{group}'" in view.error and "AUTHORIZATION" in view.error.upper(), view.error
        assert view.reasons[0] == view.error


def test_a_monitor_that_may_not_read_the_target_topics_stops_looking_for_markers(sasl_pair, tmp_path, caplog):
    """READ on the target topics is optional for the monitor (docs/security.md): without it, the look for a marker
    at a target partition's end is refused; the monitor says so once and stops looking (no cycle waits out a read
    timeout), and the flow is sampled as before."""
    from mirrorwatch.core.acls import monitor_needs
    from mirrorwatch.monitor.sampler import Sampler

    cfg, alias, topic = flow_setup(sasl_pair, tmp_path)
    cfg["monitor"] = {"history": False}
    config = config_from_dict(cfg)
    needs = monitor_needs(config, None)
    assert [n.name for n in needs if not n.required] == [f"{alias}."]  # the prefixed target topics
    sasl_pair.grant([n for n in needs if n.required])
    create_topic(sasl_pair.east.bootstrap, topic, 1, auth=admin_auth(sasl_pair.east))
    create_topic(sasl_pair.west.bootstrap, f"{alias}.{topic}", 1, auth=admin_auth(sasl_pair.west))
    plain = Producer(admin_auth(sasl_pair.west))
    plain.produce(f"{alias}.{topic}", value=b"copy", partition=0)
    assert plain.flush(10) == 0
    sampler = Sampler(config, timeout_s=10)
    caplog.set_level("WARNING", logger="mirrorwatch.monitor.sampler")
    try:
        # a fresh cluster's group coordinator may not answer the first cycles
        wait_until(lambda: sampler.sample().views[0].error is None, 60, 0.5, "the flow sampled")
        (reader,) = sampler.marker_readers.values()
        assert "authorization" in reader.refused.lower(), reader.refused
        reader.ends_on_a_marker = lambda ends: pytest.fail(f"looked again at {ends}")
        plain.produce(f"{alias}.{topic}", value=b"copy", partition=0)  # the end moves: a partition worth a look
        assert plain.flush(10) == 0
        assert sampler.sample().views[0].error is None
    finally:
        sampler.close()
    assert caplog.text.count("cannot read the target topics") == 1
    assert "written transactionally" not in caplog.text
