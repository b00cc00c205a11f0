"""`mirrorwatch config from-strimzi` / `from-mm2`: pure conversions, the CLI's output and its one-line refusals.

The Strimzi resources below are our own text, shaped like Strimzi's examples
(packaging/examples/mirror-maker/kafka-mirror-maker-2*.yaml in strimzi/strimzi-kafka-operator, v1beta2 as of 0.48
and v1 as of 1.x); the mm2.properties is the one tests/test_mm2.py runs the real MM2 on.
"""

from __future__ import annotations

import re

import pytest
import yaml
from click.testing import CliRunner

from mirrorwatch.core.config_loading import config_from_dict, load_config
from mirrorwatch.core.mm2 import aliases, flow_policy, mm2_topics
from mirrorwatch.core.topic_selection import measured_topics
from mirrorwatch.doctor.cli import cli
from mirrorwatch.doctor.config_import import ImportProblem, from_mm2_properties, from_strimzi, render_yaml
from mirrorwatch.doctor.config_import.common import Imported, regex_list
from mirrorwatch.doctor.config_import.properties import parse_properties
from mirrorwatch.localkafka.mm2 import mm2_properties

V1BETA2 = """\
# a topic in the same file: skipped
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaTopic
metadata: {name: orders}
---
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata:
  name: mm2-ew
spec:
  replicas: 1
  connectCluster: west          # the target runs Connect
  clusters:
  - alias: east
    bootstrapServers: east-kafka-bootstrap:9092
  - alias: west
    bootstrapServers: west-kafka-bootstrap:9092
    config:
      offset.flush.interval.ms: 15000
  mirrors:
  - sourceCluster: east
    targetCluster: west
    sourceConnector:
      tasksMax: 2
      config:
        replication.policy.class: org.apache.kafka.connect.mirror.IdentityReplicationPolicy
    heartbeatConnector:
      config: {heartbeats.topic.replication.factor: 1}
    checkpointConnector:
      config:
        replication.policy.class: org.apache.kafka.connect.mirror.IdentityReplicationPolicy
        emit.checkpoints.interval.seconds: 30
    topicsPattern: "orders|payments\\\\..*, audit"
    topicsBlacklistPattern: "audit-internal"
    groupsPattern: "billing-.*"
"""

V1 = """\
apiVersion: kafka.strimzi.io/v1
kind: KafkaMirrorMaker2
metadata:
  name: mm2-ab
  namespace: kafka
spec:
  replicas: 1
  target:
    alias: cluster-b
    bootstrapServers: cluster-b-kafka-bootstrap:9092
    groupId: mm2-ab-group
    configStorageTopic: __mm2-ab-config
    offsetStorageTopic: __mm2-ab-offset
    statusStorageTopic: __mm2-ab-status
  mirrors:
  - source:
      alias: cluster-a
      bootstrapServers: cluster-a-kafka-bootstrap:9092
    sourceConnector:
      config:
        offset-syncs.topic.location: target
        replication.policy.separator: "_"
    checkpointConnector:
      config:
        offset-syncs.topic.location: target
        sync.group.offsets.enabled: "true"
        refresh.groups.interval.seconds: 120
    topicsPattern: ".*"
    groupsPattern: ".*"
"""

TWO_MIRRORS_TLS_SCRAM = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata: {name: mm2-dr, namespace: dr}
spec:
  connectCluster: central
  clusters:
  - alias: central
    bootstrapServers: central-kafka-bootstrap:9093
    tls:
      trustedCertificates: [{secretName: central-cluster-ca-cert, certificate: ca.crt}]
    authentication:
      type: scram-sha-512
      username: mm2-central
      passwordSecret: {secretName: mm2-central, password: password}
    config:
      offset.storage.topic: dr-offsets
  - alias: north
    bootstrapServers: north-kafka-bootstrap:9093
    tls:
      trustedCertificates: [{secretName: north-cluster-ca-cert, pattern: "*.crt"}]
    authentication:
      type: scram-sha-512
      username: mm2-north
      passwordSecret: {secretName: mm2-north, password: pw}
  - alias: south
    bootstrapServers: south-kafka-bootstrap:9093
    tls: {trustedCertificates: [{secretName: south-cluster-ca-cert, certificate: ca.crt}]}
    authentication:
      type: tls
      certificateAndKey: {secretName: mm2-south, certificate: user.crt, key: user.key}
  mirrors:
  - sourceCluster: north
    targetCluster: central
    sourceConnector: {config: {offset-syncs.topic.location: target}}
    checkpointConnector: {config: {offset-syncs.topic.location: target}}
    topicsPattern: "inventory\\\\..*"
  - sourceCluster: south
    targetCluster: central
    sourceConnector: {}
    topicsPattern: "a{1,3}|(x|y)z"
    topicsExcludePattern: "tmp-.*"
    groupsExcludePattern: "test-.*"
