"""Fail closed: every failover check that permits an action refuses when it cannot read what it needs.

On real brokers: the plain pair's target broker frozen (SIGSTOP: no answer at all), and on the SASL_SSL pair a
principal without the group ACL (an authorization error). Each refusal names what could not be read; the
command-line ones are one line with exit 3 (docs/errors.md, the failover refusals).
"""

from __future__ import annotations

import logging
import subprocess
import time
import uuid

import pytest
import yaml
from confluent_kafka import KafkaException, Producer

from harness.helpers import create_topic
from harness.mirror_harness import BIN
from mirrorwatch.core.acls import AclNeed
from mirrorwatch.core.clients import make_admin
from mirrorwatch.core.config import ClusterConfig
from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.naming import checkpoints_topic, offset_syncs_topic
from mirrorwatch.core.records import OffsetSync
from mirrorwatch.mirror.checkpoints import CheckpointEmitter, all_checkpoints, read_offset_syncs
from mirrorwatch.mirror.failover.reads import CannotTell, group_is_active
from mirrorwatch.mirror.offset_store import Translation

from .error_cases import FAILOVER_REFUSALS, message_pattern
from .support.outages import frozen, local_only

pytestmark = pytest.mark.kafka


def cluster(bootstrap: str) -> ClusterConfig:
    return ClusterConfig.model_validate({"bootstrap.servers": bootstrap})


def silent(admin) -> None:
    """Wait until the frozen broker has stopped answering: a request already in its hands when the stop came
    may still be answered."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=2)
        except KafkaException:
            return
    raise AssertionError("the frozen broker still answers metadata requests")


def test_a_frozen_target_is_never_read_as_nobody_there(source, target, caplog):
    """group_is_active, the offset syncs and the checkpoints all refuse on a broker that does not answer; the
    checkpoint emitter's group sync leaves the group alone that round and says why."""
    local_only(target)
    group = f"app-{uuid.uuid4().hex[:6]}"
    config = config_from_dict(
        {
            "clusters": {"east": source.config(), "west": target.config()},
            "flows": {"east-west": {"source": "east", "target": "west", "sync_group_offsets": True}},
        }
    )
    emitter = CheckpointEmitter(config, "east-west")
    emitter.admin_timeout_s = 3
    admin = make_admin(cluster(target.bootstrap), "test-refusals", **{"socket.timeout.ms": 3000})
    assert group_is_active(admin, group, "west", timeout_s=60) is False  # unknown group, broker answering: absent
    translations = [Translation("t", 0, 5, 5, 0)]
    try:
        with frozen(target):
            silent(admin)
            with pytest.raises(CannotTell, match=rf"whether group '{group}' is active on 'west': no answer within 3 s"):
                group_is_active(admin, group, "west", timeout_s=3)
            with pytest.raises(CannotTell, match="mw.offset-syncs.east.internal on 'west'"):
                read_offset_syncs(cluster(target.bootstrap), offset_syncs_topic("east"), "west", timeout_s=3)
            with pytest.raises(CannotTell, match=checkpoints_topic("east").replace(".", r"\.")):
                all_checkpoints(cluster(target.bootstrap), "east", "west", timeout_s=3)
            with caplog.at_level(logging.WARNING, "mirrorwatch.mirror.checkpoints"):
                emitter._sync_group(group, translations)
    finally:
        admin.list_topics(timeout=30)  # thawed: the requests that timed out while frozen are answered and done
        emitter.reader.close()
        emitter.producer.flush(5)
    said = [r.getMessage() for r in caplog.records]
    assert any(f"not syncing group {group}'s offsets" in s and "no answer within 3 s" in s for s in said), said


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
