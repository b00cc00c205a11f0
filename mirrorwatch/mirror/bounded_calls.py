"""The producer's transactional calls, each given a bound it cannot overstay.

Why: librdkafka (2.16) blocked ``send_offsets_to_transaction(..., 5 s)`` for good in the fault suite, after the
exactly-once mirror's positions group coordinator was SIGKILLed on a three-node target and its fenced consumer
replaced: the application thread waited in ``rd_kafka_txn_op_req0`` for an answer of the client's main thread that
never came, the target rolled the open transaction back on its timeout, and the mirror stood still without a line.
A call's own timeout bounds only its second half (waiting for the result), not the hand-over to the client's thread.

How: each call runs on a thread of its own while the data path waits for it, at most ``HUNG_FACTOR`` times the
call's own timeout; past that it raises :class:`CallHung` and the caller replaces the producer (a new one with the same transactional id fences the
stuck one and aborts what it left open). The stuck thread and its producer are left as they are: neither can be
freed while librdkafka is inside them."""

from __future__ import annotations

import threading
from collections.abc import Callable

# a call's bound, in multiples of its own timeout: well past any answer that timeout allows (librdkafka sets its result
# when the timeout passes), short enough that a stuck producer is replaced before the monitor's STOP rule could see a
# mirror that stopped committing (its window: 10 samples of 5 s by default)
HUNG_FACTOR = 3.0


class CallHung(Exception):
    """A transactional call did not return within its bound: the producer is stuck inside it."""

    def __init__(self, what: str, waited_s: float) -> None:
        super().__init__(f"{what} did not return within {waited_s:.0f} s")
        self.what, self.waited_s = what, waited_s


def call_bounded(call: Callable[[], None], what: str, timeout_s: float, factor: float = HUNG_FACTOR) -> None:
    """``call()``, given its own ``timeout_s``, on a thread of its own; its exception is raised here;
    :class:`CallHung` past ``factor`` times its timeout."""
    bound_s = timeout_s * factor
    done = threading.Event()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, raised there
            raised.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"txn {what}", daemon=True).start()
    if not done.wait(bound_s):
        raise CallHung(what, bound_s)
    if raised:
        raise raised[0]
