"""Pure parts of the disaster-recovery tools, table-driven: the reverse flow's config keeps no literal secret; the
failback's reverse flow copies everything the new primary holds."""

from __future__ import annotations

import pytest
import yaml

from mirrorwatch.mirror.failover.failback_plan import failback_reverse_config
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


@pytest.mark.parametrize(
    "forward, expected",
    [
        # prefix forward: west holds east.orders (the copies) and its own orders (written after the failover);
        # both come home under their names, the copies into east.orders, west's own into the wiped orders
        (
            "{source: east, target: west, topics: [orders], exclude: [tmp.*]}",
            {"policy": "identity", "topics": ["orders", r"east\.(?:orders)"], "exclude": ["tmp.*", r"east\.(?:tmp.*)"]},
        ),
        (
            "{source: east, target: west, topics: [orders], separator: _}",
            {"policy": "identity", "topics": ["orders", "east_(?:orders)"], "separator": "_"},
        ),
        # identity forward: identity's loop guard would skip the records from east, which the wipe deleted there
        (
            "{source: east, target: west, topics: [orders], policy: identity}",
            {"policy": "prefix", "topics": ["orders"]},
        ),
        # MirrorMaker 2 forward: the reverse flow is run by our engine (its mirror section left out)
        (
            "{source: east, target: west, topics: [orders], mirror: {kind: mm2, source_alias: e1, separator: _}}",
            {"policy": "identity", "topics": ["orders", "e1_(?:orders)"]},
        ),
    ],
)
def test_failback_reverse_flow_copies_everything_the_new_primary_holds(tmp_path, forward, expected):
    path = tmp_path / "m.yaml"
    path.write_text(CONFIG.replace(CONFIG.splitlines()[-1], f"  east-west: {forward}"))
    flows = failback_reverse_config(str(path), "east-west")["flows"]
    assert flows == {"west-east": {"source": "west", "target": "east", **expected}}
