"""Pure logic of core.access and core.acls, table-driven (no broker)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from mirrorwatch.core import access
from mirrorwatch.core.acls import LITERAL, PREFIXED, AclNeed, exactly_once_needs, is_literal, mirror_needs
from mirrorwatch.core.config_loading import config_from_dict


@pytest.mark.parametrize(
    "props,principal",
    [
        ({"bootstrap.servers": "x:1"}, "User:ANONYMOUS"),
        ({"bootstrap.servers": "x:1", "security.protocol": "SASL_SSL", "sasl.username": "mirror"}, "User:mirror"),
        ({"bootstrap.servers": "x:1", "security.protocol": "sasl_plaintext", "sasl.username": "m"}, "User:m"),
        ({"bootstrap.servers": "x:1", "security.protocol": "SSL", "sasl.username": "ignored"}, "User:ANONYMOUS"),
    ],
)
def test_principal(props, principal):
    assert access.principal_of(props) == principal


@pytest.mark.parametrize(
    "raw,short",
    [
        (
            "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: bad (after 12ms in state AUTH_REQ)",
            "SASL authentication error: bad",
        ),
        (
            "ssl://10.0.0.1:9093/1: SSL handshake failed: x (after 3ms in state SSL_HANDSHAKE, 2 identical error(s) suppressed)",
            "SSL handshake failed: x",
        ),
        ("plain text", "plain text"),
    ],
)
def test_reason_is_shortened(raw, short):
    assert access._short(raw) == short


def test_recorded_failures_become_one_line_and_are_forgotten():
    bootstrap = "unit-test-host:9093"
    access.register_cluster("east", {"bootstrap.servers": bootstrap, "sasl.username": "mirror"})
    assert access.connection_problem(bootstrap) is None
    assert (
        access.record_client_error(
            bootstrap, KafkaError(KafkaError._AUTHENTICATION, "sasl_ssl://h:1/bootstrap: denied")
        )
        == "authentication"
    )
    assert access.connection_problem(bootstrap) == (
        f"authentication failed on cluster 'east' at {bootstrap} as user 'mirror': denied; check sasl.username, "
        "sasl.password and sasl.mechanism (see docs/security.md)"
    )
    assert access.record_client_error(bootstrap, KafkaError(KafkaError._TRANSPORT, "Connection refused")) is None
    access.forget(bootstrap)
    assert access.connection_problem(bootstrap) is None


@pytest.mark.parametrize(
    "code,rtype,denied",
    [
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, "topic", True),
        (KafkaError.GROUP_AUTHORIZATION_FAILED, "topic", False),  # a coordinator lookup refused, not the topic
        (KafkaError.GROUP_AUTHORIZATION_FAILED, "group", True),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "topic", False),
    ],
)
def test_raise_if_denied_only_for_that_resource(code, rtype, denied):
    from confluent_kafka import KafkaException

    exc = KafkaException(KafkaError(code))
    if denied:
        with pytest.raises(access.Denied):
            access.raise_if_denied(exc, "READ", rtype, "x", "source")
    else:
        access.raise_if_denied(exc, "READ", rtype, "x", "source")


@pytest.mark.parametrize(
    "pattern,literal",
    [("orders", True), ("orders-2", True), ("payments\\..*", False), ("a.b", False), ("(x|y)", False)],
)
def test_literal_patterns(pattern, literal):
    assert is_literal(pattern) is literal


def test_mirror_needs_prefix_policy():
    config = config_from_dict(
        {
            "clusters": {"east": {"bootstrap.servers": "a:1"}, "west": {"bootstrap.servers": "b:1"}},
            "flows": {"ew": {"source": "east", "target": "west", "topics": ["orders", "pay\\..*"]}},
        }
    )
    needs = {
        (n.role, n.operation, n.resource_type, n.name, n.pattern) for n in mirror_needs(config, None) if n.required
    }
    assert ("source", "READ", "topic", "orders", LITERAL) in needs
    assert ("source", "READ", "topic", "pay\\..*", "matching") in needs
    assert ("source", "READ", "group", "mirrorwatch-ew", LITERAL) in needs  # the flow is named ew: its own group
    assert ("target", "CREATE", "topic", "east.", PREFIXED) in needs
    assert ("target", "WRITE", "topic", "mw.offset-syncs.east.internal", LITERAL) in needs
    assert not any(n[1] == "ALTER" for n in needs)  # partition growth is optional


def _eos_config(policy: str = "prefix", delivery: str = "exactly_once", **flow):
    return config_from_dict(
        {
            "clusters": {"east": {"bootstrap.servers": "a:1"}, "west": {"bootstrap.servers": "b:1"}},
            "flows": {
                "east-west": {"source": "east", "target": "west", "topics": ["orders"], "policy": policy, **flow}
            },
            "mirror": {"delivery": delivery},
        }
    )


@pytest.mark.parametrize(
    "config,expected",
    [
        (_eos_config(delivery="at_least_once"), set()),
        (
            _eos_config(),
            {
                ("WRITE", "transactional id", "mirrorwatch-east-west-", PREFIXED),
                ("READ", "group", "mirrorwatch-east-west.eos", LITERAL),
                ("READ", "topic", "east.", PREFIXED),
            },
        ),
        (
            _eos_config(group="mm-orders"),  # a configured group names the transactional ids and positions group
            {
                ("WRITE", "transactional id", "mm-orders-", PREFIXED),
                ("READ", "group", "mm-orders.eos", LITERAL),
                ("READ", "topic", "east.", PREFIXED),
            },
        ),
        (
            _eos_config(policy="identity"),  # target topics keep their names: one literal READ each
            {
                ("WRITE", "transactional id", "mirrorwatch-east-west-", PREFIXED),
                ("READ", "group", "mirrorwatch-east-west.eos", LITERAL),
                ("READ", "topic", "orders", LITERAL),
                ("READ", "topic", "heartbeats", LITERAL),
                ("READ", "topic", "mw.canary", LITERAL),
            },
        ),
    ],
    ids=["at-least-once", "exactly-once", "configured-group", "identity"],
)
def test_exactly_once_needs(config, expected):
    needs = exactly_once_needs(config, None)
    assert {(n.operation, n.resource_type, n.name, n.pattern) for n in needs} == expected
    assert all(n.role == "target" and n.component == "mirror" and n.required for n in needs)
    assert set(needs) <= set(mirror_needs(config, None))  # the doctor and the docs read mirror_needs


@pytest.mark.parametrize(
    "need,command",
    [
        (
            AclNeed("mirror", "target", "WRITE", "transactional id", "mirrorwatch-east-west-", PREFIXED),
            "--operation Write --transactional-id 'mirrorwatch-east-west-' --resource-pattern-type prefixed",
        ),
        (
            AclNeed("mirror", "target", "READ", "group", "mirrorwatch-east-west.eos"),
            "--operation Read --group 'mirrorwatch-east-west.eos'",
        ),
        (
            AclNeed("mirror", "target", "READ", "topic", "east.", PREFIXED),
            "--operation Read --topic 'east.' --resource-pattern-type prefixed",
        ),
        (
            AclNeed("mirror", "target", "DESCRIBE_CONFIGS", "topic", "orders"),
            "--operation DescribeConfigs --topic 'orders'",
        ),
    ],
)
def test_doctor_names_the_kafka_acls_command(need, command):
    from types import SimpleNamespace

    from mirrorwatch.doctor.report import _grant

    cluster = SimpleNamespace(
        bootstrap_servers="west:9093",
        properties={"security.protocol": "SASL_SSL", "sasl.username": "mirror", "sasl.password": "s3cret"},
    )
    assert _grant(need, SimpleNamespace(cluster=cluster)) == (
        "kafka-acls.sh --bootstrap-server west:9093 --command-config <admin.properties> --add "
        f"--allow-principal User:mirror {command}"
    )
