"""Faults on the session's local clusters: a broker frozen (SIGSTOP) for a block, tests that need the local
launcher to do it, and a group's commits read while a coordinator is still loading."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import KafkaError, KafkaException

from .mirror_flows import committed_offsets as _committed_once

if TYPE_CHECKING:
    from ..conftest import TestCluster


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's commits; a coordinator still loading (a fresh or just-resumed cluster) is asked again."""
    for attempt in range(60):
        try:
            return _committed_once(bootstrap, group, topic, partitions)
        except KafkaException as exc:
            if attempt == 59 or not (
                exc.args[0].retriable() or exc.args[0].code() in (KafkaError.NOT_COORDINATOR, KafkaError._TIMED_OUT)
            ):
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable: the last attempt returns or raises")


def local_only(*clusters: TestCluster) -> None:
    for cluster in clusters:
        if cluster.local is None:
            pytest.skip("needs the local launcher (freezes a broker)")


@contextlib.contextmanager
def frozen(cluster: TestCluster) -> Iterator[None]:
    """SIGSTOP the cluster's broker; SIGCONT on the way out, whatever happens."""
    assert cluster.local is not None and cluster.local.proc is not None, "a local cluster's broker (local_only)"
    pid = cluster.local.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)
