"""Fail closed: every failover check that permits an action refuses when it cannot read what it needs.

On real brokers: the plain pair's target broker frozen (SIGSTOP: no answer at all), and on the SASL_SSL pair a
principal without the group ACL (an authorization error). Each refusal names what could not be read; the
command-line ones are one line with exit 3 (docs/errors.md, the failover refusals).
"""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import yaml
from confluent_kafka import Producer

from mirrorwatch.core.acls import AclNeed
from mirrorwatch.core.config import ClusterConfig
from mirrorwatch.core.naming import checkpoints_topic, offset_syncs_topic
from mirrorwatch.core.records import OffsetSync

from .error_cases import FAILOVER_REFUSALS, message_pattern
from .support.helpers import create_topic
from .support.mirror_harness import BIN
from .test_outages import frozen, local_only

pytestmark = pytest.mark.kafka


def cluster(bootstrap: str) -> ClusterConfig:
    return ClusterConfig.model_validate({"bootstrap.servers": bootstrap})


# Run in a child process of its own: a client destroyed while a coordinator request it sent to the frozen broker is
# still pending aborts the process (librdkafka's use-after-free in its coordinator-request error path,
# confluentinc/librdkafka#5397: "Assertion `eonce->refcnt > 0' failed"), and in the test worker it took every other
# test of the worker with it. The child says what each check answered, then leaves without freeing its clients.
FROZEN_CHECKS = """
import json, logging, os, sys
from mirrorwatch.core.clients import make_admin
from mirrorwatch.core.config import ClusterConfig
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.naming import checkpoints_topic, offset_syncs_topic
from mirrorwatch.mirror.checkpoints import CheckpointEmitter, all_checkpoints, read_offset_syncs
from mirrorwatch.mirror.failover.reads import CannotTell, group_is_active
from mirrorwatch.mirror.offset_store import Translation

source, target, group = sys.argv[1:4]
west = ClusterConfig.model_validate({"bootstrap.servers": target})
config = config_from_dict({
    "clusters": {"east": {"bootstrap.servers": source}, "west": {"bootstrap.servers": target}},
    "flows": {"east-west": {"source": "east", "target": "west", "sync_group_offsets": True}},
})
emitter = CheckpointEmitter(config, "east-west")
emitter.admin_timeout_s = 3
admin = make_admin(west, "test-refusals", **{"socket.timeout.ms": 3000})
said = []
handler = logging.Handler()
handler.emit = lambda record: said.append(record.getMessage())
logging.getLogger("mirrorwatch.mirror.checkpoints").addHandler(handler)
out = {"before": group_is_active(admin, group, "west", timeout_s=10)}
print("frozen?", flush=True)
sys.stdin.readline()
for name, check in [
    ("group_is_active", lambda: group_is_active(admin, group, "west", timeout_s=3)),
    ("offset_syncs", lambda: read_offset_syncs(west, offset_syncs_topic("east"), "west", timeout_s=3)),
    ("checkpoints", lambda: all_checkpoints(west, "east", "west", timeout_s=3)),
]:
    try:
        check()
        out[name] = "answered"
    except CannotTell as exc:
        out[name] = str(exc)
emitter._sync_group(group, [Translation("t", 0, 5, 5, 0)])
out["emitter"] = said
print(json.dumps(out), flush=True)
os._exit(0)
"""


def test_a_frozen_target_is_never_read_as_nobody_there(source, target, tmp_path):
    """group_is_active, the offset syncs and the checkpoints all refuse on a broker that does not answer; the
    checkpoint emitter's group sync leaves the group alone that round and says why."""
    local_only(target)
    group = f"app-{uuid.uuid4().hex[:6]}"
    script = tmp_path / "frozen_checks.py"
    script.write_text(FROZEN_CHECKS)
    child = subprocess.Popen(
        [str(BIN / "python"), str(script), source.bootstrap, target.bootstrap, group],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "frozen?"  # the broker answering: an unknown group is absent
        with frozen(target):
            child.stdin.write("\n")
            child.stdin.flush()
            line = child.stdout.readline()
            child.wait(60)
    finally:
        child.kill()
    out = json.loads(line)
    assert out["before"] is False
    assert f"whether group '{group}' is active on 'west': no answer within 3 s" in out["group_is_active"], out
    assert "mw.offset-syncs.east.internal on 'west'" in out["offset_syncs"], out
    assert checkpoints_topic("east") in out["checkpoints"], out
    assert any(f"not syncing group {group}'s offsets" in s and "no answer within 3 s" in s for s in out["emitter"]), out


@pytest.fixture
def denied_setup(sasl_pair, tmp_path):
    """On the SASL_SSL pair: a mirrored topic and its offset sync on west, readable by User:mirror, who has no
    ACL on any group (so describing one is refused)."""
    tag = uuid.uuid4().hex[:6]
    alias, topic, group = f"d{tag}", f"orders-{tag}", f"app-{tag}"
    west = sasl_pair.west
    syncs, mirrored = offset_syncs_topic(alias), f"{alias}.{topic}"
    create_topic(west.bootstrap, mirrored, 1, auth=west.client_config())
    create_topic(west.bootstrap, syncs, 1, auth=west.client_config())
    producer = Producer(west.client_config())
    producer.produce(mirrored, b"v0")
    producer.produce(syncs, key=f"{topic}:0".encode(), value=OffsetSync(topic, 0, 0, 0, 1, 1, 0).to_value())
    producer.flush(30)
    sasl_pair.grant(
        [AclNeed("failover", "target", op, "topic", name) for name in (syncs, mirrored) for op in ("READ", "DESCRIBE")]
    )
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(sasl_pair.config(alias, "west", topics=[topic])))
    return path, alias, group


def test_an_acl_denial_refuses_apply_in_one_line(denied_setup):
    path, alias, group = denied_setup
    result = subprocess.run(
        [str(BIN / "mirror"), "failover", "reset-to-time", "--config", str(path), "--group", group]
        + ["--time", "2020-01-01T00:00:00Z", "--apply"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    case = FAILOVER_REFUSALS["apply-denied"]
    said = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("%")]
    assert result.returncode == case["exit"], result.stderr
    assert len(said) == 1 and message_pattern(case["message"].replace("'g'", f"'{group}'")).fullmatch(said[0]), said
