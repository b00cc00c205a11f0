"""Coordinator-targeted admin calls, run in a helper process so that librdkafka cannot abort the caller.

librdkafka 2.16 (confluent-kafka 2.16.1) aborts the whole process (``rd_kafka_enq_once_del_source_return:
Assertion 'eonce->refcnt > 0' failed``, sometimes SIGSEGV) when a request to a group coordinator fails to be
sent because the coordinator's connection dropped, as when a broker restarts: DescribeConsumerGroups,
ListConsumerGroupOffsets, AlterConsumerGroupOffsets. The fix is confluentinc/librdkafka#5397, not released yet.
The long-lived processes (the monitor, the mirror's topic refresh and checkpointer) make these calls through
here: each cluster gets one helper process (``core.coordinator_worker``), started at the first call, and a crash
costs the call in flight (it raises :class:`HelperDied`) and the start of a new helper at the next call.

Answers and Kafka errors come back as a direct admin call gives them (``KafkaException(KafkaError(...))`` with
the same code, text and flags). Anything else (the helper died, did not answer in time, was closed) raises an
exception that is *not* a ``KafkaException``, naming what could not be read, so that callers fail closed.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from confluent_kafka import KafkaError, KafkaException

from .config import ClusterConfig
from .coordinator_protocol import (
    TP,
    CoordinatorCallFailed,
    GroupDescription,
    decode,
    description_of,
    encode,
    offsets_of,
    offsets_result,
    raise_answer,
)
from .redact import redact_text

log = logging.getLogger("mirrorwatch.kafka.coordinator")

WORKER_MODULE = "mirrorwatch.core.coordinator_worker"
UPSTREAM_FIX = "confluentinc/librdkafka#5397"
# beyond the call's own timeout: the helper's start (an interpreter and the client library) and its reply
GRACE_S = 10.0
STOP_WAIT_S = 2.0  # a helper whose stdin is closed exits at once; past this it is killed


class HelperDied(CoordinatorCallFailed):
    """The helper process ended while a call was in flight: what it was reading is unknown."""


class _Gone(Exception):
    """The helper's pipes closed: it ended."""


