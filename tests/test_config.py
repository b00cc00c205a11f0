"""Config: bad files give one exact line and exit 2; env overrides; secrets never shown."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import click
import pytest

from mirrorwatch.core.cli import run_click
from mirrorwatch.core.config import ConfigError
from mirrorwatch.core.config_loading import load_config

GOOD = """
clusters:
  east: {bootstrap.servers: "127.0.0.1:1"}
  west: {bootstrap.servers: "127.0.0.1:2"}
flows:
  ew: {source: east, target: west}
"""

BAD_FILES = [
    ("clusters: [1, 2", "{path} line 1: invalid YAML: expected ',' or ']', but got '<stream end>'"),
    ("- just\n- a list\n", "{path}: the top level must be a mapping with 'clusters:' (and 'flows:', ...)"),
    ("flows: {}\n", "config error in {path}: clusters: required key is missing"),
    (GOOD + "mirorr: {}\n", "config error in {path}: mirorr: unknown key"),
    (GOOD + "mirror: {commit_intervall_s: 5}\n", "config error in {path}: mirror.commit_intervall_s: unknown key"),
    (
        GOOD + "mirror: {commit_interval_s: -1}\n",
        "config error in {path}: mirror.commit_interval_s: Input should be greater than 0 (got -1)",
    ),
    (
        GOOD + "mirror: {batch_size: lots}\n",
        "config error in {path}: mirror.batch_size: Input should be a valid integer, unable to parse string as an integer (got 'lots')",
    ),
    (
        GOOD.replace("target: west", "target: wset"),
        "config error in {path}: flows.ew.target: cluster 'wset' is not defined (defined: east, west)",
    ),
    (
        GOOD.replace("target: west", "target: east"),
        "config error in {path}: flows.ew.target: must differ from the source cluster",
    ),
    (
        GOOD.replace("target: west}", "target: west, topics: ['orders(']}"),
        "config error in {path}: flows.ew.topics: bad regex 'orders(': missing ), unterminated subpattern at position 6",
    ),
    (
        GOOD.replace('east: {bootstrap.servers: "127.0.0.1:1"}', "east: {security.protocol: SSL}"),
        "config error in {path}: clusters.east: 'bootstrap.servers' is required",
    ),
    (
        GOOD.replace('east: {bootstrap.servers: "127.0.0.1:1"}', "east: {bootstrap.servers: x, ssl: {a: 1}}"),
        "config error in {path}: clusters.east: property 'ssl' must be a string, number or boolean",
    ),
    (
        GOOD.replace("target: west}", "target: west, policy: mirror}"),
        "config error in {path}: flows.ew.policy: Input should be 'prefix' or 'identity' (got 'mirror')",
    ),
    (
        GOOD + "monitor: {groups: [{cluster: north, group: g}]}\n",
        "config error in {path}: monitor.groups.0.cluster: cluster 'north' is not defined (defined: east, west)",
    ),
    (
        GOOD + "canary: {interval_s: 0.5}\n",
        "config error in {path}: canary.interval_s: Input should be greater than or equal to 1 (got 0.5)",
    ),
    (
        GOOD + "monitor: {interval_s: -5}\n",
        "config error in {path}: monitor.interval_s: Input should be greater than 0 (got -5)",
    ),
    (
        GOOD.replace("target: west}", "target: west, policy: identity}") + "mirror: {provenance_header: false}\n",
        "config error in {path}: mirror.provenance_header: flow 'ew' uses the identity policy, which needs the header to "
        "stop active-active loops; remove the setting or set it to true",
    ),
    (
        GOOD + "monitor: {hanging_transaction_s: 0}\n",
        "config error in {path}: monitor.hanging_transaction_s: Input should be greater than 0 (got 0)",
    ),
    (
        GOOD + "monitor: {hanging_transaction_s: soon}\n",
        "config error in {path}: monitor.hanging_transaction_s: Input should be a valid number, unable to parse string "
        "as a number (got 'soon')",
    ),
    (
        GOOD + "mirror: {transaction_hold_s: 0.5}\n",
        "config error in {path}: mirror.transaction_hold_s: Input should be less than or equal to 0.1 (got 0.5)",
    ),
    (
        GOOD + "mirror: {transaction_interval_s: 0.1, transaction_min_interval_s: 0.5}\n",
        "config error in {path}: mirror: transaction_min_interval_s (0.5) must not be above transaction_interval_s "
        "(0.1)",
    ),
    (
        GOOD + "mirror: {delivery: exactly_once}\nmonitor: {hanging_transaction_s: 10}\n",
        "config error in {path}: monitor.hanging_transaction_s: 10 s is not longer than mirror.transaction_timeout_s "
        "(10 s): a crashed mirror's transaction, which the target aborts by then, would be called hanging; raise it",
    ),
    (
        GOOD + "monitor: {history_raw_days: 3, analytics: {every_s: 3600, lookback_days: 7}}\n",
        "config error in {path}: monitor.analytics.lookback_days: 7 days is longer than monitor.history_raw_days (3): "
        "the scheduled job expires raw samples after that, so it would analyse less than asked; lower it or raise "
        "history_raw_days",
    ),
]


@click.command()
@click.option("--config", required=True)
def _probe(config):
    load_config(config)


_probe_main = run_click(_probe, "probe")


@pytest.mark.parametrize("text,expected", BAD_FILES, ids=[f"bad{i}" for i in range(len(BAD_FILES))])
def test_bad_file_gives_one_exact_line_and_exit_2(tmp_path, capsys, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as info:
        _probe_main(["--config", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.strip() == "probe: " + expected.format(path=path)


def test_missing_file_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        _probe_main(["--config", str(tmp_path / "nope.yaml")])
    assert info.value.code == 2
    assert (
        capsys.readouterr().err.strip()
        == f"probe: cannot read config file {tmp_path / 'nope.yaml'}: No such file or directory"
    )


def test_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        _probe_main(["--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No such option" in err and "--bogus" in err


def test_console_script_exits_2_without_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(GOOD + "mirorr: {}\n")
    bin_dir = Path(sys.executable).parent
    proc = subprocess.run([str(bin_dir / "mirrorwatch-kafka"), "--nope"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


def test_defaults_and_flow_lookup(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD)
    config = load_config(path, environ={})
    assert config.mirror.commit_interval_s == 5.0
    name, flow = config.flow(None)
    assert name == "ew" and flow.policy == "prefix" and flow.separator == "."
    with pytest.raises(ConfigError, match="flow 'nope' is not defined"):
        config.flow("nope")


def test_a_transaction_interval_below_the_default_minimum_still_loads(tmp_path):
    """A config written before transaction_min_interval_s existed, with a shorter interval than its default."""
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD + "mirror: {delivery: exactly_once, transaction_interval_s: 0.005}\n")
    assert load_config(path, environ={}).mirror.transaction_interval_s == 0.005


def test_environment_overrides(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(GOOD)
    config = load_config(
        path,
        environ={
            "MIRRORWATCH__MIRROR__COMMIT_INTERVAL_S": "1.5",
            "MIRRORWATCH__CLUSTERS__EAST__BOOTSTRAP_SERVERS": "10.0.0.1:9092",
            "MIRRORWATCH__CLUSTERS__WEST__SASL_PASSWORD": "hunter22",
            "MIRRORWATCH__FLOWS__EW__POLICY": "identity",
        },
    )
    assert config.mirror.commit_interval_s == 1.5
    assert config.clusters["east"].bootstrap_servers == "10.0.0.1:9092"
    assert config.clusters["west"].properties["sasl.password"] == "hunter22"
    assert config.flows["ew"].policy == "identity"
    with pytest.raises(ConfigError, match=r"mirror.commit_interval_s: Input should be greater than 0"):
        load_config(path, environ={"MIRRORWATCH__MIRROR__COMMIT_INTERVAL_S": "0"})


def test_variable_interpolation(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(
        GOOD.replace(
            'east: {bootstrap.servers: "127.0.0.1:1"}',
            'east: {bootstrap.servers: "127.0.0.1:1", sasl.password: "${EAST_PW}"}',
        )
    )
    assert load_config(path, environ={"EAST_PW": "s3cr3t!"}).clusters["east"].properties["sasl.password"] == "s3cr3t!"
    with pytest.raises(ConfigError, match="clusters.east.sasl.password: environment variable EAST_PW is not set"):
        load_config(path, environ={})


SASL = """
clusters:
  east:
    bootstrap.servers: "127.0.0.1:1"
    security.protocol: SASL_SSL
    sasl.mechanism: PLAIN
    sasl.username: alice
    sasl.password: "pa55-w0rd-east"
    ssl.key.password: "key-pass-east"
  west:
    bootstrap.servers: "127.0.0.1:2"
    sasl.oauthbearer.client.secret: "oauth-secret-west"
