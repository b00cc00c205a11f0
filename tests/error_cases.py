"""Bad inputs and faults, what each command answers, and its exit code: the source of docs/errors.md.

`tests/test_error_cases.py` runs every case against the real command-line tools and checks the message and the
exit code, and checks that docs/errors.md is what ``render()`` makes of this table, so the page cannot drift.
Regenerate the page with ``.venv/bin/python -m tests.error_cases > docs/errors.md``.

A case: ``input`` (what was wrong), ``message`` (the line the user sees; ``…`` stands for text that varies, such
as a client library's reason or a duration), ``exit`` (the code), plus how to run it: ``command`` (run in a
fresh folder holding ``m.yaml``), ``config`` (the file's text; default ``BASE``), ``files`` (more files for the
folder: name → text, or bytes for a binary file), ``stream`` (where the line
goes; default stderr), ``service`` (a service: its log lines may come first, the message is the last line) and ``json`` (the command was given --json: stdout must be exactly one JSON object whose
``error`` is the message). Clusters at 127.0.0.1:9 and :19 do not exist: nothing listens there.

The cases that need the SASL_SSL clusters (credentials, TLS, each ACL: ``sasl_cases()``) are the page's second
table; tests/test_security.py and tests/test_doctor.py run them on the session's SASL_SSL pair.
"""

from __future__ import annotations

import re

BASE = """clusters:
  east: {bootstrap.servers: "127.0.0.1:9"}
  west: {bootstrap.servers: "127.0.0.1:19"}
flows:
  east-west: {source: east, target: west}
"""


def _with(extra: str) -> str:
    return BASE + extra


KMM2_V1BETA2 = """apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaMirrorMaker2
metadata: {name: my-mm2}
spec:
  connectCluster: cluster-b
  clusters:
  - {alias: cluster-a, bootstrapServers: "a:9092"}
  - {alias: cluster-b, bootstrapServers: "b:9092"}
  mirrors:
  - {sourceCluster: cluster-x, targetCluster: cluster-b, sourceConnector: {}}
"""

