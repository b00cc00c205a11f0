"""``mirror failover drill``: a rehearsed failover of a consumer group from east to west.

By default on a fresh pair of the project's own local clusters, so the source can really be stopped.
Modes: ``checkpoint`` (translate the group's offsets through the checkpoints and apply them on the target)
and ``time`` (reset-to-time to before the oldest record the application had not processed). Steps: a keyed,
sequenced producer and a consumer group on east, the mirror running; the consumer stops half-way; producing
stops; the check must say READY; the source is stopped; the group's offsets are applied on west; the same
consumer code resumes on west; an independent reader of west verifies that nothing the target had was missed
and that re-deliveries stay within what the check predicted.
"""

from __future__ import annotations

import ipaddress
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

from ...core.cli import UserError
from ...core.clients import client_log, make_admin, make_producer
from ...core.config import ClusterConfig
from ...core.config_loading import load_config
from ...core.reading import end_offsets, read_to_end

BIN = Path(sys.executable).parent
FAILBACK = """Failback (do not reverse the mirror in place, and do not wipe first): the old source may hold records
the new primary never got. 1) keep clients off the old source; 2) save them: `mirror failback tail --out FILE`;
3) `mirror failback plan --tail-manifest FILE.manifest.json` gives the wipe, the reverse flow and the switchover
back, in order (docs/dr.md)."""


def is_loopback(bootstrap: str) -> bool:
    for server in bootstrap.split(","):
        host = server.rsplit(":", 1)[0].strip("[]")
        try:
            if not all(ipaddress.ip_address(info[4][0]).is_loopback for info in socket.getaddrinfo(host, None)):
                return False
        except (OSError, ValueError):
            return False
    return True


