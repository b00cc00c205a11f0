"""Pure parts of the disaster-recovery tools, table-driven: the reverse flow's config keeps no literal secret."""

from __future__ import annotations

import pytest
import yaml

from mirrorwatch.mirror.failover.switchover import reverse_config

CONFIG = """clusters:
  east: {bootstrap.servers: "e:9092", sasl.username: mirror, sasl.password: s3cr3t-east}
  west: {bootstrap.servers: "w:9092", sasl.username: mirror, sasl.password: "${WEST_PASSWORD}"}
flows:
  east-west: {source: east, target: west, topics: [orders], group: mirror-ew, checkpoint_groups: [billing]}
"""


@pytest.mark.parametrize(
    "alias, key, expected",
    [
        ("east", "sasl.password", "${EAST_SASL_PASSWORD}"),  # a literal secret becomes a reference
        ("west", "sasl.password", "${WEST_PASSWORD}"),  # a reference stays as it was
        ("east", "sasl.username", "mirror"),  # not a secret
        ("west", "bootstrap.servers", "w:9092"),
    ],
)
def test_reverse_config_keeps_no_literal_secret(tmp_path, alias, key, expected):
    path = tmp_path / "m.yaml"
    path.write_text(CONFIG)
    reverse = reverse_config(str(path), "east-west")
    assert reverse["clusters"][alias][key] == expected
    assert "s3cr3t-east" not in yaml.safe_dump(reverse)
    # the reverse flow: target → source, the same topic selection, the mirror's own group name left to default
    assert reverse["flows"] == {
        "west-east": {"source": "west", "target": "east", "topics": ["orders"], "checkpoint_groups": ["billing"]}
    }
