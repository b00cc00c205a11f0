"""Coordinator calls through their helper process on the SASL_SSL pair: an authorization error comes back with its
code, as from a direct call, and the password reaches the helper on stdin only (mirrorwatch/core/coordinator_calls.py)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from harness.helpers import kafka_error_code
from mirrorwatch.core.config import ClusterConfig
from mirrorwatch.core.coordinator_calls import CoordinatorCalls

from .support.sasl import MIRROR_PASSWORD, MIRROR_USER


def test_a_denied_describe_keeps_its_code_and_the_password_stays_off_argv_and_environ(sasl_pair):
    sasl_pair.load_coordinators("target")
    config = sasl_pair.west.client_config(MIRROR_USER, MIRROR_PASSWORD)  # User:mirror: no ACL on any group
    group = f"app-denied-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(config)
    calls = CoordinatorCalls(ClusterConfig(properties=config))
    pid = None
    try:
        direct = kafka_error_code(lambda: admin.describe_consumer_groups([group], request_timeout=20)[group].result(21))
        through = kafka_error_code(lambda: calls.describe_group(group, 20))
        assert through == direct == KafkaError.GROUP_AUTHORIZATION_FAILED
        pid = calls.pid
        assert pid is not None
        for name in ("cmdline", "environ"):
            assert MIRROR_PASSWORD.encode() not in Path(f"/proc/{pid}/{name}").read_bytes(), name
    finally:
        calls.close()
    assert pid is not None
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()  # reaped: no zombie left
