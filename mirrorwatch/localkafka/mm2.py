"""The real Apache MirrorMaker 2 (connect-mirror from the jar cache) in dedicated mode, for benchmarks and tests.

``LocalMirrorMaker2`` writes an ``mm2.properties`` and runs ``org.apache.kafka.connect.mirror.MirrorMaker`` on
it; ``kill()`` is a SIGKILL (as a crashed MM2 looks to the clusters), ``start()`` again resumes from MM2's own
Connect offsets. Every replication-factor property is 1 (the local clusters are single-node).
"""

from __future__ import annotations

from .process import ConnectRuntimeProcess

_RF_KEYS = (
    "replication.factor",
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
    "offset.storage.replication.factor",
    "status.storage.replication.factor",
    "config.storage.replication.factor",
)


def mm2_properties(clusters: dict[str, str], source: str, target: str, topics: str, **extra: str) -> dict[str, str]:
    """Properties for one enabled flow ``source->target`` (the reverse disabled); ``extra`` overrides any key."""
    props = {
        "clusters": ", ".join(clusters),
        **{f"{a}.bootstrap.servers": b for a, b in clusters.items()},
        f"{source}->{target}.enabled": "true",
        f"{source}->{target}.topics": topics,
        f"{target}->{source}.enabled": "false",
        "sync.topic.acls.enabled": "false",
        **{k: "1" for k in _RF_KEYS},
    }
    props.update({k: str(v) for k, v in extra.items()})
    return props


class LocalMirrorMaker2(ConnectRuntimeProcess):
    """MirrorMaker 2 in dedicated mode: ``org.apache.kafka.connect.mirror.MirrorMaker`` on an ``mm2.properties``."""

    main_class = "org.apache.kafka.connect.mirror.MirrorMaker"
    properties_file = "mm2.properties"
    out_file = "mm2.out"
