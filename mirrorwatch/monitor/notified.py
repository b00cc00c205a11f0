"""What the leader has notified, kept in the election topic, and what a new leader owes (docs/ha.md).

The leading monitor records, after the POSTs of each status-change webhook, the status it notified for that group
as a keyed record in the election topic (``leader.topic``, compacted): key ``monitor/notified/<cluster>/<group>``.
OK is the implicit status of a group never notified (as :class:`~.webhooks.Notifier` assumes at start), so it is
written as a tombstone and the topic keeps only the groups that are not OK. A monitor that becomes the leader reads
these records to the end and notifies every group whose current status differs from the recorded one
(:func:`takeover_changes`): exactly the changes the previous leader did not send. Pure functions; the I/O is the
election's (core/leader.py) and the notifier's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..core.status import GROUP_STATUS, GroupStatus

PREFIX = "monitor/notified/"

GroupKey = tuple[str, str]  # (cluster, group)


def record_key(key: GroupKey) -> str:
    cluster, group = key
    return f"{PREFIX}{cluster}/{group}"  # unique per group; the value says which group (names may hold "/")


def record_value(key: GroupKey, status: int, ts_ms: int) -> bytes | None:
    """The record for a notified status; OK (the implicit status) is a tombstone."""
    if status == GroupStatus.OK:
        return None
    body = {"cluster": key[0], "group": key[1], "status": GROUP_STATUS[status], "ts_ms": ts_ms}
    return json.dumps(body, separators=(",", ":")).encode()


def parse_records(records: Mapping[str, bytes]) -> dict[GroupKey, int]:
    """(cluster, group) → last notified status code, from the election topic's records under :data:`PREFIX`.
    Records that do not parse (another version's, a hand-written one) are skipped: the group then counts as OK."""
    out: dict[GroupKey, int] = {}
    for key, value in records.items():
        if not key.startswith(PREFIX):
            continue
        try:
            body = json.loads(value)
            out[(str(body["cluster"]), str(body["group"]))] = GroupStatus[body["status"]]
        except (ValueError, KeyError, TypeError):
            continue
    return out


def takeover_changes(notified: Mapping[GroupKey, int], current: Mapping[GroupKey, int]) -> list[tuple[GroupKey, int]]:
    """The groups a new leader must notify, each with the status last notified for it (OK when none was):
    every group it sees now whose status differs from what was last notified. Groups no longer seen are not
    notified (there is nothing to say about them now)."""
    return [
        (key, notified.get(key, GroupStatus.OK))
        for key, status in current.items()
        if status != notified.get(key, GroupStatus.OK)
    ]