def consume(
    bootstrap: str,
    topic: str,
    group: str,
    stop_after: int | None,
    idle_s: float = 5.0,
    join_timeout_s: float = 60.0,
    first_record_s: float = 30.0,
) -> list[bytes]:
    """The drill's application: read, commit after every batch; stop after N records or when idle.

    Idle counts from the group's first assignment, not from the start, and is ``first_record_s`` until the first
    record: joining a group on a busy machine took more than the 5 s, and an application that had read nothing
    had committed nothing, so the check could never find the group's commits (CI: "the group has no committed
    offsets" for 90 s). Fetching the group's offsets after the assignment can take a while there too."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "logger": client_log,  # the drill stops brokers: their clients' complaints stay off stderr
        }
    )
    assigned_at: list[float] = []
    consumer.subscribe([topic], on_assign=lambda _c, _p: assigned_at.append(time.monotonic()))
    seen: list[bytes] = []
    started = last = time.monotonic()
    try:
        while stop_after is None or len(seen) < stop_after:
            if not assigned_at:
                if time.monotonic() - started > join_timeout_s:
                    raise UserError(
                        f"the drill's application got no partitions of {topic} in group {group} within "
                        f"{join_timeout_s:.0f} s (is the cluster at {bootstrap} overloaded?)",
                        1,
                    )
                last = time.monotonic()
            elif time.monotonic() - max(last, assigned_at[0]) >= (idle_s if seen else first_record_s):
                break
            batch = [m for m in consumer.consume(min(200, (stop_after or 10**9) - len(seen)), 0.5) if not m.error()]
            if batch:
                seen.extend(m.value() or b"" for m in batch)
                consumer.commit(asynchronous=False)
                last = time.monotonic()
    finally:
        consumer.close()
    return seen


def read_whole(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "mirrorwatch-assign-only",
            "enable.auto.commit": False,
            # a transactional target (exactly-once mirroring) ends with a commit marker no record stands for: the
            # end-of-partition event marks the partition read, instead of waiting out read_to_end's timeout
            "enable.partition.eof": True,
            "logger": client_log,
        }
    )
    try:
        positions = {(topic, p): 0 for p in consumer.list_topics(topic, timeout=10).topics[topic].partitions}
        ends = end_offsets(consumer, list(positions))
        consumer.assign([TopicPartition(t, p, 0) for t, p in positions])
        # the topic as it was when the read began (records that arrive meanwhile are left out)
        return [
            m.value() or b""
            for m in read_to_end(consumer, positions, 120, ends)
            if (m.offset() or 0) < ends[(m.topic() or "", m.partition() or 0)]
        ]
    finally:
        consumer.close()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "mirror"), *args], capture_output=True, text=True, timeout=180)


def run_drill(
    mode: str,
    records: int,
    workdir: Path,
    say: Callable[[str], None] = click.echo,
    config_path: str | None = None,
    delivery: str = "at_least_once",
) -> dict[str, Any]:
    from ...localkafka import LocalClusters

    run_id = f"{int(time.time())}"
    topic, group = f"drill-{run_id}", f"drill-app-{run_id}"
    clusters = None
    if config_path is None:
        clusters = LocalClusters(["east", "west"], workdir / "clusters").start()
        east, west = clusters["east"].bootstrap, clusters["west"].bootstrap
    else:
        cfg = load_config(config_path)
        _, flow = cfg.flow(None)
        east, west = cfg.clusters[flow.source].bootstrap_servers, cfg.clusters[flow.target].bootstrap_servers
    try:
        # kept referenced until the future resolves
        admin = make_admin(ClusterConfig.model_validate({"bootstrap.servers": east}), "mirrorwatch-drill")
        admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
        config = {
            "clusters": {"east": {"bootstrap.servers": east}, "west": {"bootstrap.servers": west}},
            "flows": {
                "drill": {
                    "source": "east",
                    "target": "west",
                    "topics": [topic],
                    "group": f"mirror-{topic}",
                    "checkpoint_groups": [group],
                }
            },
            "mirror": {
                "commit_interval_s": 1,
                "refresh_interval_s": 1,
                "checkpoint_interval_s": 1,
                "offset_sync_every": 100,
                "metrics_port": None,
                "delivery": delivery,
            },
            "canary": {"metrics_port": None},
        }
        path = workdir / "drill.yaml"
        path.write_text(yaml.safe_dump(config))
        mirror = subprocess.Popen(
            [str(BIN / "mirror"), "run", "--config", str(path)],
            stdout=subprocess.DEVNULL,
            stderr=open(workdir / "mirror.log", "ab"),
        )
        try:
            say(f"1. producing {records} keyed, sequenced records to east:{topic}; the mirror is running")
            # through core.clients: its connection errors after the outage stay off stderr (-v shows them)
            producer = make_producer(
                ClusterConfig.model_validate({"bootstrap.servers": east}),
                "mirrorwatch-drill",
                **{"acks": "all", "enable.idempotence": True},
            )
            # the oldest record the application will not have processed is no older than this
            production_started_ms = int(time.time() * 1000)
            for i in range(records):
                producer.produce(topic, f"{i % 100}:{i // 100}".encode(), f"k{i % 100}".encode())
                if i % 1000 == 0:
                    producer.poll(0)
            producer.flush(60)
            say(f"2. the application (group {group}) consumes on east and stops half-way")
            on_east = consume(east, topic, group, stop_after=records // 2)
            if not on_east:
                raise UserError(f"the drill's application read nothing of east:{topic} (group {group})", 1)
            say("3. producing stopped; waiting for `mirror failover check` to say READY")
            predicted, deadline, last_said = None, time.monotonic() + 90, "nothing"
            while time.monotonic() < deadline:
                if mirror.poll() is not None:
                    raise UserError(
                        f"the mirror exited with code {mirror.returncode} before the check said READY; "
                        f"see the mirror log: {workdir / 'mirror.log'}",
                        1,
                    )
                # a rehearsal on a busy machine: give each check more than the 15 s an on-call answer gets
                said = _cli("failover", "check", "--config", str(path), "--group", group, "--json", "--timeout", "60")
                if said.returncode in (0, 1, 2) and said.stdout:
                    verdict = json.loads(said.stdout)["groups"][0]
                    if verdict["verdict"] == "READY":
                        predicted = verdict["duplicates"]
                        break
                    last_said = f"{verdict['verdict']} ({'; '.join(verdict['reasons'])})"
                else:
                    # its last line of its own (not a client-library "%" line): the drill's error stays one line
                    own = [line for line in said.stderr.splitlines() if line.strip() and not line.startswith("%")]
                    last_line = (own or ["no output"])[-1]
                    last_said = f"exit {said.returncode}: {last_line[-300:]}"
                time.sleep(1)
            if predicted is None:
                # what the check last said names the blocker (no checkpoint, lag, a stale heartbeat) in the one line
                raise UserError(
                    f"the check never said READY within 90 s; it last said {last_said}; "
                    f"see the mirror log: {workdir / 'mirror.log'}",
                    1,
                )
            say(f"   READY: 0 records would be lost, at most {predicted} re-delivered")
            time.sleep(1.5)
            say(
                "4. the outage: the source cluster stops" if clusters else "4. the outage (simulated: the mirror stops)"
            )
            mirror.send_signal(signal.SIGTERM)
            mirror.wait(30)
            if clusters:
                clusters["east"].stop()
            if mode == "checkpoint":
                say("5. translating the group's offsets through the checkpoints and applying them on west")
                applied = _cli("failover", "translate", "--config", str(path), "--group", group, "--apply", "--json")
            else:
                # As an operator would: a time no later than the oldest record the application had not processed.
                # "A few seconds before the outage" is not that on a busy machine: the application stopped
                # half-way through records that were all written before it started reading, and a drill that
                # reset to 5 s before the outage skipped 1,500 of them when reading took longer than that.
                when_ms = production_started_ms - 1000
                when = datetime.fromtimestamp(when_ms / 1000, tz=UTC).isoformat()
                say(f"5. resetting the group on west to {when} (before the oldest record it had not processed)")
                applied = _cli(
                    "failover",
                    "reset-to-time",
                    "--config",
                    str(path),
                    "--group",
                    group,
                    "--time",
                    when,
                    "--apply",
                    "--json",
                )
            if applied.returncode != 0:
                raise UserError(f"applying offsets failed: {applied.stderr.strip()}", 1)
            say("6. the same application resumes on west")
            on_west = consume(west, f"east.{topic}", group, stop_after=None)
            target_has = read_whole(west, f"east.{topic}")
        finally:
            if mirror.poll() is None:
                mirror.kill()
    finally:
        if clusters:
            clusters.stop()
    seen = set(on_east) | set(on_west)
    lost = sum(1 for value in set(target_has) if value not in seen)
    duplicates = len(on_east) + len(on_west) - len(seen)
    result: dict[str, Any] = {
        "mode": mode,
        "delivery": delivery,
        "records": records,
        "on_target": len(target_has),
        "consumed_on_east": len(on_east),
        "consumed_on_west": len(on_west),
        "lost": lost,
        "duplicates": duplicates,
        "predicted_duplicates": predicted if mode == "checkpoint" else None,
    }
    result["ok"] = lost == 0 and (mode == "time" or (predicted is not None and duplicates <= predicted))
    return result


@click.command(
    "drill", help="Rehearse a failover on the project's own local clusters (refuses elsewhere without --i-know)."
)
@click.option("--mode", type=click.Choice(["checkpoint", "time"]), default="checkpoint", show_default=True)
@click.option("--records", default=20_000, show_default=True)
@click.option(
    "--delivery",
    type=click.Choice(["at_least_once", "exactly_once"]),
    default="at_least_once",
    show_default=True,
    help="the drill's mirror.delivery (exactly_once: the target holds commit markers; docs/exactly-once.md)",
)
@click.option(
    "--config",
    "config_path",
    default=None,
    type=click.Path(dir_okay=False),
    help="use the config's clusters instead of a fresh local pair (the outage is then simulated)",
)
@click.option("--i-know", "i_know", is_flag=True, help="allow clusters that are not on this machine's loopback")
@click.option("--unplanned", is_flag=True, help="the source killed under traffic; the tail found, exported, checked")
@click.option("--planned", is_flag=True, help="a planned switchover: RPO 0, 0 lost, re-deliveries within the bound")
@click.option("--rate", default=2000, show_default=True, help="--unplanned, --planned: records per second")
@click.option("--json", "as_json", is_flag=True)
def drill(
    mode: str,
    records: int,
    delivery: str,
    config_path: str | None,
    i_know: bool,
    unplanned: bool,
    planned: bool,
    rate: int,
    as_json: bool,
) -> int:
    if unplanned:
        return _drill_unplanned(records, rate, as_json)
    if planned:
        return _drill_planned(records, rate, as_json)
    if config_path is not None:
        cfg = load_config(config_path)
        name, flow = cfg.flow(None)
        outside = [a for a in (flow.source, flow.target) if not is_loopback(cfg.clusters[a].bootstrap_servers)]
        if outside and not i_know:
            raise UserError(
                f"refusing to drill on cluster(s) {', '.join(outside)} that are not this machine's own; "
                "add --i-know to rehearse there (it writes a drill topic and a group, never stops a cluster)",
                2,
            )
    say = (lambda *_: None) if as_json else click.echo
    result = run_drill(mode, records, Path(tempfile.mkdtemp(prefix="mw-drill-")), say, config_path, delivery)
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f"7. verified by an independent reader of west: {result['on_target']} records on the target, "
            f"lost {result['lost']}, re-delivered {result['duplicates']}"
            + (
                f" (the check predicted at most {result['predicted_duplicates']})"
                if mode == "checkpoint"
                else " (time-based failover re-delivers what arrived after the chosen time)"
            )
        )
        click.echo(f"drill {'PASSED' if result['ok'] else 'FAILED'}")
        click.echo(FAILBACK)
    return 0 if result["ok"] else 1


def _drill_unplanned(records: int, rate: int, as_json: bool) -> int:
    from .drill_unplanned import run_unplanned

    say = (lambda *_: None) if as_json else click.echo
    result = run_unplanned(records, rate, Path(tempfile.mkdtemp(prefix="mw-drill-")), say)
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f"10. verified by an independent reader: {result['independent_missing']} east records missing from "
            f"west, the tail said {result['tail_records']}, the export holds {result['exported']} "
            f"({'exactly those' if result['export_matches'] else 'NOT those'}); home again on east: "
            f"{result['on_home']} records; unaccounted for: {result['unaccounted']} of "
            f"{result['produced_acknowledged']} acknowledged"
        )
        for g in result["groups_read_into_tail"]:
            click.echo(f"   group {g['group']} had processed {g['records']} of the tail on east")
        click.echo(f"drill {'PASSED' if result['ok'] else 'FAILED'}; the failback done (mirror failback plan --wipe):")
        for number, step in enumerate(result["failback_steps"], 1):
            click.echo(f"   {number}) {step}")
    return 0 if result["ok"] else 1


def _drill_planned(records: int, rate: int, as_json: bool) -> int:
    from .drill_planned import run_planned

    say = (lambda *_: None) if as_json else click.echo
    result = run_planned(records, rate, Path(tempfile.mkdtemp(prefix="mw-drill-")), say)
    if as_json:
        click.echo(json.dumps(result))
    else:
        click.echo(
            f"6. verified by an independent reader of west: {result['on_target']} records on the target, "
            f"{result['rpo_records']} acknowledged records missing there (RPO), lost {result['lost']}, "
            f"re-delivered {result['duplicates']} (the switchover stated at most {result['redelivery_bound']})"
        )
        click.echo(f"drill {'PASSED' if result['ok'] else 'FAILED'}")
    return 0 if result["ok"] else 1
