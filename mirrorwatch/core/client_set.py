"""Client lifetimes: an admin client is never freed while one of its requests is outstanding, and a command's
clients and threads are closed in one order (stop and join threads, wait out admin requests, close consumers,
flush producers, drop the references), so the interpreter can tear down normally.

Why (docs/design.md, "Teardown"): freeing a librdkafka admin client fails its broker connections, and the
broker threads then fail the requests still outstanding. For a request fanned out to group coordinators
(``describe_consumer_groups``, ``list_consumer_group_offsets``) that path reads the parent request's freed
memory: a broker thread died of SIGSEGV in ``rd_kafka_ConsumerGroupDescription_copy_opaque`` while the main
thread was inside ``rd_kafka_destroy`` (librdkafka 2.16; the same family as confluentinc/librdkafka#5397).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

log = logging.getLogger("mirrorwatch.kafka")

# An admin request without a request_timeout of its own is bounded by librdkafka's socket.timeout.ms (60 s by
# default); every one of ours sets a shorter one. Past this, a request that still has no answer is left to the
# client library: the process is not held any longer for it.
SETTLE_S = 30.0

# The AdminClient methods that return futures (one, or a dict of them); each is a request in flight until done.
_REQUESTS = (
    "alter_configs",
    "alter_consumer_group_offsets",
    "create_acls",
    "create_partitions",
    "create_topics",
    "delete_acls",
    "delete_consumer_groups",
    "delete_records",
    "delete_topics",
    "describe_acls",
    "describe_cluster",
    "describe_configs",
    "describe_consumer_groups",
    "describe_topics",
    "elect_leaders",
    "incremental_alter_configs",
    "list_consumer_group_offsets",
    "list_consumer_groups",
    "list_offsets",
)


class _Outstanding:
    """The futures of one admin client that are not done yet (thread-safe; done ones remove themselves)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._futures: set[concurrent.futures.Future[Any]] = set()

    def add(self, result: object) -> None:
        futures = list(result.values()) if isinstance(result, dict) else [result]
        for future in futures:
            if isinstance(future, concurrent.futures.Future):
                with self._lock:
                    self._futures.add(future)
                future.add_done_callback(self._discard)

    def _discard(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._futures.discard(future)

    def wait(self, timeout_s: float) -> int:
        """Wait until none is outstanding or ``timeout_s`` passed; how many are still outstanding."""
        with self._lock:
            pending = list(self._futures)
        if pending:
            concurrent.futures.wait(pending, timeout=timeout_s)
        with self._lock:
            return len(self._futures)


class TrackedAdmin(AdminClient):
    """An AdminClient that knows its outstanding requests and, when it is let go, waits them out (at most
    SETTLE_S) before librdkafka frees it. ``core.clients.make_admin`` makes these."""

    def __init__(self, conf: dict[str, Any], **kwargs: Any) -> None:
        self._outstanding = _Outstanding()  # before the client exists: __del__ reads it
        super().__init__(conf, **kwargs)

    def settle(self, timeout_s: float = SETTLE_S) -> int:
        """Wait for this client's requests to finish (at most ``timeout_s``); how many are still outstanding."""
        return self._outstanding.wait(timeout_s)

    def __del__(self) -> None:
        # Runs before the client library frees the handle, on the thread that let the client go. With requests
        # still outstanding the client is kept (resurrected into _RETIRED) and waited out on a thread of its own:
        # whoever let it go goes on at once. The monitor's sampler replaces a client whose requests time out; waiting
        # out such a client's requests on the sampler stopped sampling for minutes while brokers restarted.
        if self._outstanding.wait(0) == 0:
            return
        with _retired_lock:
            _RETIRED.append(self)
        threading.Thread(target=_free_when_settled, args=(self,), name="admin-settle", daemon=True).start()


# Admin clients let go with requests outstanding: kept until those end, then freed by their settling thread. One
# whose requests never end within SETTLE_S stays here for good: freeing it under them is what crashed.
_RETIRED: list[TrackedAdmin] = []
_retired_lock = threading.Lock()


def _free_when_settled(admin: TrackedAdmin) -> None:
    left = admin.settle()
    if left:
        log.debug("an admin client let go with %d request(s) still outstanding after %g s: kept", left, SETTLE_S)
        return
    with _retired_lock:
        _RETIRED.remove(admin)
    # the last reference ends with this thread: the handle is freed here, its requests all answered


def _tracking(name: str) -> Callable[..., object]:
    request = getattr(AdminClient, name)

    def call(self: TrackedAdmin, *args: Any, **kwargs: Any) -> object:
        result = request(self, *args, **kwargs)
        self._outstanding.add(result)
        return result

    call.__name__ = call.__qualname__ = name
    call.__doc__ = request.__doc__
    return call


for _name in _REQUESTS:
    setattr(TrackedAdmin, _name, _tracking(_name))


def settle(admins: Iterable[AdminClient], timeout_s: float = SETTLE_S) -> int:
    """Wait out the requests of every tracked admin client among ``admins``, within one overall bound."""
    deadline = time.monotonic() + timeout_s
    left = 0
    for admin in admins:
        if isinstance(admin, TrackedAdmin):
            left += admin.settle(max(0.0, deadline - time.monotonic()))
    return left


def join_all(threads: Iterable[threading.Thread | None], timeout_s: float) -> list[str]:
    """Join every thread within one overall bound; the names of those still running after it."""
    deadline = time.monotonic() + timeout_s
    waited = [t for t in threads if t is not None and t is not threading.current_thread()]
    for thread in waited:
        if thread.ident is not None:  # started
            thread.join(max(0.0, deadline - time.monotonic()))
    return [t.name for t in waited if t.is_alive()]


def close_bounded(consumer: Consumer, timeout_s: float) -> bool:
    """``consumer.close()``, waited for at most ``timeout_s``; whether it finished. A close that does not end (a
    client in a broken state) is left to its daemon thread, which keeps the consumer: it is never freed under it."""

    def close() -> None:
        try:
            consumer.close()
        except Exception as exc:  # closed already, or a fatal client error: nothing more to release
            log.debug("closing a consumer: %s", exc)

    closer = threading.Thread(target=close, name="consumer-close", daemon=True)
    closer.start()
    closer.join(timeout_s)
    return not closer.is_alive()


class _Stoppable(Protocol):
    def stop(self) -> None: ...


class ClientSet:
    """The clients and threads one command (or one service) owns, closed in a defined order by ``close()``:

    1. ``stop()`` every registered stoppable, join every registered thread (bounded; a thread still inside a
       client call keeps its clients, and they are not freed under it);
    2. wait out the admin clients' outstanding requests (bounded: SETTLE_S);
    3. close the consumers (leaves a group, if one was joined; never commits here);
    4. flush the producers (bounded) and purge what is left;
    5. drop the references, so each handle is freed now, on this thread, while the interpreter is whole.

    Use it as a context manager or call ``close()`` once; both are idempotent.
    """

    def __init__(self, flush_s: float = 5.0, join_s: float = 10.0) -> None:
        self.flush_s, self.join_s = flush_s, join_s
        self._lock = threading.Lock()
        self._stoppables: list[_Stoppable] = []
        self._threads: list[threading.Thread] = []
        self._admins: list[AdminClient] = []
        self._consumers: list[Consumer] = []
        self._producers: list[Producer] = []

    def admin(self, admin: AdminClient) -> AdminClient:
        with self._lock:
            self._admins.append(admin)
        return admin

    def consumer(self, consumer: Consumer) -> Consumer:
        with self._lock:
            self._consumers.append(consumer)
        return consumer

    def producer(self, producer: Producer) -> Producer:
        with self._lock:
            self._producers.append(producer)
        return producer

    def thread(self, thread: threading.Thread) -> threading.Thread:
        with self._lock:
            self._threads.append(thread)
        return thread

    def stoppable(self, stoppable: _Stoppable) -> None:
        with self._lock:
            self._stoppables.append(stoppable)

    def __enter__(self) -> ClientSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> list[str]:
        """Close everything in order; what could not be finished in time, one phrase each (also logged)."""
        with self._lock:
            stoppables, self._stoppables = self._stoppables, []
            threads, self._threads = self._threads, []
            admins, self._admins = self._admins, []
            consumers, self._consumers = self._consumers, []
            producers, self._producers = self._producers, []
        problems: list[str] = []
        for stoppable in stoppables:
            stoppable.stop()
        problems += [f"thread {name} still running" for name in join_all(threads, self.join_s)]
        left = settle(admins)
        if left:
            problems.append(f"{left} admin request(s) still outstanding")
        for consumer in consumers:
            try:
                consumer.close()
            except Exception as exc:  # closed already, or a fatal client error: nothing more to release
                problems.append(f"closing a consumer: {exc}")
        for producer in producers:
            problems += _flushed(producer, self.flush_s)
        for problem in problems:
            log.debug("closing clients: %s", problem)
        # the last references (in this set) go here, after the order above
        del stoppables, threads, admins, consumers, producers
        return problems


def _flushed(producer: Producer, flush_s: float) -> list[str]:
    try:
        unsent = producer.flush(flush_s)
        if unsent:
            producer.purge()
            producer.flush(0)
            return [f"{unsent} record(s) not acknowledged within {flush_s:g} s, purged"]
    except Exception as exc:  # a producer failed fatally (fenced) has nothing left to flush
        return [f"flushing a producer: {exc}"]
    return []