CASES: list[dict] = [
    # ------------------------------------------------------------------ the config file
    {
        "input": "config file does not exist",
        "command": "mirror run --config nope.yaml",
        "message": "mirror: cannot read config file nope.yaml: No such file or directory",
        "exit": 2,
    },
    {
        "input": "not valid YAML (an unclosed bracket)",
        "command": "mirror run --config m.yaml",
        "config": "clusters: [east\n",
        "message": "mirror: m.yaml line 2: invalid YAML: …",
        "exit": 2,
    },
    {
        "input": "a key given twice (two `flows:` blocks)",
        "command": "mirror run --config m.yaml",
        "config": BASE + "flows:\n  other: {source: west, target: east}\n",
        "message": "mirror: m.yaml line 6: key 'flows' appears twice (lines 4 and 6); merge the two or remove one",
        "exit": 2,
    },
    {
        "input": "the same flow name twice",
        "command": "mirror run --config m.yaml",
        "config": BASE + "  east-west: {source: west, target: east}\n",
        "message": "mirror: m.yaml line 6: key 'east-west' appears twice (lines 5 and 6); merge the two or remove one",
        "exit": 2,
    },
    {
        "input": "the top level is a list",
        "command": "mirror run --config m.yaml",
        "config": "- clusters\n",
        "message": "mirror: m.yaml: the top level must be a mapping with 'clusters:' (and 'flows:', ...)",
        "exit": 2,
    },
    {
        "input": "a config file that is not text (a binary file given by mistake)",
        "command": "monitor lag --config logo.png",
        "files": {"logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"},
        "message": "monitor: config file logo.png is not UTF-8 text (byte 0): give the mirrorwatch YAML config",
        "exit": 2,
    },
    {
        "input": "a misspelt setting",
        "command": "mirror run --config m.yaml",
        "config": _with("mirror: {comit_interval_s: 1}\n"),
        "message": "mirror: config error in m.yaml: mirror.comit_interval_s: unknown key",
        "exit": 2,
    },
    {
        "input": "a flow naming an undefined cluster",
        "command": "mirror run --config m.yaml",
        "config": BASE.replace("target: west", "target: wset"),
        "message": "mirror: config error in m.yaml: flows.east-west.target: cluster 'wset' is not defined (defined: east, west)",
        "exit": 2,
    },
    {
        "input": "a flow from a cluster to itself",
        "command": "mirror run --config m.yaml",
        "config": BASE.replace("target: west", "target: east"),
        "message": "mirror: config error in m.yaml: flows.east-west.target: must differ from the source cluster",
        "exit": 2,
    },
    {
        "input": "a cluster without bootstrap.servers",
        "command": "mirror run --config m.yaml",
        "config": BASE.replace('{bootstrap.servers: "127.0.0.1:19"}', "{client.id: x}"),
        "message": "mirror: config error in m.yaml: clusters.west: 'bootstrap.servers' is required",
        "exit": 2,
    },
    {
        "input": "an include regex that does not compile",
        "command": "mirror run --config m.yaml",
        "config": BASE.replace("target: west}", "target: west, topics: ['orders[']}"),
        "message": "mirror: config error in m.yaml: flows.east-west.topics: bad regex 'orders[': …",
        "exit": 2,
    },
    {
        "input": "a commit interval not shorter than the group's session timeout",
        "command": "mirror run --config m.yaml",
        "config": _with("mirror: {commit_interval_s: 10}\n"),
        "message": "mirror: config error in m.yaml: mirror.commit_interval_s: 10 s is not shorter than the mirror group's "
        "session timeout (10 s, mirror.consumer.session.timeout.ms): a worker taken over by another re-sends "
        "everything since its last commit; lower it",
        "exit": 2,
    },
    {
        "input": "a heartbeat age limit not longer than the heartbeat interval",
        "command": "mirror run --config m.yaml",
        "config": _with("mirror: {heartbeat_interval_s: 5}\ncanary: {heartbeat_max_age_s: 5}\n"),
        "message": "mirror: config error in m.yaml: canary.heartbeat_max_age_s: 5 s is not longer than "
        "mirror.heartbeat_interval_s (5 s): every heartbeat would look stale; raise it",
        "exit": 2,
    },
    {
        "input": "two services given the same port",
        "command": "mirror run --config m.yaml",
        "config": _with("mirror: {metrics_port: 9700}\nmonitor: {metrics_port: 9700}\n"),
        "message": "mirror: config error in m.yaml: monitor.metrics_port: port 9700 on 127.0.0.1 is also "
        "mirror.metrics_port; give each its own port",
        "exit": 2,
    },
    {
        "input": "canary warning threshold not below the critical one",
        "command": "mirror run --config m.yaml",
        "config": _with("canary: {warn_latency_s: 30, crit_latency_s: 30}\n"),
        "message": "mirror: config error in m.yaml: canary: warn_latency_s (30.0) must be below crit_latency_s (30.0)",
        "exit": 2,
    },
    {
        "input": "a negative commit interval",
        "command": "mirror run --config m.yaml",
        "config": _with("mirror: {commit_interval_s: -1}\n"),
        "message": "mirror: config error in m.yaml: mirror.commit_interval_s: Input should be greater than 0 (got -1)",
        "exit": 2,
    },
    {
        "input": "a `${VAR}` whose variable is not set",
        "command": "mirror run --config m.yaml",
        "config": BASE.replace("127.0.0.1:19", "${WEST_BOOTSTRAP_UNSET}"),
        "message": "mirror: config error: clusters.west.bootstrap.servers: environment variable WEST_BOOTSTRAP_UNSET is not set",
        "exit": 2,
    },
    {
        "input": "the identity policy with the provenance header switched off",
        "command": "mirror run --config m.yaml",
        "config": BASE.replace("target: west}", "target: west, policy: identity}")
        + "mirror: {provenance_header: false}\n",
        "message": "mirror: config error in m.yaml: mirror.provenance_header: flow 'east-west' uses the identity policy, which "
        "needs the header to stop active-active loops; remove the setting or set it to true",
        "exit": 2,
    },
    {
        "input": "`delivery: exactly_once` with `on_records_lost: continue` (a gap could not be marked on the target)",
        "command": "mirror run --config m.yaml",
        "config": _with("mirror: {delivery: exactly_once, on_records_lost: continue}\n"),
        "message": "mirror: config error in m.yaml: mirror: delivery: exactly_once cannot be exact with "
        "on_records_lost: continue (the gap would be skipped without a mark on the target); set on_records_lost: "
        "stop or delivery: at_least_once",
        "exit": 2,
    },
    {
        "input": "a --flow that is not defined",
        "command": "mirror run --config m.yaml --flow nope",
        "message": "mirror: flow 'nope' is not defined (defined: east-west)",
        "exit": 2,
    },
    {
        "input": "several flows and no --flow",
        "command": "mirror run --config m.yaml",
        "config": BASE + "  west-east: {source: west, target: east}\n",
        "message": "mirror: several flows are defined (east-west, west-east); choose one with --flow",
        "exit": 2,
    },
    {
        "input": "no flow at all",
        "command": "mirror run --config m.yaml",
        "config": BASE.split("flows:")[0],
        "message": "mirror: flows: no flow is defined; add one under 'flows:'",
        "exit": 2,
    },
    # ------------------------------------------------------------------ the command line
    {
        "input": "an option that does not exist",
        "command": "mirror run --config m.yaml --fast",
        "message": "mirror: No such option '--fast'. (see 'mirror run --help')",
        "exit": 2,
    },
    {
        "input": "`canary check --json` with a config file that cannot be read",
        "command": "canary check --config nope.yaml --json",
        "message": "canary: cannot read config file nope.yaml: No such file or directory",
        "exit": 3,
        "json": True,
    },
    {
        "input": "`canary check` for a flow that is not defined",
        "command": "canary check --config m.yaml --flow nope",
        "message": "canary: flow 'nope' is not defined (defined: east-west)",
        "exit": 3,
    },
    {
        "input": "`monitor lag --json` with a key twice",
        "command": "monitor lag --config m.yaml --json",
        "config": BASE + "flows:\n  other: {source: west, target: east}\n",
        "message": "monitor: m.yaml line 6: key 'flows' appears twice (lines 4 and 6); merge the two or remove one",
        "exit": 2,
        "json": True,
    },
    {
        "input": "`mirror failover check --json` with an unknown flow",
        "command": "mirror failover check --config m.yaml --flow x --json",
        "message": "mirror: flow 'x' is not defined (defined: east-west)",
        "exit": 2,
        "json": True,
    },
    {
        "input": "`reset-to-time` with a time that is not a time",
        "command": "mirror failover reset-to-time --config m.yaml --group g --time yesterday",
        "message": "mirror: --time 'yesterday' is not an ISO 8601 time (e.g. 2026-11-23T10:15:00Z)",
        "exit": 2,
    },
    {
        "input": "`reset-to-time` with a time in the future (no --force)",
        "command": "mirror failover reset-to-time --config m.yaml --group g --time 2999-01-01T00:00:00Z",
        "message": "mirror: --time 2999-01-01T00:00:00Z is … s in the future: every partition would move to its end, "
        "skipping everything not yet consumed; check the time (no offset means UTC) or add --force",
        "exit": 2,
    },
    {
        "input": "`switchover` when a switchover of the flow is under way (its state file exists) without --resume",
        "command": "mirror failover switchover --config m.yaml --group g",
        "files": {"switchover-east-west.state.json": "{}"},
        "message": "mirror: a switchover of flow east-west is under way or done (state switchover-east-west.state.json): "
        "add --resume to continue it, or remove the file to start again",
        "exit": 2,
    },
    {
        "input": "`switchover --resume` without a state file",
        "command": "mirror failover switchover --config m.yaml --group g --resume",
        "message": "mirror: --resume: no switchover state at switchover-east-west.state.json; run without --resume to "
        "start one",
        "exit": 2,
    },
    {
        "input": "`failback tail` with both destinations",
        "command": "mirror failback tail --config m.yaml --out tail.jsonl --to-topic",
        "message": "mirror: give --out FILE or --to-topic, not both",
        "exit": 2,
    },
    {
        "input": "`failback plan` (or `plan --wipe`) before the tail is exported (no manifest): the wipe is refused",
        "command": "mirror failback plan --config m.yaml --wipe",
        "message": "mirror: refusing to plan a wipe of flow east-west's old source: the tail is not exported (run "
        "`mirror failback tail --out FILE` or `--to-topic`, then give its manifest with --tail-manifest)",
        "exit": 1,
    },
    {
        "input": "`mirror topology` for a cluster that is not defined",
        "command": "mirror topology --config m.yaml --cluster nope",
        "message": "mirror: cluster 'nope' is not defined (defined: east, west)",
        "exit": 2,
    },
    # ------------------------------------------------------------------ ports
    {
        "input": "`mirror run`: the metrics port is taken",
        "command": "mirror run --config m.yaml",
        "busy_port": "mirror",
        "message": "mirror: port {port} on 127.0.0.1 is already in use (mirror.metrics_port); stop what holds it or choose "
        "another port (0 = any free one)",
        "exit": 2,
        "service": True,
    },
    {
        "input": "`monitor run`: the metrics port is taken",
        "command": "monitor run --config m.yaml",
        "busy_port": "monitor",
        "message": "monitor: port {port} on 127.0.0.1 is already in use (monitor.metrics_port); stop what holds it or choose "
        "another port (0 = any free one)",
        "exit": 2,
        "service": True,
    },
    {
        "input": "`canary run`: the metrics port is taken",
        "command": "canary run --config m.yaml",
        "busy_port": "canary",
        "message": "canary: port {port} on 127.0.0.1 is already in use (canary.metrics_port); stop what holds it or choose "
        "another port (0 = any free one)",
        "exit": 3,
        "service": True,
    },
    # ------------------------------------------------------------------ clusters that are away
    {
        "input": "`mirror run`: the source cluster stays away longer than `mirror.max_unreachable_s`",
        "command": "mirror run --config m.yaml",
        "config": _with("mirror: {max_unreachable_s: 1, metrics_port: null}\n"),
        "message": "mirror: source cluster 'east' at 127.0.0.1:9 has been unreachable for … s (mirror.max_unreachable_s = 1); giving up",
        "exit": 3,
        "service": True,
    },
    {
        "input": "`monitor lag`: the clusters are away",
        "command": "monitor lag --config m.yaml --timeout 3",
        "message": "monitor: cannot reach source cluster 'east' at 127.0.0.1:9 within 1 s: …",
        "exit": 3,
    },
    {
        "input": "`monitor lag --json`: the clusters are away",
        "command": "monitor lag --config m.yaml --timeout 3 --json",
        "message": "monitor: cannot reach source cluster 'east' at 127.0.0.1:9 within 1 s: …",
        "exit": 3,
        "json": True,
    },
    {
        "input": "`mirror failover check`: the clusters are away",
        "command": "mirror failover check --config m.yaml --timeout 3",
        "message": "mirror: cannot reach source cluster 'east' at 127.0.0.1:9 within 1 s: …",
        "exit": 3,
    },
    {
        "input": "`mirror topology`: the cluster is away",
        "command": "mirror topology --config m.yaml --timeout 3",
        "message": "mirror: cannot reach cluster 'west' at 127.0.0.1:19 within 1 s: …",
        "exit": 3,
    },
    {
        "input": "`canary check`: the source cluster is away",
        "command": "canary check --config m.yaml --timeout 2",
        "config": _with("canary: {connect_timeout_s: 1}\n"),
        "stream": "stdout",
        "message": "UNKNOWN east→west cannot reach source cluster 'east' at 127.0.0.1:9: …",
        "exit": 3,
    },
    {
        "input": "`mirror failover translate`: the target cluster is away",
        "command": "mirror failover translate --config m.yaml --group g",
        "message": "mirror: cannot reach cluster 'west' at 127.0.0.1:19",
        "exit": 3,
    },
    # ------------------------------------------------------------------ the preflight
    {
        "input": "`mirrorwatch doctor`: config file that does not exist",
        "command": "mirrorwatch doctor --config nope.yaml",
        "message": "mirrorwatch: cannot read config file nope.yaml: No such file or directory",
        "exit": 3,
    },
    {
        "input": "`mirrorwatch doctor --flow` with a flow the config does not define",
        "command": "mirrorwatch doctor --config m.yaml --flow nope",
        "message": "mirrorwatch: flow 'nope' is not defined (defined: east-west)",
        "exit": 3,
    },
    # ------------------------------------------------------------------ writing a config from MM2's (docs/mirrormaker2.md)
    {
        "input": "`config from-strimzi`: the file does not exist",
        "command": "mirrorwatch config from-strimzi nope.yaml",
        "message": "mirrorwatch: cannot read nope.yaml: No such file or directory",
        "exit": 2,
    },
    {
        "input": "`config from-strimzi`: a binary file",
        "command": "mirrorwatch config from-strimzi logo.png",
        "files": {"logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"},
        "message": "mirrorwatch: logo.png is not UTF-8 text (byte 0): a binary file given by mistake? Give the text file",
        "exit": 2,
    },
    {
        "input": "`config from-strimzi`: not YAML",
        "command": "mirrorwatch config from-strimzi mm2.yaml",
        "files": {"mm2.yaml": "kind: KafkaMirrorMaker2\nspec: [mirrors\n"},
        "message": "mirrorwatch: mm2.yaml line 3: not valid YAML: …",
        "exit": 2,
    },
    {
        "input": "`config from-strimzi`: a resource of another kind (KafkaConnect)",
        "command": "mirrorwatch config from-strimzi connect.yaml",
        "files": {"connect.yaml": "apiVersion: kafka.strimzi.io/v1\nkind: KafkaConnect\nmetadata: {name: c}\n"},
        "message": "mirrorwatch: connect.yaml: no KafkaMirrorMaker2 resource (it holds KafkaConnect); give the file that "
        "defines the KafkaMirrorMaker2",
        "exit": 2,
    },
    {
        "input": "`config from-strimzi`: a mirror naming a cluster alias that `spec.clusters` does not define",
        "command": "mirrorwatch config from-strimzi mm2.yaml",
        "files": {"mm2.yaml": KMM2_V1BETA2},
        "message": "mirrorwatch: KafkaMirrorMaker2 my-mm2 spec.mirrors[0].sourceCluster: cluster alias 'cluster-x' is "
        "not defined in spec.clusters (defined: cluster-a, cluster-b)",
        "exit": 2,
    },
    {
        "input": "`config from-mm2`: the file does not exist",
        "command": "mirrorwatch config from-mm2 nope.properties",
        "message": "mirrorwatch: cannot read nope.properties: No such file or directory",
        "exit": 2,
    },
    {
        "input": "`config from-mm2`: a Kafka client properties file (no `clusters =`)",
        "command": "mirrorwatch config from-mm2 client.properties",
        "files": {"client.properties": "bootstrap.servers = east-1:9092\nsecurity.protocol = SSL\n"},
        "message": "mirrorwatch: client.properties: no 'clusters = ...' line: not an MM2 dedicated-mode mm2.properties "
        "(the file connect-mirror-maker.sh runs)",
        "exit": 2,
    },
    {
        "input": "`config from-mm2`: a YAML file (the mirrorwatch config itself)",
        "command": "mirrorwatch config from-mm2 m.yaml",
        "message": "mirrorwatch: m.yaml: 'clusters' names no cluster: the file is YAML, not an MM2 mm2.properties "
        "(Java properties)",
        "exit": 2,
    },
    {
        "input": "`config from-mm2`: a flow naming a cluster that `clusters` does not list",
        "command": "mirrorwatch config from-mm2 mm2.properties",
        "files": {"mm2.properties": "clusters = east, west\neast->wset.enabled = true\n"},
        "message": "mirrorwatch: mm2.properties: east->wset.enabled names cluster 'wset', which 'clusters' does not "
        "list (east, west)",
        "exit": 2,
    },
    {
        "input": "`config from-mm2`: no enabled flow",
        "command": "mirrorwatch config from-mm2 mm2.properties",
        "files": {"mm2.properties": "clusters = east, west\neast.bootstrap.servers = e:9092\n"},
        "message": "mirrorwatch: mm2.properties: no enabled flow: no '<source>-><target>.enabled = true' line for the "
        "clusters east, west",
        "exit": 2,
    },
]

