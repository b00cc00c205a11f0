"""`mirror failback tail` on the real clusters: the records the target never received, found exactly, exported to
a file and to a quarantine topic without loss (keys, headers, timestamps), checked by an independent reader that
compares the two clusters' contents by value."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from harness.helpers import create_topic, produce_numbered, read_all
from harness.mirror_harness import MirrorProcess, wait_until
from mirrorwatch.mirror.failover.tail_export import ORIGIN_HEADER, manifest_path, read_lines, read_manifest

from .error_cases import FAILOVER_REFUSALS, message_pattern
from .support.mirror_cli import run_cli
from .support.mirror_flows import config_for, consume_and_commit, count_on

pytestmark = pytest.mark.kafka
BEFORE, AFTER = 400, 300  # records mirrored, then records written while the mirror is down (the tail)


def tail(path: Path, *extra: str) -> tuple[int, dict, str]:
    result = run_cli("failback", "tail", "--config", str(path), "--json", *extra, timeout=180)
    return result.returncode, json.loads(result.stdout) if result.returncode == 0 else {}, result.stderr


@pytest.fixture(scope="module")
def stranded(kafka_pair, tmp_path_factory):
    """A flow mirrored up to BEFORE records; the mirror then killed (SIGKILL) and AFTER more records written to the
    source, with headers; group `app` reads 50 of them on the source, as an application on the old primary did."""
    source, target = kafka_pair
    folder = tmp_path_factory.mktemp("tail")
    topic = f"t-tail-{folder.name[-6:]}"
    create_topic(source.bootstrap, topic, 2)
    produce_numbered(source.bootstrap, topic, BEFORE, partitions=2, headers=True)
    base = {"clusters": {"east": source.config(), "west": target.config()}, "flows": {"east-west": {}}}
    cfg = config_for({**base, "flows": {"east-west": {"source": "east", "target": "west"}}}, topic, f"g-{topic}")
    path = folder / "m.yaml"
    mirror = MirrorProcess(cfg, path).start()
    try:
        wait_until(lambda: count_on(target.bootstrap, f"east.{topic}") == BEFORE, 60, what="mirroring", alive=mirror)
        wait_until(lambda: tail(path)[1].get("records") == 0, 60, what="the mirror's position published")
    finally:
        mirror.kill()
    produce_numbered(source.bootstrap, topic, AFTER, partitions=2, start=BEFORE, headers=True)
    consume_and_commit(source.bootstrap, topic, "app", 0, BEFORE // 2 + 50)
    return source, target, topic, path, folder


def test_tail_is_exactly_what_the_target_misses_and_the_file_keeps_it_all(stranded):
    source, target, topic, path, folder = stranded
    out = folder / "tail.jsonl"
    code, report, stderr = tail(path, "--out", str(out))
    assert code == 0, stderr
    # the independent reader: source records (by value) that are not on the target
    on_target = {m.value() for m in read_all(target.bootstrap, f"east.{topic}", expect=BEFORE)}
    on_source = {m.value(): m for m in read_all(source.bootstrap, topic, expect=BEFORE + AFTER)}
    missing = {v for v in on_source if v not in on_target}
    assert len(missing) == AFTER
    assert report["records"] == report["records_lower_bound"] == AFTER and report["exact"]
    assert report["groups_read_into_tail"] == [{"group": "app", "records": 50}]
    rows = {(r["topic"], r["partition"]): r for r in report["partitions"]}
    assert rows[(topic, 0)]["from_offset"] == BEFORE // 2 and rows[(topic, 0)]["to_offset"] == (BEFORE + AFTER) // 2 - 1
    # the file: every missing record once, key, value, headers and timestamp as on the source
    lines = list(read_lines(out))
    assert {base64.b64decode(r["value"]) for r in lines} == missing and len(lines) == AFTER
    for r in lines:
        original = on_source[base64.b64decode(r["value"])]
        assert base64.b64decode(r["key"]) == original.key() and r["timestamp"] == original.timestamp()[1]
        assert [(h, base64.b64decode(v)) for h, v in r["headers"]] == original.headers()
    manifest = read_manifest(manifest_path(out))
    assert manifest["records"] == AFTER and manifest["export"]["file"] == str(out.resolve())
    again = run_cli("failback", "tail", "--config", str(path), "--out", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr and again.stderr.count("\n") == 1


def test_tail_to_a_quarantine_topic_on_the_new_primary(stranded):
    source, target, topic, path, folder = stranded
    manifest = folder / "quarantine.manifest.json"
    code, report, stderr = tail(path, "--to-topic", "--manifest", str(manifest))
    assert code == 0, stderr
    quarantine = f"east.{topic}.unmirrored"
    assert report["export"]["topics"] == {topic: quarantine}
    saved = read_all(target.bootstrap, quarantine, expect=AFTER)
    on_source = {m.value(): m for m in read_all(source.bootstrap, topic, expect=BEFORE + AFTER)}
    assert len(saved) == AFTER and count_on(target.bootstrap, f"east.{topic}") == BEFORE  # never mixed in
    for m in saved:
        original = on_source[m.value()]
        origin = dict(m.headers())[ORIGIN_HEADER].decode()
        assert origin == f"east:{topic}:{original.partition()}:{original.offset()}"
        assert m.key() == original.key() and m.timestamp()[1] == original.timestamp()[1]
        assert [h for h in m.headers() if h[0] != ORIGIN_HEADER] == original.headers()
        assert m.partition() == original.partition()
    assert read_manifest(manifest)["records"] == AFTER
    # a second export into the same quarantine topic is refused: it would mix two exports
    again = run_cli("failback", "tail", "--config", str(path), "--to-topic", "--manifest", str(folder / "x.json"))
    assert again.returncode == 3 and "already holds 300 records" in again.stderr, again.stderr


def test_failback_plan_refuses_until_the_whole_tail_is_saved(stranded):
    source, target, topic, path, folder = stranded
    unsaved = run_cli("failback", "plan", "--config", str(path), "--out-dir", str(folder / "plan"))
    assert unsaved.returncode == 1 and unsaved.stderr.count("\n") == 1
    assert "refusing to plan a wipe of flow east-west's old source: the tail is not exported" in unsaved.stderr
    manifest = manifest_path(folder / "tail.jsonl")  # written by the first test of this module
    args = (
        "failback",
        "plan",
        "--config",
        str(path),
        "--tail-manifest",
        str(manifest),
        "--out-dir",
        str(folder / "plan"),
    )
    planned = run_cli(*args, "--json")
    assert planned.returncode == 0, planned.stderr
    report = json.loads(planned.stdout)
    assert report["tail_records"] == AFTER and "kafka-delete-records.sh" in report["steps"][1]
    wipe = json.loads(Path(report["files"]["wipe"]).read_text())["partitions"]
    assert {(w["topic"], w["partition"]): w["offset"] for w in wipe} == {
        (topic, 0): (BEFORE + AFTER) // 2,
        (topic, 1): (BEFORE + AFTER) // 2,
    }
    # the failback's reverse flow brings home the copies too (east.<topic> on west), under the identity policy
    back = yaml.safe_load(Path(report["files"]["reverse"]).read_text())["flows"]["west-east"]
    assert back["policy"] == "identity" and back["topics"][-1] == rf"east\.(?:{back['topics'][0]})"
    # one more record on the old source after the export: it would be wiped unsaved
    produce_numbered(source.bootstrap, topic, 1, partitions=2, start=BEFORE + AFTER)
    stale = run_cli(*args)
    said = [line for line in stale.stderr.splitlines() if line.strip() and not line.startswith("%")]
    assert stale.returncode == FAILOVER_REFUSALS["plan-grown"]["exit"] and len(said) == 1, stale.stderr
    assert message_pattern(FAILOVER_REFUSALS["plan-grown"]["message"]).fullmatch(said[0]), said