"""


def _config(imported):
    text = render_yaml(imported, "test")
    return text, config_from_dict(yaml.safe_load(text))


def test_strimzi_v1beta2():
    imported = from_strimzi(V1BETA2, "mm2.yaml")
    text, config = _config(imported)
    assert list(config.clusters) == ["east", "west"] and list(config.flows) == ["east-west"]
    flow = config.flows["east-west"]
    m = flow.mirror
    assert (flow.source, flow.target, m.kind, m.policy, m.separator) == ("east", "west", "mm2", "identity", ".")
    assert m.connector == "east->west.MirrorSourceConnector"
    assert m.checkpoint_connector == "east->west.MirrorCheckpointConnector"
    assert m.heartbeat_connector == "east->west.MirrorHeartbeatConnector"
    assert m.connect_offsets_topic == "mirrormaker2-cluster-offsets"  # Strimzi's default for the v1beta2 shape
    assert m.connect_configs_topic == "mirrormaker2-cluster-configs"
    assert (m.offset_flush_interval_s, m.emit_checkpoints_interval_s, m.refresh_groups_interval_s) == (15, 30, 600)
    # "a|b, c" is MM2's list: every top-level alternative becomes one full-match regex
    assert flow.topics == ["orders", r"payments\..*", "audit"]
    assert flow.exclude == ["audit-internal"]  # the deprecated topicsBlacklistPattern, read as Strimzi reads it
    assert len(flow.checkpoint_groups) == 1
    group = re.compile(flow.checkpoint_groups[0])
    assert group.fullmatch("billing-eu") and not group.fullmatch("connect-billing") and not group.fullmatch("x")
    assert "connect:" in text and "      #   url: http://mm2-ew-mirrormaker2-api:8083\n" in text  # commented out
    assert m.connect is None
    assert imported.notes == []


def test_strimzi_v1():
    imported = from_strimzi(V1, "mm2.yaml")
    text, config = _config(imported)
    flow = config.flows["cluster-a-cluster-b"]
    m = flow.mirror
    assert (m.source_alias, m.target_alias, m.separator, m.offset_syncs_topic_location) == (
        "cluster-a",
        "cluster-b",
        "_",
        "target",
    )
    assert m.connector == "cluster-a->cluster-b.MirrorSourceConnector"
    assert m.connect_offsets_topic == "__mm2-ab-offset"
    assert m.connect_configs_topic == "__mm2-ab-config"
    assert (m.offset_flush_interval_s, m.emit_checkpoints_interval_s, m.refresh_groups_interval_s) == (60, 60, 120)
    assert mm2_topics(flow).offset_syncs_cluster == "cluster-b"
    assert flow.topics == [".*"] and flow.exclude == [r".*[\-\.]internal", r".*\.replica", "__.*"]  # MM2's default
    assert "http://mm2-ab-mirrormaker2-api.kafka.svc:8083" in text
    notes = "\n".join(imported.notes)
    assert "sync.group.offsets.enabled = true" in notes
    assert "no heartbeat connector" in notes  # v1 has none
    for note in imported.notes:
        assert note in text  # said in the YAML's head too


def test_strimzi_two_mirrors_tls_and_scram():
    imported = from_strimzi(TWO_MIRRORS_TLS_SCRAM, "dr.yaml")
    text, config = _config(imported)
    assert list(config.flows) == ["north-central", "south-central"]
    assert set(config.clusters) == {"north", "central", "south"}
    central = config.clusters["central"].properties
    assert central["security.protocol"] == "SASL_SSL" and central["sasl.mechanism"] == "SCRAM-SHA-512"
    assert central["sasl.username"] == "mm2-central"
    assert central["sasl.password"] == "${MIRRORWATCH_CENTRAL_SASL_PASSWORD}"
    assert central["ssl.ca.location"] == "${MIRRORWATCH_CENTRAL_SSL_CA_LOCATION}"
    south = config.clusters["south"].properties
    assert south["security.protocol"] == "SSL"
    assert south["ssl.key.location"] == "${MIRRORWATCH_SOUTH_SSL_KEY_LOCATION}"
    assert re.search(r"#   MIRRORWATCH_CENTRAL_SASL_PASSWORD +Secret mm2-central key password\n", text)
    assert "MIRRORWATCH_SOUTH_SSL_KEY_LOCATION" in text and "Secret mm2-south key user.key" in text
    for flow in config.flows.values():
        assert flow.mirror.connect_offsets_topic == "dr-offsets"  # the Connect cluster's offset.storage.topic
    north, south_flow = config.flows["north-central"], config.flows["south-central"]
    assert north.mirror.offset_syncs_topic_location == "target"
    assert south_flow.topics == ["a{1", "3}", "(x|y)z"]  # MM2 splits the list at every comma, as Java does
    assert south_flow.exclude == ["tmp-.*"]
    assert "checkpoint_connector" not in yaml.safe_load(text)["flows"]["south-central"]["mirror"]
    assert any("no checkpoint connector" in n for n in imported.notes)
    # loads through the file loader too, with the secrets from the environment
    env = {ref.var: "from-env" for ref in imported.env}
    path = _write(text)
    assert load_config(path, environ=env).clusters["north"].properties["sasl.password"] == "from-env"


def _write(text):
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
    return f.name


MM2_SECRETS = """\
# dedicated mode, with secrets that must never be copied
clusters = east, west
east.bootstrap.servers = east-1:9093
west.bootstrap.servers = west-1:9093
security.protocol = SASL_SSL
sasl.mechanism = SCRAM-SHA-512
east.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="mm2" password="s3cr3t-jaas-pw";
west.sasl.jaas.config : org.apache.kafka.common.security.scram.ScramLoginModule required username="mm2w" password="w3st-pw";
ssl.truststore.location = /etc/kafka/truststore.jks
ssl.truststore.password = trust-pw-123
west.ssl.keystore.location = /etc/kafka/west.p12
west.ssl.keystore.type = PKCS12
west.ssl.keystore.password = keyst0re-pw
west.ssl.key.password = key-pw-456
east->west.enabled = true
east->west.topics = orders, payments\\\\..*
west->east.enabled = true
west->east.topics.exclude = scratch.*
replication.policy.class = org.example.MyPolicy
west->east.replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
east.offset.flush.interval.ms = 5000
"""


def test_mm2_properties_secrets_never_copied():
    imported = from_mm2_properties(MM2_SECRETS, "mm2.properties")
    text, config = _config(imported)
    for secret in ("s3cr3t-jaas-pw", "w3st-pw", "trust-pw-123", "keyst0re-pw", "key-pw-456"):
        assert secret not in text
        assert all(secret not in note for note in imported.notes)
    east = config.clusters["east"].properties
    assert east["security.protocol"] == "SASL_SSL" and east["sasl.username"] == "mm2"
    assert east["sasl.password"] == "${MIRRORWATCH_EAST_SASL_PASSWORD}"
    assert east["ssl.ca.location"] == "${MIRRORWATCH_EAST_SSL_CA_LOCATION}"  # a JKS truststore: PEM needed
    west = config.clusters["west"].properties
    assert west["ssl.keystore.location"] == "/etc/kafka/west.p12"
    assert west["ssl.keystore.password"] == "${MIRRORWATCH_WEST_SSL_KEYSTORE_PASSWORD}"
    assert list(config.flows) == ["east-west", "west-east"]
    ew, we = config.flows["east-west"], config.flows["west-east"]
    assert ew.topics == ["orders", r"payments\..*"] and we.exclude == ["scratch.*"]
    assert (ew.mirror.policy, we.mirror.policy) == ("default", "identity")  # a->b.x overrides x
    assert any("org.example.MyPolicy" in n for n in imported.notes)
    assert (
        we.mirror.offset_flush_interval_s == 5
    )  # the west->east worker runs against east: east.offset.flush.interval.ms
    assert ew.mirror.offset_flush_interval_s == 60
    assert ew.mirror.connect_offsets_topic is None  # dedicated mode's default, mirrorwatch's too
    assert ew.mirror.connect_configs_topic is None


def test_mm2_properties_of_the_real_mm2_test_watch_it_with_no_hand_edits(tmp_path):
    """tests/test_mm2.py runs the real MM2 on mm2_properties(...) and watches it with a hand-written config; the
    generated one says the same in every MM2 field."""
    from .support.mm2_settings import FAST, RUN

    props = mm2_properties({"east": "127.0.0.1:1", "west": "127.0.0.1:2"}, "east", "west", f"mm2t-{RUN}-.*", **FAST)
    path = tmp_path / "mm2.properties"
    path.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))  # as LocalMirrorMaker2 writes it
    imported = from_mm2_properties(path.read_text(), str(path))
    _, generated = _config(imported)
    hand = config_from_dict(  # tests/test_mm2.py mm2_env's flow, its clusters' addresses aside
        {
            "clusters": {"east": {"bootstrap.servers": "127.0.0.1:1"}, "west": {"bootstrap.servers": "127.0.0.1:2"}},
            "flows": {
                "ew": {
                    "source": "east",
                    "target": "west",
                    "topics": [f"mm2t-{RUN}-(lag|fo)"],
                    "checkpoint_groups": [f"mm2g-{RUN}-.*"],
                    "mirror": {"kind": "mm2", "offset_flush_interval_s": 1, "emit_checkpoints_interval_s": 1},
                }
            },
        }
    )
    (_, mine), (_, theirs) = next(iter(generated.flows.items())), next(iter(hand.flows.items()))
    assert (mine.source, mine.target, aliases(mine), flow_policy(mine)) == (
        theirs.source,
        theirs.target,
        aliases(theirs),
        flow_policy(theirs),
    )
    assert mm2_topics(mine) == mm2_topics(theirs)
    for key in ("kind", "connector", "offset_flush_interval_s", "emit_checkpoints_interval_s", "policy", "separator"):
        assert getattr(mine.mirror, key) == getattr(theirs.mirror, key), key
    assert (mine.mirror.checkpoint_connector, mine.mirror.heartbeat_connector) == (
        theirs.mirror.checkpoint_connector,
        theirs.mirror.heartbeat_connector,
    )
    assert mine.mirror.refresh_groups_interval_s == 1  # MM2's FAST setting; the hand config left it at 600
    # topics: MM2's own regex (the hand config watches two of its topics; the canary topic is measured apart)
    names = [f"mm2t-{RUN}-lag", f"mm2t-{RUN}-fo", f"mm2t-{RUN}-canary", "other", "east.heartbeats", "x.internal"]
    assert set(measured_topics(generated, mine, names)) == {f"mm2t-{RUN}-lag", f"mm2t-{RUN}-fo", f"mm2t-{RUN}-canary"}
    assert set(measured_topics(hand, theirs, names)) <= set(measured_topics(generated, mine, names))
    for group in (f"mm2g-{RUN}-a", "mm2g-other", "connect-x"):
        assert bool(re.fullmatch(mine.checkpoint_groups[0], group)) == bool(
            re.fullmatch(theirs.checkpoint_groups[0], group)
        )
    assert imported.notes == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a = 1\nb: 2\nc 3\n", {"a": "1", "b": "2", "c": "3"}),
        ("# c\n! c\n  k  =  v  \n", {"k": "v  "}),
        ("k = one, \\\n    two\n", {"k": "one, two"}),
        ("k = a\\\\\nn = 1\n", {"k": "a\\", "n": "1"}),  # an even number of backslashes does not continue
        ("k\\ ey = v\\tw\\u00e9\n", {"k ey": "v\tw\u00e9"}),
        ("a\\=b = c\n", {"a=b": "c"}),
        ("k = 1\nk = 2\n", {"k": "2"}),
        ("empty\n", {"empty": ""}),
    ],
)
def test_java_properties(text, expected):
    assert parse_properties(text) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (".*", [".*"]),
        ("a|b, c", ["a", "b", "c"]),
        ("(a|b)c|[|]d", ["(a|b)c", "[|]d"]),
        (r"x\|y", [r"x\|y"]),
        (r"\Qa.b|c\E|d", [re.escape("a.b|c"), "d"]),
        ("", []),
        (r"\p{Alpha}+, ok", ["ok"]),  # Java-only: left out, with a note
    ],
)
def test_mm2_regex_lists(value, expected):
    assert regex_list(value, "topics", Imported("t")) == expected


# ------------------------------------------------------------------------------ the command


def test_cli_stdout_and_out(tmp_path):
    src = tmp_path / "mm2.yaml"
    src.write_text(V1)
    runner = CliRunner()
    result = runner.invoke(cli, ["config", "from-strimzi", str(src)])
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["flows"]["cluster-a-cluster-b"]["mirror"]["kind"] == "mm2"
    assert "mirrorwatch: not carried over: " in result.stderr
    out = tmp_path / "mirrorwatch.yaml"
    result = runner.invoke(cli, ["config", "from-strimzi", str(src), "--out", str(out)])
    assert result.exit_code == 0 and result.stdout == ""
    assert load_config(out).flows["cluster-a-cluster-b"].mirror.connect_offsets_topic == "__mm2-ab-offset"


@pytest.mark.parametrize(
    "command, content, expected",
    [
        ("from-strimzi", b"\xff\xfe", "is not UTF-8 text"),
        ("from-strimzi", "kind: KafkaConnect\n", "no KafkaMirrorMaker2 resource (it holds KafkaConnect)"),
        ("from-strimzi", V1.replace("kafka.strimzi.io/v1", "kafka.strimzi.io/v1alpha1"), "apiVersion"),
        ("from-strimzi", V1.replace("    offsetStorageTopic: __mm2-ab-offset\n", ""), "offsetStorageTopic"),
        ("from-strimzi", V1.replace("    sourceConnector:", "    otherConnector:"), "no mirror with a sourceConnector"),
        ("from-mm2", "clusters = a, b\na->b.enabled = true\n", "cluster 'a' has no a.bootstrap.servers"),
        ("from-mm2", "clusters = a\na->b.enabled = true\n", "names cluster 'b'"),
        ("from-mm2", "clusters = a, b\nk = \\u12\n", "malformed \\uXXXX"),
    ],
)
def test_cli_refuses_with_one_line_and_exit_2(tmp_path, capsys, command, content, expected):
    from mirrorwatch.doctor.cli import main

    path = tmp_path / "input"
    path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    with pytest.raises(SystemExit) as exit_:
        main(["config", command, str(path)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert len(err.strip().splitlines()) == 1 and expected in err and "Traceback" not in err


def test_problems_are_import_problems():
    with pytest.raises(ImportProblem):
        from_strimzi("a: [", "x.yaml")


def test_mm2_properties_exactly_once_marks_the_flow_transactional():
    """MM2's exactly-once source support (worker-wide, or per target cluster in dedicated mode) makes every source
    task write in transactions: the imported flow says so, and the monitor stops reading progress off the target's
    end offsets (docs/monitor.md)."""
    props = "clusters = east, west\neast.bootstrap.servers = e:9092\nwest.bootstrap.servers = w:9092\n"
    props += "east->west.enabled = true\nwest->east.enabled = true\nwest.exactly.once.source.support = enabled\n"
    imported = from_mm2_properties(props, "mm2.properties")
    text, config = _config(imported)
    assert config.flows["east-west"].mirror.exactly_once is True  # the east->west herder runs against west
    assert config.flows["west-east"].mirror.exactly_once is False
    assert "west.exactly.once.source.support = enabled" in text
