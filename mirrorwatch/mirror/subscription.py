"""The mirror engine's topics, a mix-in of MirrorEngine: the topic thread lists the flow's source topics, creates
and syncs their target topics (admin calls block, so they stay off the data path) and hands a new subscription
over; the data path applies it between reads (the consumer is the data path's alone)."""

from __future__ import annotations

import logging
import time

from ..core.access import Denied
from .engine_state import EngineState
from .topics import list_matching

log = logging.getLogger("mirrorwatch.mirror")


class EngineSubscription(EngineState):
    def refresh_topics(self, with_configs: bool) -> None:
        topics = list_matching(self.source_admin, self.topic_filter)
        ready = self.target_topics.sync(topics, with_configs)
        self._topics_listed(ready, with_configs)
        for name in ready:
            self._name(name)
        with self._subscription_lock:
            if sorted(ready) != self._subscribed:
                self._pending_subscription = sorted(ready)

    def _name(self, source_topic: str) -> str:
        target_topic = self.policy.target_topic(source_topic)
        self.target_names[source_topic] = target_topic
        return target_topic

    def _topic_loop(self) -> None:
        last_config_sync = time.monotonic()
        while not self._stop.wait(self.settings.refresh_interval_s):
            with_configs = time.monotonic() - last_config_sync >= self.settings.config_sync_interval_s
            try:
                self.refresh_topics(with_configs)
                if with_configs:
                    last_config_sync = time.monotonic()
            except Denied as denied:
                self.deny(denied)
                return
            except Exception as exc:  # a cluster away for a while: try again next round
                self._retrying("topic refresh failed (will retry): %s", exc)

    def _apply_subscription(self) -> None:
        with self._subscription_lock:
            topics, self._pending_subscription = self._pending_subscription, None
        if topics is None:
            return
        added = sorted(set(topics) - set(self._subscribed))
        self._subscribed = topics
        if topics and self.exactly_once:  # the positions group on the target shares out the partitions
            targets = [self.target_names.get(t) or self.policy.target_topic(t) for t in topics]
            assert self.members is not None  # made with the engine under exactly-once
            self.members.subscribe(
                targets, on_assign=self._eos_assign, on_revoke=self._eos_revoke, on_lost=self._eos_lost
            )
            log.info("mirroring %d topic(s) exactly once%s", len(topics), f"; new: {', '.join(added)}" if added else "")
        elif topics:
            self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost)
            log.info("mirroring %d topic(s)%s", len(topics), f"; new: {', '.join(added)}" if added else "")
