"""What the coordinator-call helper process costs (core.coordinator_calls): its memory and the latency it adds.

On one cluster with a live group (a member, committed offsets): describe the group and read its committed offsets
``--rounds`` times directly (the admin client in this process) and through the helper, interleaved call by call
(a busy spell of the machine hits both alike). Figures: the median of each, the helper's delta and ratio to the
direct call; the helper's start (its first call less a steady one); the helper's resident memory (VmRSS) after
the rounds, beside this process's own.

    .venv/bin/python -m bench.coordinator_calls [--rounds 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.common import create_topic, fresh_clusters
from bench.jsonline import BenchRun
from mirrorwatch.core.config import ClusterConfig
from mirrorwatch.core.coordinator_calls import CoordinatorCalls

TIMEOUT_S = 10.0


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def live_group(bootstrap: str) -> tuple[Consumer, str]:
    topic, group = f"bench-coord-{uuid.uuid4().hex[:6]}", f"bench-coord-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 6)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        if time.monotonic() > deadline:
            raise RuntimeError("the bench's consumer was never assigned its topic")
        consumer.poll(0.2)
    consumer.commit(offsets=[TopicPartition(topic, p, 0) for p in range(6)], asynchronous=False)
    return consumer, group


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with BenchRun("coordinator_calls", vars(args)) as run, fresh_clusters() as clusters:
        bootstrap = clusters["east"].bootstrap
        consumer, group = live_group(bootstrap)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        calls = CoordinatorCalls(ClusterConfig(properties={"bootstrap.servers": bootstrap}))
        try:
            request = [ConsumerGroupTopicPartitions(group)]
            direct = {
                "describe": lambda: admin.describe_consumer_groups([group])[group].result(TIMEOUT_S),
                "offsets": lambda: admin.list_consumer_group_offsets(request)[group].result(TIMEOUT_S),
            }
            helper = {
                "describe": lambda: calls.describe_group(group, TIMEOUT_S),
                "offsets": lambda: calls.committed_offsets(group, TIMEOUT_S),
            }
            first_ms = timed(helper["describe"])
            for call in direct.values():  # connections and the coordinator's address known on both sides
                call()
            times: dict[str, list[float]] = {f"{k}_{c}": [] for k in ("direct", "helper") for c in direct}
            for _ in range(args.rounds):
                for name in direct:
                    times[f"direct_{name}"].append(timed(direct[name]))
                    times[f"helper_{name}"].append(timed(helper[name]))
            medians = {name: statistics.median(samples) for name, samples in times.items()}
            for name in direct:
                d, h = medians[f"direct_{name}"], medians[f"helper_{name}"]
                run.figures[name] = {"direct_ms": d, "helper_ms": h, "added_ms": h - d, "ratio": h / d}
            run.figures["helper_start_ms"] = first_ms - medians["helper_describe"]
            pid = calls.pid
            assert pid is not None
            run.figures["helper_rss_mb"] = rss_mb(pid)
            run.figures["this_process_rss_mb"] = rss_mb(os.getpid())
            for name in direct:
                f = run.figures[name]
                print(f"{name}: direct {f['direct_ms']:.2f} ms, helper {f['helper_ms']:.2f} ms (+{f['added_ms']:.2f})")
            print(f"helper: start {run.figures['helper_start_ms']:.0f} ms, RSS {run.figures['helper_rss_mb']:.1f} MB")
        finally:
            calls.close()
            consumer.close()


if __name__ == "__main__":
    main()
