"""The settings of the real MirrorMaker 2 that tests/test_mm2.py runs (one per module, fast refreshes), shared
with tests/test_config_import.py, which checks that the config generated from them says the same."""

from __future__ import annotations

import uuid

RUN = uuid.uuid4().hex[:6]
# on west, mirrored to east by the same MM2's reverse pair with exactly-once source support (issue 28): that pair's
# herder has its own worker (settings prefixed "east.", its own group and topics), so the east->west flow the
# other tests watch stays at-least-once
EOS_TOPIC = f"mm2t-{RUN}-eos"
FAST = {
    "refresh.topics.interval.seconds": "1",
    "refresh.groups.interval.seconds": "1",
    "emit.checkpoints.interval.seconds": "1",
    "tasks.max": "1",
    "sync.topic.configs.enabled": "false",
    "groups": f"mm2g-{RUN}-.*",
    # the Connect worker of the east->west herder runs against the target: worker settings take its prefix
    "west.offset.flush.interval.ms": "1000",
    "west->east.enabled": "true",
    "west->east.topics": EOS_TOPIC,
    "east.exactly.once.source.support": "enabled",  # every source task of the west->east worker: transactional
    "east.offset.flush.interval.ms": "1000",
    "dedicated.mode.enable.internal.rest": "true",  # documented as needed for exactly-once in dedicated mode
}
