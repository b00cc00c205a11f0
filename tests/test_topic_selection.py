"""The one topic-selection rule (core.topic_selection), as the engine, the monitor and the canary use it."""

from __future__ import annotations

import pytest

from mirrorwatch.core.config_loading import config_from_dict
from mirrorwatch.core.topic_selection import TopicFilter, measured_topics, mirrored_topics, own_topics, policy_of


def config(policy: str = "prefix", topics=("orders", "payments\\..*"), exclude=("payments\\.secret",)):
    return config_from_dict(
        {
            "clusters": {"east": {"bootstrap.servers": "e:9092"}, "west": {"bootstrap.servers": "w:9092"}},
            "flows": {
                "ew": {
                    "source": "east",
                    "target": "west",
                    "topics": list(topics),
                    "exclude": list(exclude),
                    "policy": policy,
                }
            },
            "mirror": {"heartbeats_topic": "heartbeats"},
            "canary": {"topic": "mw.canary"},
        }
    )


CASES = [
    # (policy, topic, mirrored, why)
    ("prefix", "orders", True, "include regex, full match"),
    ("prefix", "orders2", False, "include regexes match in full, not as a prefix"),
    ("prefix", "payments.eu", True, "include regex"),
    ("prefix", "payments.secret", False, "exclude regex beats include"),
    ("prefix", "heartbeats", True, "mirrorwatch's heartbeats topic is always mirrored"),
    ("prefix", "mw.canary", True, "mirrorwatch's canary topic is always mirrored"),
    ("prefix", "__consumer_offsets", False, "internal"),
    ("prefix", "mw.offset-syncs.east.internal", False, "internal"),
    ("prefix", "west.orders", False, "mirrored from the target: would loop back"),
    ("identity", "west.orders", False, "no include regex matches it"),
    ("identity", "orders", True, "include regex"),
    ("prefix", "billing", False, "no include regex"),
]


@pytest.mark.parametrize("policy,topic,mirrored,why", CASES)
def test_rule(policy, topic, mirrored, why):
    cfg = config(policy)
    flow = cfg.flows["ew"]
    assert TopicFilter.of(cfg, flow).matches(topic) is mirrored, why
    assert (topic in mirrored_topics(cfg, flow, [topic])) is mirrored, why


def test_exclude_applies_to_own_topics_too():
    cfg = config(exclude=("heartbeats",))
    assert not TopicFilter.of(cfg, cfg.flows["ew"]).matches("heartbeats")


def test_sorted_and_policy():
    cfg = config()
    flow = cfg.flows["ew"]
    assert mirrored_topics(cfg, flow, ["payments.eu", "orders", "west.x", "heartbeats"]) == [
        "heartbeats",
        "orders",
        "payments.eu",
    ]
    assert policy_of(flow).target_topic("orders") == "east.orders"
    assert own_topics(cfg, flow) == {"heartbeats", "mw.canary"}


def test_a_flow_not_owning_the_internal_topics_leaves_them_out():
    # Two flows on one pair: only the owner mirrors heartbeats and the canary topic.
    cfg = config()
    raw = cfg.flows["ew"].model_copy(update={"internal_topics": False})
    assert own_topics(cfg, raw) == frozenset()
    assert mirrored_topics(cfg, raw, ["orders", "heartbeats", "mw.canary"]) == ["orders"]


def test_the_monitor_measures_the_mirrored_topics_without_its_own():
    # heartbeats and the canary have their own figures; their steady trickle would keep an idle mirror's lag off 0
    cfg = config()
    flow = cfg.flows["ew"]
    topics = ["orders", "heartbeats", "mw.canary", "payments.secret"]
    assert mirrored_topics(cfg, flow, topics) == ["heartbeats", "mw.canary", "orders"]
    assert measured_topics(cfg, flow, topics) == ["orders"]
