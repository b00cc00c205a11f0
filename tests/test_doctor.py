"""`mirrorwatch doctor`: the preflight, on the plaintext session pair and on the SASL_SSL pair with an ACL missing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import yaml

from mirrorwatch.core.acls import all_needs
from mirrorwatch.core.config import config_from_dict

from .support.helpers import create_topic
from .support.sasl import MIRROR_PASSWORD

BIN = Path(sys.executable).parent

# Bad inputs and their exact answers (merged into docs/errors.md by the other half of issue 15).
BAD_INPUTS = [
    {
        "input": "mirrorwatch doctor: config file that does not exist",
        "message": r"mirrorwatch: cannot read config file \S+: No such file or directory",
        "exit": 3,
    },
    {
        "input": "mirrorwatch doctor --flow with a flow the config does not define",
        "message": r"mirrorwatch: flow 'nope' is not defined \(defined: east-west\)",
        "exit": 3,
    },
    # the doctor's answers are table rows: "check | status | detail | fix" (as in --json "checks")
    {
        "input": "mirrorwatch doctor: a cluster's SASL password is wrong",
        "message": r"connect and authenticate \| MISSING \| authentication failed on cluster '\S+' at 127\.0\.0\.1:\d+ as user "
        r"'mirror': .* \| set the principal's sasl\.username / sasl\.password \(and sasl\.mechanism\) for this cluster",
        "exit": 2,
    },
    {
        "input": "mirrorwatch doctor: the principal lacks an ACL a component needs",
        "message": r"ACL READ topic \S+ \(mirror, monitor\) \| MISSING \| refused: .* \| kafka-acls\.sh --bootstrap-server "
        r"127\.0\.0\.1:\d+ --command-config <admin\.properties> --add --allow-principal User:mirror --operation Read "
        r"--topic '\S+'",
        "exit": 2,
    },
]


def doctor(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / "mirrorwatch"), "doctor", "--config", str(path), *extra], capture_output=True, text=True, timeout=180
    )


def rows_of(proc) -> list[dict]:
    return json.loads(proc.stdout)["checks"]


def row_line(row: dict) -> str:
    return " | ".join((row["check"], row["status"], row["detail"], row["fix"]))


def test_bad_input_is_one_line_and_exit_3(tmp_path, write_config):
    missing = doctor(tmp_path / "nope.yaml")
    assert missing.returncode == 3 and re.fullmatch(BAD_INPUTS[0]["message"], missing.stderr.strip()), missing.stderr
    path = write_config(
        {
            "clusters": {"east": {"bootstrap.servers": "127.0.0.1:1"}, "west": {"bootstrap.servers": "127.0.0.1:2"}},
            "flows": {"east-west": {"source": "east", "target": "west"}},
        }
    )
    bad_flow = doctor(path, "--flow", "nope")
    assert bad_flow.returncode == 3 and re.fullmatch(BAD_INPUTS[1]["message"], bad_flow.stderr.strip()), bad_flow.stderr


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
    assert re.fullmatch(BAD_INPUTS[3]["message"], row_line(missing[0])), row_line(missing[0])
    table = doctor(path)
    assert table.returncode == 2 and "MISSING" in table.stdout and "kafka-acls.sh" in table.stdout

    cfg["clusters"][alias]["sasl.password"] = "wrong-" + MIRROR_PASSWORD[::-1]
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    wrong = doctor(path, "--json")
    assert wrong.returncode == 2
    failed = [r for r in rows_of(wrong) if r["status"] == "MISSING"]
    assert failed and re.fullmatch(BAD_INPUTS[2]["message"], row_line(failed[0])), wrong.stdout
    assert MIRROR_PASSWORD[::-1] not in wrong.stdout + wrong.stderr
