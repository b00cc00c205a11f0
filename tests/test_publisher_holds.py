"""Exactly-once offset syncs trail by one transaction (mirror/publisher.py ``hold_syncs``, mirror/transactions.py):
a sync built while a transaction is open is produced only into the next one, so it becomes readable only after
the records it claims are. Pure: the publisher's own bookkeeping, with a recorder in place of the producer."""

from __future__ import annotations

import pytest

from mirrorwatch.mirror.publisher import PositionPublisher


class Recorder:
    """Stands in for the producer: records what would be written, in order."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def produce(self, topic: str, key: bytes, value: bytes, on_delivery: object = None) -> None:
        self.written.append(value)


def _publisher(hold: bool) -> tuple[PositionPublisher, Recorder]:
    publisher = PositionPublisher({}, "syncs")
    recorder = Recorder()
    publisher.bind(recorder, None)  # type: ignore[arg-type]
    publisher.hold_syncs = hold
    return publisher, recorder


# (case, events, written at the end, held at the end). Events: "sync N" builds a sync with value N (as
# emit_syncs/send_deferred would), "commit" is a committed transaction (release_held), "abort" an aborted one.
CASES = [
    ("at-least-once: written at once", False, ["sync 1", "sync 2"], [b"1", b"2"], []),
    ("held while its transaction is open", True, ["sync 1", "sync 2"], [], [b"1", b"2"]),
    ("released into the next transaction once its own committed", True, ["sync 1", "commit"], [b"1"], []),
    ("built during the next one: held again", True, ["sync 1", "commit", "sync 2"], [b"1"], [b"2"]),
    ("its transaction aborted: dropped (it claimed aborted records)", True, ["sync 1", "abort"], [], []),
    (
        "the transaction it was released into aborted: held again (its records are committed)",
        True,
        ["sync 1", "commit", "sync 2", "abort"],
        [b"1"],
        [b"1"],
    ),
    (
        "held again, then released after the next commit",
        True,
        ["sync 1", "commit", "abort", "commit"],
        [b"1", b"1"],
        [],
    ),
]


@pytest.mark.parametrize("case,hold,events,written,held", CASES, ids=[c[0] for c in CASES])
def test_syncs_trail_by_one_transaction(case, hold, events, written, held):
    publisher, recorder = _publisher(hold)
    for event in events:
        if event.startswith("sync "):
            publisher._publish(b"key", event.split()[1].encode())
        elif event == "commit":
            publisher.release_held()
        elif event == "abort":
            publisher.transaction_aborted()
    assert recorder.written == written
    assert [value for _, value in publisher.held] == held


def test_release_says_whether_the_open_transaction_now_carries_syncs():
    publisher, _ = _publisher(True)
    assert publisher.release_held() is False  # nothing held: the open transaction need not commit for syncs
    publisher._publish(b"key", b"1")
    assert publisher.release_held() is True
