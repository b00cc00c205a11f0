"""The start-up retry rule of mirror/outage.py, on plain values: which failures are waited out, and that the
start-up steps' clients are replaced after a transient failure (the watch's own probes are stubbed: no Kafka)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorwatch.mirror import outage


class AnsweringWatch:
    """Both clusters answer every probe."""

    clusters = [("source", "east", None), ("target", "west", None)]
    last_error: dict = {}

    def probe(self, role: str) -> bool:
        return True


def transport() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TRANSPORT, "Failed to get metadata: Local: Broker transport failure"))


@pytest.mark.parametrize(
    "failures, final, started, renewed",
    [
        ([], None, True, 0),  # first attempt works
        ([transport()], None, True, 1),  # one transient failure: new clients, retry
        ([transport(), TimeoutError()], None, True, 2),  # each transient failure renews
        (
            [KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))],
            KafkaException,
            False,
            0,
        ),  # never waited out
    ],
)
def test_start_when_reachable_retries_transient_failures_with_new_clients(
    monkeypatch, failures, final, started, renewed
):
    monkeypatch.setattr(outage, "BACKOFF_S", (0.0,))
    pending = list(failures)
    renewals = []

    def start() -> None:
        if pending:
            raise pending.pop(0)

    stopping = threading.Event()
    if final is None:
        assert (
            outage.start_when_reachable(start, AnsweringWatch(), stopping, renew_clients=lambda: renewals.append(1))
            is started
        )
    else:
        with pytest.raises(final):
            outage.start_when_reachable(start, AnsweringWatch(), stopping, renew_clients=lambda: renewals.append(1))
    assert len(renewals) == renewed


@pytest.mark.parametrize(
    "down_since, last_opinion, now, due",
    [
        (None, None, 100.0, False),  # up: nothing to ask
        (90.0, None, 100.0, False),  # down 10 s: a broker restarting, a thaw settling
        (80.0, None, 100.0, True),  # down 20 s: ask a new client
        (50.0, 75.0, 100.0, True),  # and again every 20 s
        (50.0, 85.0, 100.0, False),  # not sooner
        (70.0, 60.0, 100.0, True),  # the last opinion was in an earlier outage
    ],
)
def test_second_opinion_due(down_since, last_opinion, now, due):
    assert outage.SECOND_OPINION_AFTER_S == 20.0
    assert outage.second_opinion_due(down_since, last_opinion, now) is due