# ---------------------------------------------------------------------- on the SASL_SSL clusters
# These need the session's SASL_SSL pair (tests/support/sasl.py): tests/test_security.py and tests/test_doctor.py run
# them (``test`` names which) and match their answers with ``message_pattern``. The page shows them for the
# default names (cluster east, topic orders, ...); a test builds them for the names it uses. ``{port}``
# stands for the cluster's port.
_AUTH = (
    "authentication failed on cluster 'east' at 127.0.0.1:{port} as user '%s': SASL authentication error: "
    "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512; "
    "check sasl.username, sasl.password and sasl.mechanism (see docs/security.md)"
)
_TLS = (
    "TLS handshake with cluster 'east' at 127.0.0.1:{port} failed: SSL handshake failed: error:0A000086:SSL "
    "routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location "
    "is correctly configured or root CA certificates are installed (install ca-certificates package); check "
    "ssl.ca.location (the CA that signed the broker's certificate) (see docs/security.md)"
)
_FAILURES = {
    "wrong-password": ("a wrong SASL password", _AUTH % "mirror"),
    "unknown-user": ("an unknown SASL user (`ghost`)", _AUTH % "ghost"),
    "untrusted-ca": ("`ssl.ca.location` is a CA that did not sign the broker certificate", _TLS),
}
# tool: (command, what its line starts with, exit code)
_TOOLS = {
    "mirror": ("mirror run --config m.yaml", "mirror: ", 1),
    "canary": ("canary check --config m.yaml --timeout 3", "UNKNOWN east→west ", 3),
    "monitor": ("monitor lag --config m.yaml", "monitor: ", 3),
    "failover": ("mirror failover check --config m.yaml", "mirror: ", 3),
}
_TESTED = [
    ("mirror", "wrong-password"),
    ("mirror", "unknown-user"),
    ("mirror", "untrusted-ca"),
    ("canary", "wrong-password"),
    ("canary", "unknown-user"),
    ("canary", "untrusted-ca"),
    ("monitor", "wrong-password"),
    ("failover", "wrong-password"),
]
CREDENTIAL_CASES: list[dict] = [
    {
        "tool": tool,
        "kind": kind,
        "input": f"`{_TOOLS[tool][0].split(' --')[0]}`: {_FAILURES[kind][0]}",
        "command": _TOOLS[tool][0],
        "message": _TOOLS[tool][1] + _FAILURES[kind][1],
        "exit": _TOOLS[tool][2],
        "stream": "stdout" if tool == "canary" else "stderr",
        "test": "tests/test_security.py::test_credentials_and_tls_failures_are_one_line",
    }
    for tool, kind in _TESTED
]


