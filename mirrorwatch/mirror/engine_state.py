"""What the mirror engine's mixins share: the attributes ``MirrorEngine.__init__`` (and each mixin's ``_init_*``)
sets, and the methods one mixin calls on another. Each mixin inherits :class:`EngineState`, so ``self.producer``,
``self.watch``, ``self._retrying`` and the rest are typed once, here, and checked where they are defined.

Declarations only: nothing here runs. The attributes are bare annotations and the methods are declared under
``TYPE_CHECKING``, so this class adds nothing to the engine at run time (every mixin comes before it in the
method resolution order, so no declaration could shadow an implementation anyway)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

if TYPE_CHECKING:
    from ..core.access import AccessProblem, Denied
    from ..core.config import ClusterConfig, Config, FlowConfig, MirrorSettings
    from ..core.naming import ReplicationPolicy
    from ..core.probes import ProbeState
    from ..core.topic_selection import TopicFilter
    from .acknowledgement import RecordFailure
    from .checkpoints import CheckpointEmitter
    from .commit_rounds import CommitRounds
    from .heartbeat import HeartbeatProducer
    from .metrics import LatencyHistogram
    from .outage import ClusterWatch
    from .partition_state import FifoEntry, PartitionState
    from .positions import PositionReads
    from .publisher import PositionPublisher
    from .topics import TargetTopics

Key = tuple[str, int]  # a source partition: (topic, partition)


class EngineState:
    # the flow and its clusters (MirrorEngine.__init__)
    config: Config
    flow_name: str
    flow: FlowConfig
    settings: MirrorSettings
    policy: ReplicationPolicy
    group: str
    source_cluster: ClusterConfig
    target_cluster: ClusterConfig
    syncs_topic: str
    internal_topics: set[str]
    topic_filter: TopicFilter
    target_topics: TargetTopics

    # the clients
    producer: Producer
    consumer: Consumer
    source_admin: AdminClient
    target_admin: AdminClient

    # positions and what the data path counts
    partitions: dict[Key, PartitionState]
    set_aside: dict[Key, tuple[int, int]]  # at-least-once: (acked_next, downstream) of partitions gone from here
    publisher: PositionPublisher
    owned: frozenset[Key]  # the keys of partitions, for other threads to read
    touched: list[PartitionState]
    target_names: dict[str, str]
    latency: LatencyHistogram
    produce_errors: dict[tuple[str, bool], int]
    rebalances: int
    heartbeats_sent: int
    failures: list[RecordFailure]
    fatal_error: KafkaError | None
    lost: list[tuple[str, int, int, int]]
    records_lost: dict[Key, int]
    access_problem: AccessProblem | None

    # the subscription the topic thread hands over (subscription.py)
    _stop: threading.Event
    _pending_subscription: list[str] | None
    _subscription_lock: threading.Lock
    _subscribed: list[str]

    # start-up and background threads (lifecycle.py)
    probes: ProbeState
    watch: ClusterWatch
    heartbeats: HeartbeatProducer | None
    checkpoints: CheckpointEmitter | None
    topics_thread: threading.Thread | None
    gave_up: str | None

    # exactly-once (transactions.py, positions.py)
    exactly_once: bool
    members: Consumer | None  # the positions group's consumer on the target
    position_reads: PositionReads | None
    transaction_refused: str | None
    _produced_since_commit: bool
    _fence_pending: KafkaError | None

    if TYPE_CHECKING:
        # engine.py
        def _make_consumer(self) -> Consumer: ...
        def _producer_props(self) -> dict[str, Any]: ...
        def _commit_positions(self, sync: bool = True, hold_s: float = 0.0) -> None: ...

        # lifecycle.py
        def _retrying(self, message: str, *args: object) -> None: ...
        def _topics_listed(self, ready: list[str], with_configs: bool) -> None: ...
        def _end_background(self) -> None: ...

        # access_guard.py
        def deny(self, denied: Denied) -> None: ...
        def _as_problem(self, denied: Denied) -> AccessProblem: ...
        def _check_access(self) -> None: ...

        # subscription.py
        def refresh_topics(self, with_configs: bool) -> None: ...
        def _name(self, source_topic: str) -> str: ...
        def _topic_loop(self) -> None: ...

        # reports.py
        def _segment_failed(self, state: PartitionState, entry: FifoEntry, err: KafkaError, msg: Message) -> None: ...
        def _failed(
            self, state: PartitionState, source_offset: int, target_topic: str, size: int, err: KafkaError
        ) -> None: ...
        def _sync_due(self, state: PartitionState, entry: FifoEntry, msg: Message) -> None: ...
        def _serve(self, timeout: float) -> None: ...
        def _flush(self, timeout: float) -> int: ...

        # consumer_guard.py
        def _on_stats(self, stats_json: str) -> None: ...
        def _retire(self, old: Consumer) -> None: ...
        def _note_consumer_error(self, err: KafkaError) -> None: ...

        # rebalances.py (at-least-once)
        def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None: ...
        def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None: ...
        def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None: ...
        def _set_aside(self, keys: list[Key], flush_s: float = 0.0) -> None: ...

        # transactions.py, positions.py (exactly-once)
        def _init_transactions(self) -> None: ...
        def _report_failed(self, state: PartitionState, err: KafkaError) -> bool: ...
        def _commit_transaction(self, hold_s: float = 0.0) -> bool: ...
        def _transaction_hold(self, since_commit_s: float, rounds: CommitRounds) -> float: ...
        def _abort(self, why: str, always: bool = False) -> None: ...
        def _close_transactions(self) -> None: ...
        def _fenced(self, err: KafkaError) -> None: ...
        def _replace_members(self) -> None: ...
        def _eos_assign(self, members: Consumer, partitions: list[TopicPartition]) -> None: ...
        def _eos_revoke(self, members: Consumer, partitions: list[TopicPartition]) -> None: ...
        def _eos_lost(self, members: Consumer, partitions: list[TopicPartition]) -> None: ...
