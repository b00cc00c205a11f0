"""The mirror engine against the real clusters."""

from __future__ import annotations

from harness.helpers import create_topic, end_offsets, produce_numbered, read_all
from harness.mirror_harness import MirrorProcess, fast_mirror_settings, wait_until

from .support.mirror_flows import committed_offsets


def test_100k_records_mirrored_whole(source, target, topic_name, mirror_config, tmp_path):
    create_topic(source.bootstrap, topic_name, 6)
    produce_numbered(source.bootstrap, topic_name, 100_000, headers=True, value_size=100)
    mirror_config["flows"]["east-west"]["topics"] = [topic_name]
    mirror_config["mirror"] = fast_mirror_settings()
    target_topic = f"east.{topic_name}"
    with MirrorProcess(mirror_config, tmp_path / "m.yaml") as mirror:
        wait_until(
            lambda: (
                sum(end_offsets(target.bootstrap, target_topic).values()) >= 100_000
                if target_topic in _topics(target.bootstrap)
                else False
            ),
            120,
            what="100k records on the target",
            alive=mirror,
        )
        ends = end_offsets(source.bootstrap, topic_name)
        wait_until(
            lambda: committed_offsets(source.bootstrap, "mirrorwatch-east-west", topic_name, 6) == ends,
            30,
            what="the mirror group's commits to reach the end offsets",
        )
        assert mirror.running()
    src = {(m.partition(), m.offset()): m for m in read_all(source.bootstrap, topic_name)}
    dst = read_all(target.bootstrap, target_topic)
    assert len(dst) == 100_000
    for m in dst:
        # the engine keeps partition numbers and, with nothing skipped, offsets line up one to one
        original = src[(m.partition(), m.offset())]
        assert (m.key(), m.value(), m.timestamp()) == (original.key(), original.value(), original.timestamp())
        # headers whole, and nothing added: under the prefix policy the name says where it came from
        assert m.headers() == original.headers()


def _topics(bootstrap):
    from harness.helpers import admin

    return admin(bootstrap).list_topics(timeout=10).topics