def missing_acl_cases(config) -> list[dict]:
    """One case per ACL the mirror needs (``mirrorwatch.core.acls``): ``mirror run`` without it stops, naming it."""
    from mirrorwatch.core.acls import PREFIXED, mirror_needs

    _, flow = config.flow(None)
    cases = []
    for need in (n for n in mirror_needs(config, None) if n.required):
        alias = flow.source if need.role == "source" else flow.target
        name = need.name + ("…" if need.pattern == PREFIXED else "")  # the topic it refused, under the prefix
        cases.append(
            {
                "need": need,
                "input": f"`mirror run`: the principal lacks {need.describe()} on the {need.role} ({need.why})",
                "command": "mirror run --config m.yaml",
                "exit": 1,
                "message": f"mirror: not authorised to {need.operation} {need.resource_type} {name} on cluster "
                f"'{alias}' (principal User:mirror): grant it (see docs/security.md)",
                "test": "tests/test_security.py::test_each_missing_mirror_acl_is_named",
            }
        )
    return cases


def transactional_id_case(source: str = "east", target: str = "west", group: str | None = None) -> dict:
    """``mirror.delivery: exactly_once`` without WRITE on its transactional id: ``mirror run`` stops at start, before
    anything reaches the target (``…``: the instance, mirror.instance_id or the host name)."""
    group = group or f"mirrorwatch-{source}-{target}"
    return {
        "input": "`mirror run` with `delivery: exactly_once`: the principal has every ACL but WRITE on its "
        "transactional id",
        "command": "mirror run --config m.yaml",
        "exit": 1,
        "message": f"mirror: not authorised to WRITE transactional id {group}-… on cluster '{target}' "
        "(principal User:mirror): grant it (see docs/security.md)",
        "test": "tests/test_security.py::test_exactly_once_without_transactional_id_acl_stops_at_start",
    }


