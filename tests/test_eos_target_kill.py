"""Issue 34's exactly-once regression: the whole single-node target SIGKILLed (and restarted) under load while the
exactly-once mirror runs, then the mirror SIGKILLed and restarted. A read_committed reader must see every source
record exactly once. (Before issue 34's fix, one run of this plan committed about 50 records per partition twice,
at consecutive offsets, from just before the kill.)"""

from __future__ import annotations

from .support.exactly_once import PacedWriter, delivery, read_committed
from .support.helpers import create_topic, end_offsets
from .support.mirror_harness import MirrorProcess, wait_until
from .test_exactly_once import eos_config, positions
from .test_outages import local_only

PARTS = 6
RATE = 3000


def test_a_killed_target_broker_costs_no_duplicate_under_exactly_once(
    source, target, topic_name, mirror_config, tmp_path
):
    local_only(target)
    group = f"g-{topic_name}"
    create_topic(source.bootstrap, topic_name, PARTS)
    mirrored = f"east.{topic_name}"
    cfg = eos_config(mirror_config, topic_name, group, instance_id="target-kill")
    writer = PacedWriter(source.bootstrap, topic_name, PARTS, RATE)
    mirror = MirrorProcess(cfg, tmp_path / "m.yaml").start()

    def done() -> int:
        """Source records the transactions have committed so far (the positions group's sum)."""
        return sum(max(0, o) for o in positions(target.bootstrap, group, mirrored, PARTS).values())

    try:
        writer.start()
        wait_until(lambda: done() > RATE, 90, what="exactly-once mirroring", alive=mirror)
        before = done()
        target.local.kill()  # mid-transaction: records flow at RATE/s
        target.local.start()
        wait_until(lambda: done() > before + RATE, 120, what="mirroring again after the target's restart", alive=mirror)
        mirror.kill()
        mirror.start()
        total = writer.finish()
        wait_until(
            lambda: positions(target.bootstrap, group, mirrored, PARTS) == end_offsets(source.bootstrap, topic_name),
            120,
            what="everything mirrored",
            alive=mirror,
        )
        reads: list = []
        wait_until(
            lambda: reads.append(read_committed(target.bootstrap, mirrored)) or len(reads[-1]) >= total,
            90,
            interval=3,
            what="every record readable read_committed (a killed producer's transaction aborted)",
        )
    finally:
        mirror.terminate()
    seen = delivery(reads[-1], total, PARTS)
    print(f"target kill under exactly-once: {seen}")
    assert seen.lost == 0 and seen.duplicates == 0 and seen.order_violations == 0, seen
