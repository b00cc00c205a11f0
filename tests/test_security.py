"""SASL_SSL on real brokers: the mirror as a least-privilege principal, every ACL it needs taken away in turn,
credentials and TLS failures as one line each, and no secret in any output.

One pair of SASL_SSL clusters (tests/support/sasl.py, session-scoped) serves every test here and in test_doctor.py.
Each test uses its own source alias and topic names, so the ACLs one test grants or withholds touch nothing
another test uses.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
import yaml

from mirrorwatch.core.acls import mirror_needs
from mirrorwatch.core.config import config_from_dict

from .support.helpers import create_topic, produce_numbered, read_all
from .support.mirror_harness import MirrorProcess, fast_mirror_settings
from .support.sasl import ADMIN_PASSWORD, MIRROR_PASSWORD
from .support.services import Service

BIN = Path(sys.executable).parent

# Bad inputs and their exact answers (merged into docs/errors.md by the other half of issue 15).
# {alias}/{port} stand for the cluster's name and port; "message" is a regex of the whole stderr/stdout line.
_AUTH = (
    r"authentication failed on cluster 'east' at 127\.0\.0\.1:\d+ as user '(mirror|ghost)': SASL authentication "
    r"error: Authentication failed during authentication due to invalid credentials with SASL mechanism "
    r"SCRAM-SHA-512; check sasl\.username, sasl\.password and sasl\.mechanism \(see docs/security\.md\)"
)
_TLS = (
    r"TLS handshake with cluster 'east' at 127\.0\.0\.1:\d+ failed: SSL handshake failed: error:0A000086:SSL "
    r"routines::certificate verify failed: broker certificate could not be verified, verify that ssl\.ca\.location "
    r"is correctly configured or root CA certificates are installed \(install ca-certificates package\); check "
    r"ssl\.ca\.location \(the CA that signed the broker's certificate\) \(see docs/security\.md\)"
)
_DENIED = (
    r"mirror: not authorised to (READ|WRITE|CREATE|DESCRIBE_CONFIGS) (topic|group) \S+ on cluster '\S+' "
    r"\(principal User:mirror\): grant it \(see docs/security\.md\)"
)
BAD_INPUTS = [
    {"input": "mirror run: wrong SASL password", "message": "mirror: " + _AUTH, "exit": 1},
    {"input": "mirror run: unknown SASL user", "message": "mirror: " + _AUTH, "exit": 1},
    {
        "input": "mirror run: ssl.ca.location is a CA that did not sign the broker certificate",
        "message": "mirror: " + _TLS,
        "exit": 1,
    },
    {"input": "canary check: wrong SASL password", "message": "UNKNOWN east→west " + _AUTH, "exit": 3},
    {"input": "canary check: unknown SASL user", "message": "UNKNOWN east→west " + _AUTH, "exit": 3},
    {"input": "canary check: untrusted CA", "message": "UNKNOWN east→west " + _TLS, "exit": 3},
    {"input": "monitor lag: wrong SASL password", "message": "monitor: " + _AUTH, "exit": 3},
    {"input": "mirror failover check: wrong SASL password", "message": "mirror: " + _AUTH, "exit": 3},
    {
        "input": "mirror run: the principal lacks an ACL the mirror needs (each one, see docs/security.md)",
        "message": _DENIED,
        "exit": 1,
    },
]


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


@pytest.mark.parametrize(
    "index",
    range(len(REQUIRED)),
    ids=[f"{n.role}-{n.operation}-{n.resource_type}-{n.name.replace('TAG', '')}" for n in REQUIRED],
)
def test_each_missing_mirror_acl_is_named(sasl_pair, tmp_path, index):
    cfg, alias, topic = flow_setup(sasl_pair, tmp_path)
    needs = [n for n in mirror_needs(config_from_dict(cfg), None) if n.required]
    assert len(needs) == len(REQUIRED)
    withheld = needs[index]
    sasl_pair.grant([n for i, n in enumerate(needs) if i != index])
    east = sasl_pair.east
    create_topic(east.bootstrap, topic, 2, auth=admin_auth(east))
    create_topic(east.bootstrap, cfg["canary"]["topic"], 1, auth=admin_auth(east))
    produce_numbered(
        east.bootstrap,
        topic,
        20,
        partitions=2,
        **{k: v for k, v in admin_auth(east).items() if k != "bootstrap.servers"},
    )
    mirror = MirrorProcess(cfg, tmp_path / "m.yaml").start()
    try:
        code = mirror.wait(120)  # generous: seconds normally, but brokers share two cores with other suites
    finally:
        mirror.kill()
    lines = mirror.log_text().strip().splitlines()
    alias_of = alias if withheld.role == "source" else "west"
    expected = (
        rf"mirror: not authorised to {withheld.operation} {withheld.resource_type} {re.escape(withheld.name)}\S* "
        rf"on cluster '{alias_of}' \(principal User:mirror\): grant it \(see docs/security\.md\)"
    )
    assert code == 1 and re.fullmatch(expected, lines[-1]), "\n".join(lines[-8:])


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


# (tool, kind of failure, its entry in BAD_INPUTS)
CASES = [
    ("mirror", "wrong-password", 0),
    ("mirror", "unknown-user", 1),
    ("mirror", "untrusted-ca", 2),
    ("canary", "wrong-password", 3),
    ("canary", "unknown-user", 4),
    ("canary", "untrusted-ca", 5),
    ("monitor", "wrong-password", 6),
    ("failover", "wrong-password", 7),
]
COMMANDS = {
    "mirror": ["mirror", "run"],
    "canary": ["canary", "check", "--timeout", "3"],
    "monitor": ["monitor", "lag"],
    "failover": ["mirror", "failover", "check"],
}


@pytest.mark.parametrize("tool,kind,entry", CASES, ids=[f"{t}-{k}" for t, k, _ in CASES])
def test_credentials_and_tls_failures_are_one_line(sasl_pair, tmp_path, tool, kind, entry):
    path = _bad_config(sasl_pair, tmp_path, kind)
    spec = BAD_INPUTS[entry]
    argv = [str(BIN / COMMANDS[tool][0]), *COMMANDS[tool][1:], "--config", str(path)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    output = (proc.stdout + proc.stderr).strip()
    if tool in ("monitor", "mirror"):  # the reason is the last line: `mirror run` logs (it is a service), and the
        output = output.splitlines()[-1]  # table `monitor lag` draws first is the other half of issue 15
    assert proc.returncode == spec["exit"] and re.fullmatch(spec["message"], output), (
        f"exit {proc.returncode}:\n{output}"
    )
    assert MIRROR_PASSWORD not in proc.stdout + proc.stderr and "not-the-password" not in proc.stdout + proc.stderr


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

        failover = _run("mirror", "failover", "check", "--config", str(path), "--json")
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
    for name, text in outputs.items():
        assert text, f"{name}: no output captured"
        for secret in (MIRROR_PASSWORD, ADMIN_PASSWORD):
            assert secret not in text, f"a password appears in {name}"