def doctor_cases(
    source: str = "east", target: str = "west", topic: str = "orders", canary: str = "mw.canary"
) -> dict[str, dict]:
    """The doctor's answers: rows of its table, shown as "check | status | detail | fix" (its --json "checks")."""
    grant = (
        "kafka-acls.sh --bootstrap-server 127.0.0.1:{port} --command-config <admin.properties> --add "
        "--allow-principal User:mirror --operation "
    )
    group = f"mirrorwatch-{source}-{target}"
    test = "tests/test_doctor.py::test_sasl_pair_names_the_missing_acl_and_a_wrong_password"
    acl_test = "tests/test_doctor.py::test_sasl_pair_names_missing_write_and_group_read"
    rows = {
        "wrong-password": (
            "a cluster's SASL password is wrong",
            test,
            f"connect and authenticate | MISSING | authentication failed on cluster '{source}' at "
            "127.0.0.1:{port} as user 'mirror': … | set the principal's sasl.username / sasl.password "
            "(and sasl.mechanism) for this cluster",
        ),
        "read-topic": (
            "the principal lacks READ on a mirrored topic",
            test,
            f"ACL READ topic {topic} (mirror, monitor) | MISSING | refused: … | {grant}Read --topic '{topic}'",
        ),
        "write-target": (
            "the principal lacks WRITE on the target topics (prefixed)",
            acl_test,
            f"ACL WRITE topic {source}.* (prefixed) (mirror) | MISSING | refused… | "
            f"{grant}Write --topic '{source}.' --resource-pattern-type prefixed",
        ),
        "write-canary": (
            "the principal lacks WRITE on the canary topic",
            acl_test,
            f"ACL WRITE topic {canary} (canary) | MISSING | refused… | {grant}Write --topic '{canary}'",
        ),
        "read-group": (
            "the principal lacks READ on the mirror's group",
            acl_test,
            f"ACL READ group {group} (mirror) | MISSING | refused… | {grant}Read --group '{group}'",
        ),
        "write-transactional-id": (
            "`delivery: exactly_once`, the principal lacks WRITE on the transactional ids (prefixed)",
            "tests/test_doctor.py::test_sasl_pair_exactly_once_names_the_missing_transactional_id_acl",
            f"ACL WRITE transactional id {group}-* (prefixed) (mirror) | MISSING | refused: … | "
            f"{grant}Write --transactional-id '{group}-' --resource-pattern-type prefixed",
        ),
    }
    return {
        key: {
            "input": f"`mirrorwatch doctor`: {what}",
            "command": "mirrorwatch doctor --config m.yaml --json",
            "message": message,
            "exit": 2,
            "test": where,
            "stream": "stdout",
        }
        for key, (what, where, message) in rows.items()
    }


