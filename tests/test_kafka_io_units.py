"""Which failed offset reads make the monitor start its next cycle with a new admin client (pure logic)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirrorwatch.monitor.kafka_io import _timed_out


@pytest.mark.parametrize(
    "exc, renew",
    [
        (TimeoutError("no answer within the request timeout"), True),
        (KafkaException(KafkaError(KafkaError._TIMED_OUT)), True),
        (KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT)), True),
        (KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)), False),  # a topic not created yet
        (KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)), False),
        (ValueError("anything else"), False),
    ],
)
def test_a_read_that_timed_out_renews_the_client(exc, renew):
    assert _timed_out(exc) is renew
