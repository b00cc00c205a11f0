"""``mirror failover drill --planned``: a planned switchover on fresh local clusters, checked by the application.

1. traffic at a set rate to east, mirrored to west; 2. the application (a consumer group) reads half of it on
east and stops; 3. the producers stop; 4. ``mirror failover switchover`` moves the group (its gates: healthy,
quiet, true lag 0 proved; applied; read back); 5. the same application resumes on west. An independent reader of
west then checks: RPO 0 (every record is on west), 0 lost (every record on west was read on east or on west),
and the re-deliveries within the bound the switchover stated (``redelivered_at_most``).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from ...core.cli import UserError
from ...core.clients import make_admin
from ...core.config import ClusterConfig
from .drill import consume, read_whole
from .drill_unplanned import BIN, _config, _ends, _mirror, _produce, _wait


def run_planned(records: int, rate: int, workdir: Path, say: Callable[[str], None]) -> dict[str, Any]:
    from ...localkafka import LocalClusters

    run_id = str(int(time.time()))
    topic, group = f"drill-{run_id}", f"drill-app-{run_id}"
    clusters = LocalClusters(["east", "west"], workdir / "clusters").start()
    east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
    path = workdir / "drill.yaml"
    path.write_text(yaml.safe_dump(_config(east, west, topic, group)))
    mirror = None
    try:
        admin = make_admin(ClusterConfig.model_validate({"bootstrap.servers": east}), "mirrorwatch-drill")
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        log = (workdir / "mirror.log").open("ab")  # closed with the drill's process
        mirror = subprocess.Popen([str(BIN / "mirror"), "run", "--config", str(path)], stdout=log, stderr=log)
        say(f"1. {records} records at {rate}/s to east:{topic}, mirrored")
        acked: set[bytes] = set()
        _produce(east, topic, 0, records, rate, acked)
        say(f"2. the application (group {group}) reads half of them on east and stops")
        on_east = consume(east, topic, group, stop_after=records // 2)
        say("3. the producers stop; 4. mirror failover switchover moves the group")
        switched = _mirror(
            "failover", "switchover", "--config", str(path), "--group", group, "--quiet-s", "3", "--json",
            "--state", str(workdir / "switchover.state.json"), "--reverse-config", str(workdir / "reverse.yaml"),
        )  # fmt: skip
        if switched.returncode != 0:
            raise UserError(f"the switchover failed: {switched.stderr.strip()[-300:] or switched.stdout[-300:]}", 1)
        report = json.loads(switched.stdout)
        bound = sum(r["redelivered_at_most"] for g in report["groups"] for r in g["partitions"])
        say(f"   switched: true lag 0 on every partition, at most {bound} records re-delivered")
        say("5. the same application resumes on west")
        on_west = consume(west, f"east.{topic}", group, stop_after=None)
        _wait("west to hold every record", lambda: _ends(west, f"east.{topic}") >= records, 30)
        target_has = read_whole(west, f"east.{topic}")
    finally:
        if mirror is not None and mirror.poll() is None:
            mirror.kill()
        clusters.stop()
    seen = set(on_east) | set(on_west)
    result = {
        "mode": "planned",
        "records": records,
        "produced_acknowledged": len(acked),
        "on_target": len(target_has),
        "rpo_records": len(acked - set(target_has)),
        "consumed_on_east": len(on_east),
        "consumed_on_west": len(on_west),
        "lost": sum(1 for value in set(target_has) if value not in seen),
        "duplicates": len(on_east) + len(on_west) - len(seen),
        "redelivery_bound": bound,
        "true_lag": [p["true_lag"] for p in report["partitions"]],
    }
    result["ok"] = result["rpo_records"] == 0 and result["lost"] == 0 and 0 <= result["duplicates"] <= bound
    return result
