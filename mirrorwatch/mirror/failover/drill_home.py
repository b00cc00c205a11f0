"""The way home in ``mirror failover drill --unplanned``, after the tail is saved: the failback, done.

1. ``mirror failback plan --wipe``: the guard (the tail's manifest, the old source still ending where it says),
   then the old primary's records of the flow deleted;
2. the reverse flow (new primary → old, the plan's config) run by our engine;
3. ``mirror failover switchover`` on the reverse flow: its gates wait for true lag 0, proved, then the group
   moves home.

Then the independent reader reads the home cluster: what is on it is the drill's verdict (``drill_unplanned``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, TopicPartition

from ...core.cli import UserError
from ...core.clients import client_log

BIN = Path(sys.executable).parent
READ_TIMEOUT_S = 90.0


def consume_to_end(bootstrap: str, topics: list[str], group: str) -> int:
    """The application on the new primary: read ``topics`` from the group's positions to their ends now,
    committing after each batch; the count read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "logger": client_log,
        }
    )
    try:
        ends = {
            (t, p): consumer.get_watermark_offsets(TopicPartition(t, p), timeout=30)[1]
            for t in topics
            for p in consumer.list_topics(t, timeout=30).topics[t].partitions
        }
        consumer.subscribe(topics)
        seen, deadline = 0, time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            batch = [m for m in consumer.consume(500, 0.5) if not m.error()]
            if batch:
                seen += len(batch)
                consumer.commit(asynchronous=False)
            if _at_ends(consumer, ends):
                return seen
        raise UserError(f"the drill's application did not read {', '.join(topics)} to their ends in 90 s", 1)
    finally:
        consumer.close()


def _at_ends(consumer: Consumer, ends: dict[tuple[str, int], int]) -> bool:
    """Every partition assigned, and read to ``ends``. A partition it has fetched nothing from has no position
    yet: its committed offset (the failover's) says where it stands."""
    assigned = consumer.assignment()
    if {(tp.topic, tp.partition) for tp in assigned} != set(ends):
        return False
    where = {(tp.topic, tp.partition): tp.offset for tp in consumer.position(assigned)}
    unread = [TopicPartition(t, p) for (t, p), offset in where.items() if offset < 0]
    if unread:
        where.update({(tp.topic, tp.partition): tp.offset for tp in consumer.committed(unread, timeout=30)})
    return all(where[k] >= end for k, end in ends.items() if end > 0)


def run_mirror(*args: str) -> dict[str, Any]:
    """A ``mirror`` command with ``--json``; its JSON answer, or UserError with its last line of its own."""
    done = subprocess.run([str(BIN / "mirror"), *args, "--json"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("%")]
        last = (said or [done.stdout.strip()[-300:] or "no output"])[-1]
        raise UserError(f"mirror {args[0]} {args[1]} failed (exit {done.returncode}): {last[-300:]}", 1)
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def go_home(config: Path, manifest: Path, group: str, workdir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Steps 7–9 of the drill: the wipe (guarded), the reverse flow, the switchover home; the plan's and the
    switchover's answers."""
    say("7. mirror failback plan --wipe: the old primary's records wiped, now that the tail is saved")
    plan = run_mirror(
        "failback", "plan", "--config", str(config), "--tail-manifest", str(manifest),
        "--out-dir", str(workdir), "--wipe",
    )  # fmt: skip
    reverse = str(plan["files"]["reverse"])
    home_flow = next(iter(yaml.safe_load(Path(reverse).read_text())["flows"]))
    say(f"8. the reverse flow {home_flow} (new primary → old) runs until true lag is 0")
    log = (workdir / "reverse-mirror.log").open("ab")  # closed with the drill's process
    reverse_mirror = subprocess.Popen([str(BIN / "mirror"), "run", "--config", reverse], stdout=log, stderr=log)
    try:
        say(f"9. mirror failover switchover home: group {group} moves back")
        switched = run_mirror(
            "failover", "switchover", "--config", reverse, "--flow", home_flow, "--group", group,
            "--quiet-s", "3", "--state", str(workdir / "home.state.json"),
            "--reverse-config", str(workdir / "forward-again.yaml"),
        )  # fmt: skip
    finally:
        reverse_mirror.terminate()
        try:
            reverse_mirror.wait(30)
        except subprocess.TimeoutExpired:
            reverse_mirror.kill()
            reverse_mirror.wait(30)
    if not switched["switched"]:
        raise UserError(f"the switchover home did not finish: {switched.get('blocked')}", 1)
    return {"plan": plan, "switchover": switched}