# ---------------------------------------------------------------------- failover refusals (fail closed)
# A check that permits an action (READY, --apply, the group sync, a wipe) and cannot read what it needs refuses,
# naming what it could not read. Run on real brokers by the test each case names (the group is `g` here).
FAILOVER_REFUSALS: dict[str, dict] = {
    "apply-denied": {
        "input": "`--apply` while the principal may not describe the group on the target (no group ACL)",
        "command": "mirror failover reset-to-time --config m.yaml --group g --time 2020-01-01T00:00:00Z --apply",
        "message": "mirror: refusing to apply offsets for group 'g': cannot read whether group 'g' is active on "
        "'west': GROUP_AUTHORIZATION_FAILED (…)",
        "exit": 3,
        "test": "tests/test_failover_refusals.py::test_an_acl_denial_refuses_apply_in_one_line",
    },
    "switchover-active": {
        "input": "`switchover` while a group to move is active on the target",
        "command": "mirror failover switchover --config m.yaml --group g",
        "message": "mirror: switchover of flow east-west stopped: group 'g' is active on 'west': stop its consumers "
        "there first; fix it and add --resume",
        "exit": 1,
        "test": "tests/test_switchover.py::test_a_group_active_on_the_target_blocks_until_stopped",
    },
    "plan-grown": {
        "input": "`failback plan` when the old source holds records written after the export",
        "command": "mirror failback plan --config m.yaml --tail-manifest tail.jsonl.manifest.json",
        "message": "mirror: refusing to plan a wipe: the old source holds records the export does not (…): export "
        "the tail again",
        "exit": 1,
        "test": "tests/test_failback_tail.py::test_failback_plan_refuses_until_the_whole_tail_is_saved",
    },
}


