"""mirror/bounded_calls.py: a transactional call that librdkafka never returns from is abandoned after its bound
(plain values: the stuck call is a thread waiting on an event that is never set)."""

from __future__ import annotations

import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorwatch.mirror.bounded_calls import CallHung, call_bounded


def test_a_call_that_returns_is_waited_for():
    seen: list[str] = []
    call_bounded(lambda: seen.append(threading.current_thread().name), "commit_transaction", 5)
    assert seen == ["txn commit_transaction"]


def test_its_exception_is_raised_in_the_caller():
    def refused() -> None:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Timed out", retriable=True))

    with pytest.raises(KafkaException) as raised:
        call_bounded(refused, "send_offsets_to_transaction", 5)
    assert raised.value.args[0].code() == KafkaError._TIMED_OUT


def test_a_call_that_never_returns_is_given_up_after_its_bound():
    never = threading.Event()
    with pytest.raises(CallHung) as hung:
        call_bounded(never.wait, "send_offsets_to_transaction", 0.1, factor=2)
    assert (hung.value.what, hung.value.waited_s) == ("send_offsets_to_transaction", 0.2)
    assert "did not return within" in str(hung.value)
    never.set()  # let the abandoned thread end with the test
