"""SASL_SSL on real brokers: the mirror as a least-privilege principal, every ACL it needs taken away in turn,
credentials and TLS failures as one line each, and no secret in any output.

One pair of SASL_SSL clusters (tests/sasl.py, session-scoped) serves every test here and in test_doctor.py.
Each test uses its own source alias and topic names, so the ACLs one test grants or withholds touch nothing
another test uses.
"""

from __future__ import annotations

import re
import uuid

import pytest

from mirrorwatch.core.acls import mirror_needs
from mirrorwatch.core.config import config_from_dict

from .helpers import create_topic, produce_numbered, read_all
from .mirror_harness import MirrorProcess, fast_mirror_settings, wait_until
from .sasl import MIRROR_PASSWORD

# Bad inputs and their exact answers (merged into docs/errors.md by the other half of issue 15).
BAD_INPUTS = [
    {"input": "mirror run: wrong SASL password",
     "message": r"mirror: authentication failed on cluster '\S+' at 127\.0\.0\.1:\d+ as user 'mirror': SASL authentication error: "
                r"Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512; "
                r"check sasl\.username, sasl\.password and sasl\.mechanism \(see docs/security\.md\)",
     "exit": 1},
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
    produce_numbered(east.bootstrap, topic, 300, partitions=3, **{k: v for k, v in admin_auth(east).items() if k != "bootstrap.servers"})
    with MirrorProcess(cfg, tmp_path / "m.yaml") as mirror:
        records = read_all(west.bootstrap, f"{alias}.{topic}", timeout_s=60, expect=300, auth=admin_auth(west))
        assert mirror.running(), mirror.log_text()[-2000:]
    assert sorted(int(r.key()[1:]) for r in records) == list(range(300))
    assert MIRROR_PASSWORD not in mirror.log_text()


def _template_needs() -> list:
    cfg = {"clusters": {"eTAG": {"bootstrap.servers": "x:1"}, "west": {"bootstrap.servers": "x:2"}},
           "flows": {"f": {"source": "eTAG", "target": "west", "topics": ["orders-TAG"]}},
           "mirror": {"heartbeats_topic": "hb-TAG"}, "canary": {"topic": "canary-TAG"}}
    return [n for n in mirror_needs(config_from_dict(cfg), None) if n.required]


REQUIRED = _template_needs()


@pytest.mark.parametrize("index", range(len(REQUIRED)),
                         ids=[f"{n.role}-{n.operation}-{n.resource_type}-{n.name.replace('TAG', '')}" for n in REQUIRED])
def test_each_missing_mirror_acl_is_named(sasl_pair, tmp_path, index):
    cfg, alias, topic = flow_setup(sasl_pair, tmp_path)
    needs = [n for n in mirror_needs(config_from_dict(cfg), None) if n.required]
    assert len(needs) == len(REQUIRED)
    withheld = needs[index]
    sasl_pair.grant([n for i, n in enumerate(needs) if i != index])
    east = sasl_pair.east
    create_topic(east.bootstrap, topic, 2, auth=admin_auth(east))
    create_topic(east.bootstrap, cfg["canary"]["topic"], 1, auth=admin_auth(east))
    produce_numbered(east.bootstrap, topic, 20, partitions=2,
                     **{k: v for k, v in admin_auth(east).items() if k != "bootstrap.servers"})
    mirror = MirrorProcess(cfg, tmp_path / "m.yaml").start()
    try:
        code = mirror.wait(60)
    finally:
        mirror.kill()
    lines = mirror.log_text().strip().splitlines()
    alias_of = alias if withheld.role == "source" else "west"
    expected = (rf"mirror: not authorised to {withheld.operation} {withheld.resource_type} {re.escape(withheld.name)}\S* "
                rf"on cluster '{alias_of}' \(principal User:mirror\): grant it \(see docs/security\.md\)")
    assert code == 1 and re.fullmatch(expected, lines[-1]), "\n".join(lines[-8:])