def sasl_cases() -> list[dict]:
    """Every case on the SASL_SSL clusters, with the documented default names (the page's second table)."""
    from mirrorwatch.core.config_loading import config_from_dict

    config = config_from_dict(
        {
            "clusters": {"east": {"bootstrap.servers": "127.0.0.1:9"}, "west": {"bootstrap.servers": "127.0.0.1:19"}},
            "flows": {"east-west": {"source": "east", "target": "west", "topics": ["orders"]}},
        }
    )
    return CREDENTIAL_CASES + missing_acl_cases(config) + [transactional_id_case()] + list(doctor_cases().values())


def message_pattern(message: str) -> re.Pattern:
    """The regex of a case's message: ``…`` is any text, ``{port}`` a port number, the rest literal."""
    parts = [re.escape(part).replace(re.escape("{port}"), r"\d+") for part in message.split("…")]
    return re.compile(".*?".join(parts), re.S)


def render() -> str:
    out = [
        "# Bad inputs and faults: what each command says, and its exit code",
        "",
        "Generated from `tests/error_cases.py`, whose every case `tests/test_error_cases.py` runs against the real",
        "commands (`.venv/bin/python -m tests.error_cases > docs/errors.md` regenerates this page; a test fails",
        "when it is stale). `…` stands for text that varies (a client library's reason, a duration); `{port}` for",
        "the port that was taken. Clusters at 127.0.0.1:9 and :19 stand for clusters that are away. Unless a",
        "row says otherwise the line goes to stderr; with `--json`, stdout also holds exactly one JSON object",
        '`{"error": <the line without the program name>, "exit_code": <n>, ...}`.',
        "",
        "Exit codes: `mirror`, `monitor` 0 fine, 1 the mirror stopped on a record it cannot write, on an ACL or",
        "credentials refused / internal error, 2 bad input, 3 a cluster is unreachable (for `mirror failover` and",
        "`mirror failback`: also a check that could not read what it needs, so the action is refused; see the last",
        "table); `mirror run` also 4 source",
        "records lost before they were mirrored (`on_records_lost: stop`), 5 exactly-once refused (fenced 5 times within",
        "5 min: another process runs with its transactional id; give each its own `mirror.instance_id`); `canary` 0 OK,",
        "1 WARNING, 2 CRITICAL, 3 UNKNOWN (bad input too); `mirrorwatch doctor` 3 bad config;",
        "`mirrorwatch config from-strimzi`/`from-mm2` 0 written, 2 input it cannot use. A command whose extra is not",
        "installed (`monitor dashboard`: `page`, `monitor analyze`: `analytics`; pyproject.toml) exits 2 with one line:",
        "`monitor: monitor dashboard needs the 'page' extra (streamlit, altair, pandas not installed): pip install",
        "'mirrorwatch[page]' (or run it in the mirrorwatch-page image)` (tests/test_base_install.py).",
        "",
        "| # | input | command | message | exit |",
        "|---|---|---|---|---|",
    ]
    for i, case in enumerate(CASES, 1):
        where = (
            " (stdout)"
            if case.get("stream") == "stdout"
            else (" (+ one JSON object on stdout)" if case.get("json") else "")
        )
        message = case["message"].replace("|", "\\|")
        out.append(f"| {i} | {case['input']} | `{case['command']}` | `{message}`{where} | {case['exit']} |")
    out += [
        "",
        "## Credentials, TLS and ACLs (on the SASL_SSL clusters)",
        "",
        "Run on the real SASL_SSL test clusters (SCRAM-SHA-512 over TLS, StandardAuthorizer; see",
        "`docs/security.md`) by the test each row names, from the same table in `tests/error_cases.py`. Shown for",
        "a flow `east → west` of topic `orders` under the prefix policy, principal `User:mirror`; `{port}` is the",
        "cluster's port. A missing ACL is one row per ACL the mirror needs (`mirrorwatch/core/acls.py`); the",
        "doctor's rows are lines of its table, `check | status | detail | fix` (its `--json` `checks`).",
        "",
        "| # | input | command | message | exit | test |",
        "|---|---|---|---|---|---|",
    ]
    for i, case in enumerate(sasl_cases(), len(CASES) + 1):
        where = " (stdout)" if case.get("stream") == "stdout" else ""
        message = case["message"].replace("|", "\\|")
        test = case["test"].split("::")[1]
        out.append(f"| {i} | {case['input']} | `{case['command']}` | `{message}`{where} | {case['exit']} | `{test}` |")
    out += [
        "",
        "## Failover refusals (fail closed)",
        "",
        "A check whose answer permits an action (READY, `--apply`, the checkpoint emitter's group sync, a failback",
        "wipe) refuses when it cannot read what it needs: a timeout, a frozen broker or an authorization error is",
        'never read as "nobody there". Run on the real clusters by the test each row names; see `docs/dr.md`.',
        "",
        "| # | input | command | message | exit | test |",
        "|---|---|---|---|---|---|",
    ]
    first = len(CASES) + len(sasl_cases()) + 1
    for i, case in enumerate(FAILOVER_REFUSALS.values(), first):
        message = case["message"].replace("|", "\\|")
        test = case["test"].split("::")[1]
        out.append(f"| {i} | {case['input']} | `{case['command']}` | `{message}` | {case['exit']} | `{test}` |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
