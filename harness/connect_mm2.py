"""MirrorMaker 2 as most people run it: its three connectors in a real Kafka Connect distributed worker.

One worker for the test session (the ``mm2_connect`` fixture), on the target cluster, named as Strimzi names a
``KafkaMirrorMaker2``'s Connect cluster: group ``mirrormaker2-cluster`` and topics ``mirrormaker2-cluster-offsets``,
``-configs``, ``-status`` (Strimzi's defaults, see docs/mirrormaker2.md), connectors ``src->dst.MirrorSourceConnector``
etc. MM2's aliases (``src``, ``dst``) differ from mirrorwatch's cluster names (``east``, ``west``), as they do when
a user's MM2 predates mirrorwatch.

Tests that change the shared connectors (pause, a failing connector) put them back before they end.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mirrorwatch.localkafka.connect import LocalConnectWorker, mirror_connector_configs

from .helpers import admin, create_topic, end_offsets, produce_numbered
from .mirror_harness import wait_until

SOURCE_ALIAS, TARGET_ALIAS = "src", "dst"
CONNECT_GROUP = "mirrormaker2-cluster"
SOURCE_CONNECTOR = f"{SOURCE_ALIAS}->{TARGET_ALIAS}.MirrorSourceConnector"
CHECKPOINT_CONNECTOR = f"{SOURCE_ALIAS}->{TARGET_ALIAS}.MirrorCheckpointConnector"
HEARTBEAT_CONNECTOR = f"{SOURCE_ALIAS}->{TARGET_ALIAS}.MirrorHeartbeatConnector"
# short enough for a test to see a new group discovered, long enough to see it "not yet discovered" first: the
# checks in between take ~10 s on a quiet 2-core machine, and took over 30 s under the whole suite
REFRESH_GROUPS_S = 60


@dataclass
class ConnectMm2:
    source: Any  # the TestCluster fixtures
    target: Any
    worker: LocalConnectWorker
    run: str
    lag_topic: str
    fo_topic: str
    canary_topic: str
    groups_prefix: str
    workdir: Path
    config_dict: dict = field(default_factory=dict)

    @property
    def connectors(self) -> dict[str, str]:
        return {"source": SOURCE_CONNECTOR, "checkpoint": CHECKPOINT_CONNECTOR, "heartbeat": HEARTBEAT_CONNECTOR}

    def target_topic(self, topic: str) -> str:
        return f"{SOURCE_ALIAS}.{topic}"


def flow_config(env: ConnectMm2, with_rest: bool = True) -> dict:
    """mirrorwatch's config for the Connect-mode MM2, as docs/mirrormaker2.md says to write it by hand."""
    mirror: dict[str, Any] = {
        "kind": "mm2",
        "source_alias": SOURCE_ALIAS,
        "target_alias": TARGET_ALIAS,
        "connector": SOURCE_CONNECTOR,
        "checkpoint_connector": CHECKPOINT_CONNECTOR,
        "heartbeat_connector": HEARTBEAT_CONNECTOR,
        "connect_offsets_topic": f"{CONNECT_GROUP}-offsets",
        "connect_configs_topic": f"{CONNECT_GROUP}-configs",
        "offset_flush_interval_s": 1,
        "emit_checkpoints_interval_s": 1,
        "refresh_groups_interval_s": REFRESH_GROUPS_S,
    }
    if with_rest:
        mirror["connect"] = {"url": env.worker.url}
    return {
        "clusters": {"east": env.source.config(), "west": env.target.config()},
        "flows": {
            "ew": {
                "source": "east",
                "target": "west",
                "topics": [f"cm-{env.run}-(lag|fo)"],
                "checkpoint_groups": [f"{env.groups_prefix}.*"],
                "mirror": mirror,
            }
        },
        "canary": {
            "topic": env.canary_topic,
            "metrics_port": None,
            "heartbeat_max_age_s": 10,
            "crit_latency_s": 10,
            "warn_latency_s": 5,
        },
        "monitor": {"interval_s": 1, "history": False, "http_port": None, "metrics_port": None},
    }


def start_connect_mm2(source, target, workdir: Path) -> ConnectMm2:
    run = uuid.uuid4().hex[:6]
    lag_topic, fo_topic, canary_topic = f"cm-{run}-lag", f"cm-{run}-fo", f"cm-{run}-canary"
    for topic, partitions in ((fo_topic, 2), (canary_topic, 3)):
        create_topic(source.bootstrap, topic, partitions)
    # LogAppendTime: record timestamps are arrival times on the source, so RPO's ground truth needs no producer clock
    create_topic(source.bootstrap, lag_topic, 3, {"message.timestamp.type": "LogAppendTime"})
    worker = LocalConnectWorker.on(workdir, target.bootstrap, CONNECT_GROUP, CONNECT_GROUP).start()
    env = ConnectMm2(source, target, worker, run, lag_topic, fo_topic, canary_topic, f"cmg-{run}-", workdir)
    try:
        worker.wait_ready()
        configs = mirror_connector_configs(
            SOURCE_ALIAS,
            TARGET_ALIAS,
            source.bootstrap,
            target.bootstrap,
            f"cm-{run}-.*",
            **{
                "refresh.topics.interval.seconds": "1",
                "refresh.groups.interval.seconds": str(REFRESH_GROUPS_S),
                "emit.checkpoints.interval.seconds": "1",
                "sync.topic.configs.enabled": "false",
                "groups": f"{env.groups_prefix}.*",
            },
        )
        for kind, name in env.connectors.items():
            worker.put_connector(name, configs[kind])
        # the reverse pair's heartbeat connector writes heartbeats into the source's `heartbeats` topic, which the
        # source connector mirrors to `src.heartbeats`: end-to-end liveness, as dedicated mode has by default (the
        # suite's source cluster also holds older heartbeats of other tests there)
        reverse = mirror_connector_configs(
            TARGET_ALIAS, SOURCE_ALIAS, target.bootstrap, source.bootstrap, f"cm-{run}-.*"
        )["heartbeat"]
        worker.put_connector(f"{TARGET_ALIAS}->{SOURCE_ALIAS}.MirrorHeartbeatConnector", reverse)
        # MM2 is up when it has mirrored a first record of each topic
        produce_numbered(source.bootstrap, fo_topic, 2, partitions=2)
        wait_until(
            lambda: (
                env.target_topic(fo_topic) in admin(target.bootstrap).list_topics(timeout=5).topics
                and sum(end_offsets(target.bootstrap, env.target_topic(fo_topic)).values()) >= 2
            ),
            240,
            1,
            "MM2 in the Connect worker mirroring a first record",
            alive=worker,
        )
    except BaseException:
        worker.kill()
        raise
    env.config_dict = flow_config(env)
    return env
