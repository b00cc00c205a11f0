"""`mirrorwatch doctor`: the preflight, on the plaintext session pair and on the SASL_SSL pair with an ACL missing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from harness.helpers import create_topic
from mirrorwatch.core.acls import all_needs
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.naming import offset_syncs_topic
from mirrorwatch.doctor.probes import OK, ClusterProbe

from .error_cases import doctor_cases, message_pattern
from .support.sasl import MIRROR_PASSWORD

BIN = Path(sys.executable).parent

# The doctor's bad inputs are rows of docs/errors.md: tests/error_cases.py holds them (a config it cannot read
# or a flow it does not define in CASES, run by test_error_cases.py; the SASL_SSL ones in doctor_cases, run here).


def doctor(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "mirrorwatch"), "doctor", "--config", str(path), *extra], capture_output=True, text=True, timeout=180
    )


def rows_of(proc) -> list[dict]:
    return json.loads(proc.stdout)["checks"]


def row_line(row: dict) -> str:
    return " | ".join((row["check"], row["status"], row["detail"], row["fix"]))


def test_plaintext_pair_partition_mismatch_is_a_warning_and_skew_is_measured(
    source, target, mirror_config, write_config
):
    tag = uuid.uuid4().hex[:6]
    topic, canary = f"doc-{tag}", f"canary-{tag}"
    create_topic(source.bootstrap, topic, 3)
    create_topic(target.bootstrap, f"east.{topic}", 2)  # fewer partitions than the source: a warning
    for bootstrap, name in ((source.bootstrap, canary), (target.bootstrap, f"east.{canary}")):
        create_topic(bootstrap, name, 1, config={"message.timestamp.type": "LogAppendTime"})
    mirror_config["flows"]["east-west"]["topics"] = [topic]
    mirror_config["canary"] = {"topic": canary, "metrics_port": None}
    mirror_config["mirror"] = {"heartbeats_topic": f"hb-{tag}"}
    proc = doctor(write_config(mirror_config), "--json")
    rows = rows_of(proc)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    by_check = {(r["check"], r["cluster"]): r for r in rows}
    assert by_check[("connect and authenticate", "east")]["status"] == "OK"
    assert by_check[("connect and authenticate", "west")]["status"] == "OK"
    mismatch = by_check[(f"topic {topic} → east.{topic}", "east→west")]
    assert mismatch["status"] == "WARN" and "3 partition(s) on the source, 2 on the target" in mismatch["detail"]
    skew = next(r for r in rows if r["check"] == "clock skew")
    # both brokers run on this machine: their clocks agree with ours within the measurement's own error
    assert skew["status"] == "OK", skew
    millis = int(re.search(r"= ([+-]\d+) ms", skew["detail"]).group(1))
    assert abs(millis) < 1000, skew
    # no authorizer on the plaintext pair: nothing is missing
    assert not [r for r in rows if r["status"] == "MISSING"], [r for r in rows if r["status"] == "MISSING"]
    table = doctor(write_config(mirror_config, "again.yaml"))
    assert table.returncode == 1 and "mirrorwatch doctor" in table.stdout and "WARN" in table.stdout


def test_sasl_pair_names_the_missing_acl_and_a_wrong_password(sasl_pair, tmp_path):
    tag = uuid.uuid4().hex[:6]
    alias, topic = f"d{tag}", f"orders-{tag}"
    cfg = sasl_pair.config(alias, "west", topics=[topic])
    cfg["mirror"] = {"heartbeats_topic": f"hb-{tag}", "metrics_port": None}
    cfg["canary"] = {"topic": f"canary-{tag}", "metrics_port": None}
    needs = [n for n in all_needs(config_from_dict(cfg), None) if n.required]
    withheld = [n for n in needs if n.role == "source" and n.operation == "READ" and n.name == topic]
    assert withheld
    sasl_pair.grant([n for n in needs if n not in withheld])
    create_topic(sasl_pair.east.bootstrap, topic, 2, auth=sasl_pair.east.client_config())
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = doctor(path, "--json")
    rows = rows_of(proc)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    missing = [r for r in rows if r["status"] == "MISSING"]
    assert [r["check"] for r in missing] == [f"ACL READ topic {topic} (mirror, monitor)"], missing
    assert "--allow-principal User:mirror --operation Read --topic" in missing[0]["fix"]
    ok = {r["check"] for r in rows if r["status"] == "OK"}
    assert f"ACL CREATE topic {alias}.* (prefixed) (mirror)" in ok and "connect and authenticate" in ok
    cases = doctor_cases(source=alias, topic=topic, canary=f"canary-{tag}")
    assert message_pattern(cases["read-topic"]["message"]).fullmatch(row_line(missing[0])), row_line(missing[0])
    table = doctor(path)
    assert table.returncode == 2 and "MISSING" in table.stdout and "kafka-acls.sh" in table.stdout

    cfg["clusters"][alias]["sasl.password"] = "wrong-" + MIRROR_PASSWORD[::-1]
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    wrong = doctor(path, "--json")
    assert wrong.returncode == cases["wrong-password"]["exit"]
    failed = [r for r in rows_of(wrong) if r["status"] == "MISSING"]
    assert failed and message_pattern(cases["wrong-password"]["message"]).fullmatch(row_line(failed[0])), wrong.stdout
    assert MIRROR_PASSWORD[::-1] not in wrong.stdout + wrong.stderr


def test_sasl_pair_names_missing_write_and_group_read(sasl_pair, tmp_path):
    """WRITE on topics and READ on the group come from the broker's authorised operations (KIP-430): withheld
    ones are MISSING with their grant, granted ones on existing topics are OK (not UNVERIFIED)."""
    tag = uuid.uuid4().hex[:6]
    alias, topic, canary, heartbeats = f"w{tag}", f"orders-{tag}", f"canary-{tag}", f"hb-{tag}"
    cfg = sasl_pair.config(alias, "west", topics=[topic])
    cfg["mirror"] = {"heartbeats_topic": heartbeats, "metrics_port": None}
    cfg["canary"] = {"topic": canary, "metrics_port": None}
    config = config_from_dict(cfg)
    needs = [n for n in all_needs(config, None) if n.required]
    withheld = [
        n
        for n in needs
        if n.operation == "WRITE"
        and n.name in (f"{alias}.", canary)
        or n.operation == "READ"
        and n.resource_type == "group"
    ]
    assert len(withheld) == 3, withheld
    sasl_pair.grant([n for n in needs if n not in withheld])
    east, west = sasl_pair.east.client_config(), sasl_pair.west.client_config()
    for name in (topic, canary, heartbeats):  # WRITE is answered only on topics that exist
        create_topic(sasl_pair.east.bootstrap, name, 1, auth=east)
    for name in (f"{alias}.{topic}", offset_syncs_topic(alias)):
        create_topic(sasl_pair.west.bootstrap, name, 1, auth=west)
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = doctor(path, "--json")
    rows = rows_of(proc)
    cases = doctor_cases(source=alias, topic=topic, canary=canary)
    expected = [cases["read-group"], cases["write-target"], cases["write-canary"]]
    assert proc.returncode == 2 == expected[0]["exit"], proc.stdout + proc.stderr
    missing = [row_line(r) for r in rows if r["status"] == "MISSING"]
    assert len(missing) == 3, missing
    for case in expected:
        assert any(message_pattern(case["message"]).fullmatch(line) for line in missing), (case["message"], missing)
    writes = {r["check"]: r["status"] for r in rows if r["check"].startswith("ACL WRITE")}
    assert writes == {
        f"ACL WRITE topic {heartbeats} (mirror)": "OK",
        f"ACL WRITE topic {alias}.* (prefixed) (mirror)": "MISSING",
        f"ACL WRITE topic {offset_syncs_topic(alias)} (mirror)": "OK",
        f"ACL WRITE topic {canary} (canary)": "MISSING",
    }, writes
    reads = {r["check"]: r["status"] for r in rows if r["check"].startswith(f"ACL READ topic {topic} ")}
    assert list(reads.values()) == ["OK"], reads


def test_sasl_pair_exactly_once_names_the_missing_transactional_id_acl(sasl_pair, tmp_path):
    """``delivery: exactly_once`` adds three target ACLs (core/acls.py exactly_once_needs): the transactional ids
    (asked with init_transactions on a probe id under the prefix), the positions group and the target topics
    (READ, from the authorised operations). Withheld, the transactional-id row is MISSING with its grant; granted,
    it turns OK."""
    tag = uuid.uuid4().hex[:6]
    alias, topic, canary = f"x{tag}", f"orders-{tag}", f"canary-{tag}"
    cfg = sasl_pair.config(alias, "west", topics=[topic])
    cfg["mirror"] = {"heartbeats_topic": f"hb-{tag}", "metrics_port": None, "delivery": "exactly_once"}
    cfg["canary"] = {"topic": canary, "metrics_port": None}
    config = config_from_dict(cfg)
    needs = [n for n in all_needs(config, None) if n.required]
    withheld = [n for n in needs if n.resource_type == "transactional id"]
    assert len(withheld) == 1
    sasl_pair.grant([n for n in needs if n not in withheld])
    create_topic(sasl_pair.east.bootstrap, topic, 1, auth=sasl_pair.east.client_config())
    create_topic(sasl_pair.west.bootstrap, f"{alias}.{topic}", 1, auth=sasl_pair.west.client_config())
    sasl_pair.load_coordinators("target")  # the doctor's answers, not the first use of a fresh cluster, under test
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    proc = doctor(path, "--json")
    case = doctor_cases(source=alias, topic=topic, canary=canary)["write-transactional-id"]
    assert proc.returncode == case["exit"], proc.stdout + proc.stderr
    missing = [row_line(r) for r in rows_of(proc) if r["status"] == "MISSING"]
    assert len(missing) == 1 and message_pattern(case["message"]).fullmatch(missing[0]), missing
    group = f"mirrorwatch-{alias}-west"
    statuses = {r["check"]: r["status"] for r in rows_of(proc)}
    assert statuses[f"ACL READ group {group}.eos (mirror)"] == "OK"
    assert statuses[f"ACL READ topic {alias}.* (prefixed) (mirror)"] == "OK"  # answered on the existing target topic

    # granted: the same probe answers OK (asked directly: a second full doctor run cost ~10 s on a busy machine)
    sasl_pair.grant(withheld)
    probe = ClusterProbe("west", config.clusters["west"])
    assert probe.connect()[0]
    assert probe.check(withheld[0]) == (OK, "")