class _Helper:
    """One helper process and its pipes; used under its owner's lock, one request at a time."""

    def __init__(self, properties: dict[str, str]):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # a terminal's Ctrl-C goes to the parent, which then closes the helper
        )
        self.closing = False  # set when its owner stops it: its end is then not news
        self._buffer = b""
        self.last_words: collections.deque[str] = collections.deque(maxlen=20)
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self._stdin: IO[bytes] = self.proc.stdin
        self._stdout_fd = self.proc.stdout.fileno()
        self._drain = threading.Thread(target=self._read_stderr, args=(self.proc.stderr,), daemon=True)
        self._drain.name = f"coordinator-helper-{self.proc.pid}-stderr"
        self._drain.start()
        self.send({"properties": properties})

    def _read_stderr(self, stream: IO[bytes]) -> None:
        # librdkafka's own log lines and, at a crash, the assertion: the last few are kept for the warning
        for line in stream:
            self.last_words.append(line.decode(errors="replace").strip())

    def send(self, message: dict[str, Any]) -> None:
        try:
            self._stdin.write(encode(message))
            self._stdin.flush()
        except (BrokenPipeError, ValueError):  # ValueError: the pipe was closed by stop()
            raise _Gone() from None

    def receive(self, deadline: float) -> dict[str, Any] | None:
        """The next answer line, or None if none came by ``deadline``; raises _Gone when the helper ended."""
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                ready, _, _ = select.select([self._stdout_fd], [], [], left)
                chunk = os.read(self._stdout_fd, 65536) if ready else None
            except (OSError, ValueError):
                raise _Gone() from None
            if chunk == b"":
                raise _Gone()
            self._buffer += chunk or b""
        line, _, self._buffer = self._buffer.partition(b"\n")
        return decode(line)

    def how_it_ended(self) -> str:
        """'SIGABRT' / 'exit status 1', with the last line it wrote to stderr (redacted)."""
        try:
            rc = self.proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:  # its pipes closed but it lingers: it is no use any more
            self.proc.kill()
            rc = self.proc.wait()
        self._drain.join(1.0)
        how = f"{signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        # librdkafka's log lines start with "%<level>|"; what the crash said (the assertion) does not
        said = [w for w in self.last_words if w and not w.startswith("%")]
        last = next((w for w in reversed(said) if "ssert" in w), said[-1] if said else "")
        return f"{how}: {redact_text(last)}" if last else how

    def stop(self) -> None:
        """Close stdin (the helper exits), wait briefly, then kill; always reaped, so no zombie is left."""
        self.closing = True
        try:
            self._stdin.close()
        except OSError:  # the helper is gone already: flushing what was left failed
            pass
        try:
            self.proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_pipes()

    def kill(self) -> None:
        self.closing = True
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def _close_pipes(self) -> None:
        self._drain.join(1.0)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class CoordinatorCalls:
    """Coordinator-targeted admin calls on one cluster, through its helper process (thread-safe: one request at
    a time). Each call is bounded by its ``timeout_s`` (plus the helper's start and reply, :data:`GRACE_S`)."""

    def __init__(self, cluster: ClusterConfig, client_id: str = "mirrorwatch-coordinator"):
        self._properties = {"client.id": f"{client_id}@{socket.gethostname()}", **cluster.properties}
        self._lock = threading.Lock()
        self._helper: _Helper | None = None
        self._sequence = 0
        self.grace_s = GRACE_S

    @property
    def pid(self) -> int | None:
        """The running helper's process id (None before the first call or after a close)."""
        helper = self._helper
        return helper.proc.pid if helper is not None and helper.proc.poll() is None else None

    def describe_groups(self, groups: list[str], timeout_s: float) -> dict[str, GroupDescription | Exception]:
        """Each group's description, or the exception its own answer carries (as a direct call's futures)."""
        if not groups:
            return {}
        what = f"the description of group(s) {', '.join(repr(g) for g in groups)}"
        # each group is answered on its own, so a client that timed out says so per group, not for the call
        answers = self._call({"op": "describe", "groups": groups}, what, timeout_s, renew_if=_a_group_timed_out)
        out: dict[str, GroupDescription | Exception] = {}
        for group in groups:
            try:
                out[group] = description_of(raise_answer(answers[group], f"the description of group '{group}'"))
            except Exception as exc:
                out[group] = exc
        return out

    def describe_group(self, group: str, timeout_s: float) -> GroupDescription:
        answer = self.describe_groups([group], timeout_s)[group]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def committed_offsets(self, group: str, timeout_s: float) -> dict[TP, int]:
        """The group's committed offsets, partitions without one (offset < 0) left out."""
        answer = self._call({"op": "offsets", "group": group}, f"the committed offsets of group '{group}'", timeout_s)
        return {tp: o for tp, o in offsets_of(answer).items() if o >= 0}

    def alter_offsets(self, group: str, offsets: dict[TP, int], timeout_s: float) -> int:
        """Commit ``offsets`` for ``group``; returns how many partitions were written."""
        what = f"whether the offsets of group '{group}' were written"
        return int(self._call({"op": "alter", "group": group, "offsets": offsets_result(offsets)}, what, timeout_s))

    def _call(
        self, request: dict[str, Any], what: str, timeout_s: float, renew_if: Callable[[Any], bool] | None = None
    ) -> Any:
        """The answer's result; ``renew_if(result)`` says when a result still shows a client that gave up."""
        with self._lock:
            deadline = time.monotonic() + timeout_s + self.grace_s
            helper = self._running_helper()
            self._sequence += 1
            try:
                helper.send({"id": self._sequence, "timeout_s": timeout_s, **request})
                answer = helper.receive(deadline)
                if answer is None or answer.get("id") != self._sequence:
                    raise self._hung(helper, what, timeout_s, answer)
            except _Gone:
                raise self._died(helper, what) from None
            try:
                result = raise_answer(answer, what)
                if renew_if is not None and renew_if(result):
                    self._renew(helper)
                return result
            except KafkaException as exc:
                if _gives_up_on_client(exc):
                    self._renew(helper)
                raise
            except TimeoutError:
                self._renew(helper)
                raise

    def _renew(self, helper: _Helper) -> None:
        """A request timed out: the next call starts a new helper. librdkafka 2.16's long-lived admin client went
        on timing out group requests for minutes after a broker restarted, while a new client was answered at once
        (as the monitor's own admin client, which ClusterReader renews the same way)."""
        self._helper = None
        helper.stop()

    def _running_helper(self) -> _Helper:
        helper = self._helper
        if helper is not None and helper.proc.poll() is not None:
            # it ended between calls (e.g. a late answer to a timed-out request aborted it): no call lost
            self._report_end(helper, "between calls")
            helper = None
        if helper is None:
            helper = self._helper = self._start()
        return helper

    def _start(self) -> _Helper:
        helper = _Helper(self._properties)
        try:
            ready = helper.receive(time.monotonic() + self.grace_s)
        except _Gone:
            raise self._died(helper, "the client configuration") from None
        if ready is None:
            raise self._hung(helper, "the client configuration", 0, None)
        if ready.get("result") != "ready":
            self._helper = None
            helper.stop()
            raise_answer(ready, "the client configuration")  # a property librdkafka refused: its KafkaException
        return helper

    def _died(self, helper: _Helper, what: str) -> CoordinatorCallFailed:
        self._helper = None
        if helper.closing:
            helper.kill()
            helper._close_pipes()
            return CoordinatorCallFailed(f"cannot read {what}: the coordinator-call helper was closed")
        how = self._report_end(helper, f"while reading {what}")
        return HelperDied(
            f"cannot read {what}: the coordinator-call helper (pid {helper.proc.pid}) died ({how}); "
            "the next call starts a new one"
        )

    def _report_end(self, helper: _Helper, when: str) -> str:
        how = helper.how_it_ended()
        helper._close_pipes()
        log.warning(
            "the coordinator-call helper (pid %d) for %s died %s (%s): librdkafka 2.16's admin client aborts when "
            "a group coordinator's connection drops (%s); the next call starts a new helper",
            helper.proc.pid,
            self._properties["bootstrap.servers"],
            when,
            how,
            UPSTREAM_FIX,
        )
        return how

    def _hung(
        self, helper: _Helper, what: str, timeout_s: float, answer: dict[str, Any] | None
    ) -> CoordinatorCallFailed:
        self._helper = None
        helper.kill()
        helper._close_pipes()
        why = "no answer" if answer is None else f"an answer to another request ({answer.get('id')})"
        return CoordinatorCallFailed(
            f"cannot read {what}: {why} from the coordinator-call helper within {timeout_s + self.grace_s:g} s "
            f"(pid {helper.proc.pid}, stopped; the next call starts a new one)"
        )

    def close(self) -> None:
        """Stop the helper (stdin closed, a short wait, then killed). A call in flight on another thread gets
        :class:`CoordinatorCallFailed`; a later call starts a new helper."""
        if self._lock.acquire(timeout=STOP_WAIT_S):
            try:
                helper, self._helper = self._helper, None
                if helper is not None:
                    helper.stop()
            finally:
                self._lock.release()
            return
        helper = self._helper
        if helper is not None:
            helper.kill()  # the call in flight sees its end, and reaps and closes what is left


