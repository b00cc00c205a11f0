"""Several flows on one cluster pair (two topic sets east→west, each in its own config file, two `mirror run`
processes): each its own group, each tool sees only its flow's topics, the pair's heartbeats and canary topics
mirrored exactly once, and the first canary check on the fresh pair measures replication, not discovery."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import time
import urllib.request

from harness.helpers import create_topic, produce_numbered
from harness.mirror_harness import BIN, MirrorProcess, fast_mirror_settings, wait_until

from .support.canary_checks import run_check, write
from .support.mirror_flows import count_on
from .support.outages import committed_offsets


def metric(mirror: MirrorProcess, name: str) -> float | None:
    match = re.search(r"metrics on http://([\d.]+):(\d+)/metrics", mirror.log_text())
    if not match:
        return None
    text = urllib.request.urlopen(f"http://{match[1]}:{match[2]}/metrics", timeout=5).read().decode()
    found = re.search(rf"^{name}{{[^}}]*}} (\S+)", text, re.M)
    return float(found[1]) if found else None


def flow_config(mirror_config: dict, suffix: str, flow: str, topic: str, **flow_settings) -> dict:
    cfg = copy.deepcopy(mirror_config)
    cfg["flows"] = {flow: {"source": "east", "target": "west", "topics": [topic], **flow_settings}}
    # a 30 s topic refresh, as in production: the canary topic must not depend on it
    cfg["mirror"] = fast_mirror_settings(heartbeats_topic=f"hb.{suffix}", refresh_interval_s=30.0)
    # warn at 10 s: a check right after the mirror's start that had to wait for its 30 s refresh would say WARNING
    cfg["canary"] = {
        "topic": f"mw.canary.{suffix}",
        "crit_latency_s": 20,
        "warn_latency_s": 10.0,
        "metrics_port": 0,
        "heartbeat_max_age_s": 30,
        "connect_timeout_s": 3,
    }
    return cfg


def test_two_flows_on_one_pair_each_in_its_own_file(source, target, topic_name, mirror_config, tmp_path):
    suffix = topic_name[-6:]
    orders, payments = f"{topic_name}-orders", f"{topic_name}-payments"
    flow_a, flow_b = f"orders-{suffix}", f"payments-{suffix}"
    for topic in (orders, payments):
        create_topic(source.bootstrap, topic, 3)
        produce_numbered(source.bootstrap, topic, 3000, partitions=3)
    cfg_a = flow_config(mirror_config, suffix, flow_a, orders)
    # internal_topics defaults to true; and its include regex matches nothing yet
    cfg_b_shared = flow_config(mirror_config, suffix, flow_b, f"{payments}-not-yet")
    cfg_b = flow_config(mirror_config, suffix, flow_b, payments, internal_topics=False)
    path_a, path_b = write(cfg_a, tmp_path / "a.yaml"), write(cfg_b, tmp_path / "b.yaml")

    with MirrorProcess(cfg_a, tmp_path / "ma.yaml", log_name="a.log") as mirror_a:
        wait_until(lambda: "mirroring 3 topic(s)" in mirror_a.log_text(), 60, what="flow A subscribed", alive=mirror_a)
        # the first check on the fresh pair: the mirror created and subscribed to the canary topic at start
        first = run_check(path_a)
        assert first.rc == 0 and first.body["duplicates"] == 0, first.stdout
        assert first.body["latency_ms"]["max"] < 10_000, first.stdout  # not the ~30 s of a topic refresh

        # a second flow that also claims the pair's internal topics is told so, and says so in a metric
        with MirrorProcess(cfg_b_shared, tmp_path / "mb1.yaml", log_name="b1.log") as shared:
            wait_until(
                lambda: "also consume the heartbeats/canary topics" in shared.log_text(),
                60,
                what="the shared-internal-topics warning",
                alive=shared,
            )
            assert f"mirrorwatch-{flow_a}" in shared.log_text()
            assert metric(shared, "mirrorwatch_mirror_internal_topics_shared") == 1.0
            # a flow that matches no topic: a warning at start, and a metric
            assert (
                f"flow {flow_b}: no topic on source cluster 'east' matches topics ['{payments}-not-yet']"
                in shared.log_text()
            )
            assert metric(shared, "mirrorwatch_mirror_matched_topics") == 0.0

        with MirrorProcess(cfg_b, tmp_path / "mb.yaml", log_name="b.log") as mirror_b:
            wait_until(
                lambda: (
                    count_on(target.bootstrap, f"east.{orders}") == 3000
                    and count_on(target.bootstrap, f"east.{payments}") == 3000
                ),
                60,
                what="both flows mirrored",
                alive=mirror_b,
            )
            # each flow its own default group, each with only its own topic (commits follow the writes by up to 1 s)
            for flow, topic in ((flow_a, orders), (flow_b, payments)):
                wait_until(
                    lambda: sum(committed_offsets(source.bootstrap, f"mirrorwatch-{flow}", topic, 3).values()) == 3000,
                    30,
                    what=f"{flow}'s commits",
                    alive=mirror_b,
                )
            assert all(
                o < 0 for o in committed_offsets(source.bootstrap, f"mirrorwatch-{flow_a}", payments, 3).values()
            )
            assert metric(mirror_b, "mirrorwatch_mirror_internal_topics_shared") == 0.0
            assert "also consume the heartbeats/canary topics" not in mirror_b.log_text()
            # canary events mirrored once: no duplicates once B stopped mirroring them
            time.sleep(2)
            again = run_check(path_a)
            assert again.rc == 0 and again.body["duplicates"] == 0, again.stdout
            # each flow's failover check sees its own topics only
            for path, mine, other in ((path_a, orders, payments), (path_b, payments, orders)):
                proc = subprocess.run(
                    [str(BIN / "mirror"), "failover", "check", "--config", path, "--json", "--timeout", "50"],
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                report = json.loads(proc.stdout)
                listed = {t["topic"] for t in report["topics"]}
                assert mine in listed and other not in listed, (path, listed, proc.stderr)
    assert mirror_a.proc.returncode == 0 and mirror_b.proc.returncode == 0
