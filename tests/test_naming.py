import pytest

from mirrorwatch.core.naming import ReplicationPolicy, is_internal, mirror_group, offset_syncs_topic


@pytest.mark.parametrize(
    "kind,sep,topic,expected",
    [
        ("prefix", ".", "orders", "east.orders"),
        ("prefix", "_", "orders", "east_orders"),
        ("identity", ".", "orders", "orders"),
    ],
)
def test_target_topic_and_back(kind, sep, topic, expected):
    policy = ReplicationPolicy(kind, "east", "west", sep)
    assert policy.target_topic(topic) == expected
    assert policy.source_topic(expected) == topic


@pytest.mark.parametrize(
    "topic,internal",
    [
        ("__consumer_offsets", True),
        ("mw.offset-syncs.east.internal", True),
        ("east.checkpoints.internal", True),
        ("orders", False),
        ("heartbeats", False),
    ],
)
def test_internal_topics(topic, internal):
    assert is_internal(topic) is internal


def test_loop_prevention_and_names():
    policy = ReplicationPolicy("prefix", "east", "west")
    assert policy.came_from_target("west.orders") and not policy.came_from_target("orders")
    assert not ReplicationPolicy("identity", "east", "west").came_from_target("west.orders")
    assert policy.source_topic("west.orders") is None
    assert mirror_group("east", "west") == "mirrorwatch-east-west" and mirror_group("e", "w", "g") == "g"
    assert offset_syncs_topic("east") == "mw.offset-syncs.east.internal"
