"""One YAML file for everything: clusters, flows, and the mirror/canary/monitor sections.

Environment overrides (applied before validation, so they are validated like the file):
``MIRRORWATCH__<SECTION>__<KEY>[__<KEY>...]=value`` sets a nested key. Segments match existing keys
case-insensitively with ``_``, ``.`` and ``-`` treated alike, so ``MIRRORWATCH__CLUSTERS__EAST__SASL_PASSWORD``
sets ``clusters.east.sasl.password`` and ``MIRRORWATCH__MIRROR__COMMIT_INTERVAL_S=1`` sets
``mirror.commit_interval_s``. A new key under ``clusters.<alias>`` takes dots for underscores (librdkafka
property names use dots); elsewhere it is lower-cased. Values are read as YAML scalars ("5" → 5).
String values may also say ``${VAR}`` or ``${VAR:-default}`` to take a value (typically a secret) from the
environment.

Every problem becomes one :class:`ConfigError` line naming the key: ``flows.ew.source: cluster 'eest' is not
defined (defined: east, west)``.

This module is the models and their rules; the loading itself (file, interpolation, overrides, validation into
:class:`Config`) is :mod:`.config_loading` (``load_config``, ``config_from_dict``), which imports the models from
here and never the other way round, so that each of the two imports on its own. The MirrorMaker 2 settings of a
flow (:class:`MirrorMaker2Settings`, :class:`ConnectRestSettings`) are in :mod:`.config_mm2`, imported here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .config_mm2 import ConnectRestSettings as ConnectRestSettings  # re-exported: the config models, all in one place
from .config_mm2 import MirrorMaker2Settings as MirrorMaker2Settings
from .config_section import Section
from .redact import MASK, is_secret_key

_SCALARS = (str, int, float, bool)


class ConfigError(Exception):
    """A config problem, already phrased as one line for the user."""


class ClusterConfig(Section):
    """A cluster: librdkafka client properties, ``bootstrap.servers`` required.

    Any librdkafka property passes through (SASL, SSL, timeouts); secrets are masked in every repr.
    """

    properties: dict[str, str]

    @model_validator(mode="before")
    @classmethod
    def _wrap_properties(cls, data: Any) -> Any:
        if isinstance(data, dict) and set(data) != {"properties"}:
            return {"properties": data}
        return data

    @field_validator("properties", mode="before")
    @classmethod
    def _scalars_only(cls, props: Any) -> Any:
        if not isinstance(props, dict):
            raise ValueError("expected a mapping of client properties")
        out = {}
        for key, value in props.items():
            if not isinstance(value, _SCALARS) or value is None:
                raise ValueError(f"property '{key}' must be a string, number or boolean")
            out[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
        if not out.get("bootstrap.servers"):
            raise ValueError("'bootstrap.servers' is required")
        return out

    @property
    def bootstrap_servers(self) -> str:
        return self.properties["bootstrap.servers"]

    def redacted(self) -> dict[str, str]:
        return {k: (MASK if is_secret_key(k) else v) for k, v in self.properties.items()}

    def __repr_args__(self) -> Iterator[tuple[str, dict[str, str]]]:
        yield "properties", self.redacted()


class FlowConfig(Section):
    """One replication direction: source alias → target alias, which topics, how they are named."""

    source: str
    target: str
    topics: list[str] = Field(default_factory=lambda: [".*"], description="include regexes (full match)")
    exclude: list[str] = Field(default_factory=list, description="exclude regexes (full match)")
    policy: Literal["prefix", "identity"] = "prefix"
    separator: str = Field(".", min_length=1)
    group: str | None = Field(None, description="the mirror's consumer group on the source")
    checkpoint_groups: list[str] = Field(default_factory=lambda: [".*"], description="source groups to checkpoint")
    sync_group_offsets: bool = False
    internal_topics: bool = Field(
        True,
        description="this flow creates and mirrors the pair's heartbeats and canary topics; with several flows "
        "on one cluster pair set it false on all but one, or every heartbeat and canary event arrives twice",
    )
    mirror: MirrorMaker2Settings | None = Field(
        None, description="set when the flow is mirrored by MirrorMaker 2 (then policy/separator/group come from here)"
    )

    @field_validator("topics", "exclude", "checkpoint_groups")
    @classmethod
    def _regexes_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"bad regex {pattern!r}: {exc}") from None
        return patterns


class MirrorSettings(Section):
    commit_interval_s: float = Field(5.0, gt=0)
    refresh_interval_s: float = Field(30.0, gt=0, description="how often new matching topics are looked for")
    config_sync_interval_s: float = Field(60.0, gt=0, description="topic config / partition count sync period")
    offset_sync_every: int = Field(1000, ge=1, description="emit an offset sync at least every N records")
    offset_sync_interval_s: float | None = Field(
        None,
        gt=0,
        description="emit an offset sync for every partition that moved at least this often; default: "
        "0.1 s under the identity policy (the monitor's true lag and RPO seconds rest on them there), the commit "
        "interval under prefix (the monitor reads progress off the target's end offsets)",
    )
    on_records_lost: Literal["stop", "continue"] = Field(
        "stop",
        description="source records removed before they were mirrored (retention, DeleteRecords, a "
        "recreated topic): stop with one line and exit code 4, or continue, logging at ERROR and counting them "
        "in mirrorwatch_mirror_records_lost_total",
    )
    delivery: Literal["at_least_once", "exactly_once"] = Field(
        "at_least_once",
        description="exactly_once: records and source positions in one transaction on the target; a crash "
        "re-delivers nothing to read_committed readers (docs/exactly-once.md)",
    )
    transaction_interval_s: float = Field(
        0.1,
        gt=0,
        description="exactly_once: the longest a transaction stays open while records keep coming (a backlog); "
        "read_committed readers see records only after it commits (BENCHMARKS.md shows the trade-off)",
    )
    transaction_min_interval_s: float = Field(
        0.01,
        ge=0,
        description="exactly_once: a transaction commits as soon as the mirror has read everything waiting and "
        "this long (at most transaction_interval_s) has passed since the last commit ended; the added latency at "
        "moderate rates is about one commit plus this",
    )
    transaction_hold_s: float = Field(
        0.003,
        ge=0,
        le=0.1,
        description="exactly_once: after a commit the mirror has caught up with, wait this long before the next "
        "transaction's first record: the target accepts it only once the last one's commit markers are written, "
        "and the client retries a refusal after 20 ms; 0 = no wait (docs/exactly-once.md)",
    )
    transaction_timeout_s: float = Field(
        10.0,
        ge=1,
        description="exactly_once: the target aborts a transaction left open this long (a crashed or frozen "
        "mirror); until then read_committed readers wait at it",
    )
    checkpoint_interval_s: float = Field(10.0, gt=0)
    heartbeats: bool = True
    heartbeat_interval_s: float = Field(1.0, gt=0)
    heartbeats_topic: str = "heartbeats"
    batch_size: int = Field(5000, ge=1, description="records per consume() call")
    max_in_flight: int = Field(
        200_000,
        ge=1,
        description="stop reading while this many records are sent but not yet acknowledged (checked per consume batch)",
    )
    instance_id: str | None = Field(None, description="static group membership id; unique per worker")
    provenance_header: bool | None = Field(
        None,
        description="add the mw.origin header (source alias) to every record; default: only under the identity "
        "policy, where it is what stops active-active loops (under the prefix policy the topic name already says "
        "where a record came from, and ~15 bytes per record is not free)",
    )
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = Field(9641, ge=0, le=65535, description="0 = any free port, null = off")
    max_unreachable_s: float | None = Field(
        None,
        gt=0,
        description="exit (code 3) after a cluster has been unreachable this long; null = wait for it forever",
    )
    producer: dict[str, str | int | float | bool] = Field(default_factory=dict)
    consumer: dict[str, str | int | float | bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _exact_or_refused(self) -> MirrorSettings:
        if self.delivery == "exactly_once" and self.on_records_lost == "continue":
            raise ValueError(
                "delivery: exactly_once cannot be exact with on_records_lost: continue (the gap would be skipped "
                "without a mark on the target); set on_records_lost: stop or delivery: at_least_once"
            )
        # set above the interval it is a mistake to say; left at its default it follows a shorter interval
        minimum_set = "transaction_min_interval_s" in self.model_fields_set
        if minimum_set and self.transaction_min_interval_s > self.transaction_interval_s:
            raise ValueError(
                f"transaction_min_interval_s ({self.transaction_min_interval_s}) must not be above "
                f"transaction_interval_s ({self.transaction_interval_s})"
            )
        if self.delivery == "exactly_once" and self.transaction_interval_s >= self.transaction_timeout_s:
            raise ValueError(
                f"transaction_interval_s ({self.transaction_interval_s}) must be below transaction_timeout_s "
                f"({self.transaction_timeout_s})"
            )
        return self


class CanarySettings(Section):
    topic: str = "mw.canary"
    partitions: int = Field(3, ge=1)
    interval_s: float = Field(60.0, ge=1)
    warn_latency_s: float = Field(5.0, gt=0)
    crit_latency_s: float = Field(30.0, gt=0)
    heartbeat_max_age_s: float = Field(60.0, gt=0)
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = Field(9642, ge=0, le=65535)
    # added by the canary (issue 4)
    connect_timeout_s: float = Field(
        5.0, gt=0, description="metadata request limit; a cluster slower than this is UNKNOWN"
    )
    replication_factor: int = Field(-1, description="for the canary topics it creates; -1 = broker default")
    log_append_time: bool = Field(
        True, description="create the target canary topic with LogAppendTime (exact arrival times)"
    )

    @model_validator(mode="after")
    def _warn_below_crit(self) -> CanarySettings:
        if self.warn_latency_s >= self.crit_latency_s:
            raise ValueError(
                f"warn_latency_s ({self.warn_latency_s}) must be below crit_latency_s ({self.crit_latency_s})"
            )
        return self


class WatchedGroup(Section):
    cluster: str
    group: str


class AnalyticsSchedule(Section):
    """``monitor.analytics``: the monitor runs ``monitor analyze`` over its own history on a timer."""

    every_s: float | None = Field(None, ge=10, description="run the Spark job this often (seconds); unset = never")
    master: str = Field("local[2]", description="Spark master for the scheduled job, e.g. spark://host:7077")
    out: str | None = Field(None, description="output folder; default dashboard.analytics_dir, else .cache/analytics")
    timeout_s: float = Field(900.0, gt=0, description="a run still going after this long is killed (and reported)")
    lookback_days: float = Field(7.0, gt=0, description="analyse the history of this many days back from now")
    slo_lag: int = Field(10_000, ge=0, description="SLO: max true lag (records), as `monitor analyze --slo-lag`")
    slo_time_s: float = Field(60.0, ge=0, description="SLO: max time lag (s), as `monitor analyze --slo-time`")
    first_delay_s: float | None = Field(None, ge=0, description="first run this long after start; default every_s")


class MonitorSettings(Section):
    interval_s: float = Field(5.0, gt=0)
    window: int = Field(10, ge=2)
    min_distance_s: float = Field(0.0, ge=0)
    allowed_lag: int = Field(0, ge=0)
    time_lag_mode: Literal["exact", "interpolate"] = "exact"
    history_dir: str = ".cache/history"
    host: str = "127.0.0.1"
    http_port: int | None = Field(9644, ge=0, le=65535)
    metrics_port: int | None = Field(9643, ge=0, le=65535)
    webhooks: list[str] = Field(default_factory=list)
    webhook_timeout_s: float = Field(5.0, gt=0)
    groups: list[WatchedGroup] = Field(default_factory=list, description="other consumer groups to watch")
    # added by the monitor (issue 5)
    stop_grace_s: float = Field(0.0, ge=0, description="extra floor for the window span in the STOP rule")
    group_commit_interval_s: float = Field(5.0, ge=0, description="expected commit interval of monitor.groups")
    interpolation_points: int = Field(60, ge=2, description="(source_end, time) pairs kept per partition")
    history: bool = Field(True, description="write lag samples to Parquet under history_dir")
    history_roll_s: float = Field(3600.0, gt=0, le=3600, description="roll history files at least this often")
    # issue 38: compaction, minute roll-ups and expiry run in the scheduled analytics job, on the leader
    history_raw_days: float = Field(
        7.0, gt=0, description="keep raw lag samples this many days (expired by the scheduled analytics job)"
    )
    history_rollup_days: float = Field(
        30.0, gt=0, description="keep the history's minute roll-ups this many days (docs/analytics.md)"
    )
    webhook_retries: int = Field(3, ge=0, description="retries after a failed webhook POST")
    recent_minutes: float = Field(60.0, gt=0, le=1440, description="per-flow figures kept in memory for /recent")
    analytics: AnalyticsSchedule = Field(default_factory=AnalyticsSchedule, description="scheduled Spark analytics")
    # added for issue 26: a Prometheus that can afford the scrape
    series: Literal["partition", "topic", "flow"] = Field(
        "partition",
        description="level of the exported per-partition series (lags, RPO, records lost, partition status): "
        "partition, topic (summed / worst per topic) or flow (per flow and group); the HTTP API and the page "
        "keep every partition (docs/metrics.md)",
    )
    hanging_transaction_s: float = Field(
        120.0,
        gt=0,
        description="a transactional flow's target partition whose last stable offset stays below its end this long "
        "has a hanging transaction (read_committed readers see nothing past it): the flow goes WARN with the command "
        "to run. Above MM2's and Kafka's 60 s transaction.timeout.ms plus the broker's 10 s abort check "
        '(docs/monitor.md, "Hanging transactions"); raise it for producers with a longer timeout',
    )


class DashboardSettings(Section):
    """The Streamlit status page (``monitor dashboard``); unset URLs are derived from the monitor/canary sections."""

    host: str = "127.0.0.1"
    port: int = Field(8501, ge=1, le=65535)
    monitor_url: str | None = Field(None, description="monitor HTTP API base; default http://monitor.host:http_port")
    canary_url: str | None = Field(None, description="canary /metrics URL; default from canary.metrics_*; '' = none")
    analytics_dir: str | None = Field(None, description="`monitor analyze --out` folder; default .cache/analytics")
    refresh_s: float = Field(5.0, ge=1, description="default auto-refresh interval")
    overview_minutes: float = Field(15.0, gt=0, description="the overview's charts show this many recent minutes")
    timeout_s: float = Field(3.0, gt=0, description="HTTP timeout towards the monitor and the canary")


class LeaderSettings(Section):
    """``leader``: two or more monitors (or canaries) on one config elect one leader through a Kafka consumer group
    (docs/ha.md); only the leader does the singleton work (the monitor's webhooks and scheduled Spark run)."""

    enabled: bool = Field(False, description="elect a leader; off = this process is always the leader")
    cluster: str | None = Field(None, description="the cluster that hosts the election group; default the first one")
    topic: str = Field("mirrorwatch.leader", min_length=1, description="election topic (1 partition, compacted)")
    session_timeout_s: float = Field(
        10.0,
        gt=0,
        description="a leader silent this long is replaced (the election group's session.timeout.ms; the brokers "
        "allow 6 to 1800 s by default)",
    )


class Config(Section):
    clusters: dict[str, ClusterConfig]
    flows: dict[str, FlowConfig] = Field(default_factory=dict)
    mirror: MirrorSettings = Field(default_factory=MirrorSettings)
    canary: CanarySettings = Field(default_factory=CanarySettings)
    monitor: MonitorSettings = Field(default_factory=MonitorSettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
    leader: LeaderSettings = Field(default_factory=LeaderSettings)

    @model_validator(mode="after")
    def _references_resolve(self) -> Config:
        defined = ", ".join(sorted(self.clusters)) or "none"
        for name, flow in self.flows.items():
            for role in ("source", "target"):
                alias = getattr(flow, role)
                if alias not in self.clusters:
                    raise _KeyedError(f"flows.{name}.{role}", f"cluster '{alias}' is not defined (defined: {defined})")
            if flow.source == flow.target:
                raise _KeyedError(f"flows.{name}.target", "must differ from the source cluster")
            if flow.policy == "identity" and self.mirror.provenance_header is False:
                raise _KeyedError(
                    "mirror.provenance_header",
                    f"flow '{name}' uses the identity policy, which needs the "
                    "header to stop active-active loops; remove the setting or set it to true",
                )
        self._no_contradictions()
        if self.leader.enabled and not self.clusters:
            raise _KeyedError("leader.enabled", "the election needs a cluster; define one under 'clusters:'")
        if self.leader.cluster is not None and self.leader.cluster not in self.clusters:
            raise _KeyedError("leader.cluster", f"cluster '{self.leader.cluster}' is not defined (defined: {defined})")
        for i, watched in enumerate(self.monitor.groups):
            if watched.cluster not in self.clusters:
                raise _KeyedError(
                    f"monitor.groups.{i}.cluster", f"cluster '{watched.cluster}' is not defined (defined: {defined})"
                )
        return self

    def _no_contradictions(self) -> None:
        """Settings that are each valid but cannot hold together: one line naming both."""
        session_ms = float(self.mirror.consumer.get("session.timeout.ms", 10_000))
        if self.mirror.commit_interval_s * 1000 >= session_ms:
            raise _KeyedError(
                "mirror.commit_interval_s",
                f"{self.mirror.commit_interval_s:g} s is not shorter than the "
                f"mirror group's session timeout ({session_ms / 1000:g} s, mirror.consumer.session.timeout.ms): "
                "a worker taken over by another re-sends everything since its last commit; lower it",
            )
        if self.mirror.heartbeats and self.canary.heartbeat_max_age_s <= self.mirror.heartbeat_interval_s:
            raise _KeyedError(
                "canary.heartbeat_max_age_s",
                f"{self.canary.heartbeat_max_age_s:g} s is not longer than "
                f"mirror.heartbeat_interval_s ({self.mirror.heartbeat_interval_s:g} s): every heartbeat "
                "would look stale; raise it",
            )
        engine_eos = self.mirror.delivery == "exactly_once" and any(f.mirror is None for f in self.flows.values())
        if engine_eos and self.monitor.hanging_transaction_s <= self.mirror.transaction_timeout_s:
            raise _KeyedError(
                "monitor.hanging_transaction_s",
                f"{self.monitor.hanging_transaction_s:g} s is not longer than mirror.transaction_timeout_s "
                f"({self.mirror.transaction_timeout_s:g} s): a crashed mirror's transaction, which the target aborts "
                "by then, would be called hanging; raise it",
            )
        analytics = self.monitor.analytics
        if analytics.every_s is not None and analytics.lookback_days > self.monitor.history_raw_days:
            raise _KeyedError(
                "monitor.analytics.lookback_days",
                f"{analytics.lookback_days:g} days is longer than monitor.history_raw_days "
                f"({self.monitor.history_raw_days:g}): the scheduled job expires raw samples after that, so it would "
                "analyse less than asked; lower it or raise history_raw_days",
            )
        ports: dict[tuple[str, int], str] = {}
        for key, host, port in (
            ("mirror.metrics_port", self.mirror.metrics_host, self.mirror.metrics_port),
            ("canary.metrics_port", self.canary.metrics_host, self.canary.metrics_port),
            ("monitor.metrics_port", self.monitor.host, self.monitor.metrics_port),
            ("monitor.http_port", self.monitor.host, self.monitor.http_port),
            ("dashboard.port", self.dashboard.host, self.dashboard.port),
        ):
            if not port:  # null = off, 0 = any free port
                continue
            if (host, port) in ports:
                raise _KeyedError(key, f"port {port} on {host} is also {ports[(host, port)]}; give each its own port")
            ports[(host, port)] = key

    def leader_cluster(self) -> tuple[str, ClusterConfig]:
        """The alias and settings of the cluster that hosts the election group (``leader.cluster``, else the first)."""
        alias = self.leader.cluster or next(iter(self.clusters))
        return alias, self.clusters[alias]

    def flow(self, name: str | None) -> tuple[str, FlowConfig]:
        """The named flow, or the only one; a clear error otherwise."""
        if name is None:
            if len(self.flows) == 1:
                return next(iter(self.flows.items()))
            if not self.flows:
                raise ConfigError("flows: no flow is defined; add one under 'flows:'")
            raise ConfigError(f"several flows are defined ({', '.join(self.flows)}); choose one with --flow")
        if name not in self.flows:
            raise ConfigError(f"flow '{name}' is not defined (defined: {', '.join(self.flows) or 'none'})")
        return name, self.flows[name]


class _KeyedError(ValueError):
    def __init__(self, key: str, problem: str):
        super().__init__(problem)
        self.key, self.problem = key, problem
