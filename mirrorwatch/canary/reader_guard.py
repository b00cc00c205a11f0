"""When the canary's long-lived target reader counts as stuck (pure rule; the service acts on it).

A librdkafka client can stay unable to reach a restarted cluster that a new client reaches at once
(confluentinc/librdkafka#5301). For the canary's reader that would look exactly like a mirror that stopped:
every probe CRITICAL, for good. The difference is on the target: a stopped mirror writes nothing there, while
a stuck reader leaves records unread that the target's log already holds.
"""

from __future__ import annotations

CHECK_EVERY_S = 15.0  # far above a healthy reader's delay (it polls every 0.2 s), far below an on-call's patience

Offsets = dict[int, int]  # partition -> offset


def reader_stuck(previous_ends: Offsets | None, previous_next: Offsets | None, next_: Offsets) -> bool:
    """True when, at the previous look, the target's log already held records past where the reader would read
    next, and the reader has not read one of them since (a look is ``CHECK_EVERY_S`` apart).

    ``previous_ends``: the log-end offsets of the target canary partitions at the previous look (asked with the
    canary's admin client, which is renewed after a failure); ``*_next``: the next offset the reader would read
    in each. Using the previous look's ends, not the current ones, keeps a record that arrived a moment ago
    from counting against a reader that is merely about to read it.
    """
    if previous_ends is None or previous_next is None:
        return False
    waiting = [p for p, end in previous_ends.items() if p in previous_next and end > previous_next[p]]
    return bool(waiting) and all(next_.get(p) == previous_next[p] for p in waiting)