def _gives_up_on_client(exc: KafkaException) -> bool:
    """A Kafka error that says the client timed out, not that the cluster answered."""
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and err.code() in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT)


def _a_group_timed_out(answers: dict[str, dict[str, Any]]) -> bool:
    """Whether a describe's per-group answers include one the client gave up on. librdkafka 2.16's long-lived
    client went on timing out a restarted single-node cluster's group for good (a monitor stayed UNKNOWN on it)."""
    for answer in answers.values():
        try:
            raise_answer(answer, "a group")
        except KafkaException as exc:
            if _gives_up_on_client(exc):
                return True
        except TimeoutError:
            return True
        except Exception:  # noqa: BLE001 - any other answer says the cluster answered
            continue
    return False


_registry: dict[tuple[tuple[str, str], ...], CoordinatorCalls] = {}
_registry_lock = threading.Lock()


def for_cluster(cluster: ClusterConfig) -> CoordinatorCalls:
    """This process's coordinator calls for ``cluster`` (one helper per cluster, shared by every caller)."""
    key = tuple(sorted(cluster.properties.items()))
    with _registry_lock:
        calls = _registry.get(key)
        if calls is None:
            calls = _registry[key] = CoordinatorCalls(cluster)
        return calls


def close_all() -> None:
    """Stop every helper this process started (a service's shutdown); a later call starts a new one."""
    with _registry_lock:
        every = list(_registry.values())
    for calls in every:
        calls.close()