flows:
  ew: {source: east, target: west}
"""


def test_secrets_redacted_in_repr_str_and_logs(tmp_path, caplog):
    from mirrorwatch.core.redact import install_log_redaction

    path = tmp_path / "sasl.yaml"
    path.write_text(SASL)
    config = load_config(path, environ={})
    secrets = ["pa55-w0rd-east", "key-pass-east", "oauth-secret-west"]
    for text in (
        repr(config),
        str(config),
        repr(config.clusters["east"]),
        str(config.clusters),
        str(config.clusters["east"].redacted()),
    ):
        assert not any(s in text for s in secrets), text
    assert "alice" in repr(config)  # a user name is not a secret
    logger = logging.getLogger("mirrorwatch.test.redaction")
    install_log_redaction(logger)
    with caplog.at_level(logging.INFO, logger="mirrorwatch.test.redaction"):
        logger.info("connecting with %s", config.clusters["east"].properties)
        logger.warning("broker said: authentication failed for password pa55-w0rd-east")
    assert caplog.records and not any(s in caplog.text for s in secrets)
    assert "***" in caplog.text


def test_secret_value_in_a_type_error_is_masked(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(SASL.replace('sasl.password: "pa55-w0rd-east"', "sasl.password: [pa55-w0rd-east]"))
    with pytest.raises(SystemExit):
        _probe_main(["--config", str(path)])
    assert "pa55-w0rd-east" not in capsys.readouterr().err


def test_config_reference_is_current():
    from pathlib import Path

    from mirrorwatch.core.config_doc import render

    doc = Path(__file__).resolve().parents[1] / "docs" / "config.md"
    assert doc.read_text().strip() == render().strip(), (
        "regenerate: python -m mirrorwatch.core.config_doc > docs/config.md"
    )
