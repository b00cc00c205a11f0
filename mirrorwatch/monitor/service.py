"""``monitor run``: sampler + evaluator + history + exporter + HTTP API in one process.

APScheduler runs one sampling cycle every ``monitor.interval_s`` (never two at once; a late cycle is
coalesced, not queued). Every cycle publishes a new immutable Snapshot; the exporter, the API and the
webhook notifier only read snapshots, so none of them can slow or break sampling. Any failure inside a cycle
is logged and the next cycle runs as usual.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from apscheduler.schedulers.background import BackgroundScheduler
from prometheus_client import generate_latest

from ..core.cli import UserError, listen_error
from ..core.config import Config
from ..core.httpserver import Server, metrics_route, probe_registry
from ..core.leader import Election, election_for, export_leader_gauge
from ..core.probes import ProbeState, stale_after_s
from .analytics_runs import AnalyticsRunner, HistoryRetention
from .api import make_router
from .canary_scrape import CanaryScraper
from .exporter import MetricsCache
from .history import HistoryWriter, snapshot_table
from .model import EMPTY, Snapshot
from .recent import RecentStore
from .sampler import Sampler
from .webhooks import Notifier

log = logging.getLogger("mirrorwatch.monitor.service")


class MonitorService:
    def __init__(self, config: Config):
        self.config = config
        s = config.monitor
        self.sampler = Sampler(config, start_trackers=False)
        self.history = HistoryWriter(s.history_dir, s.history_roll_s) if s.history else None
        # leader.enabled: only the leader sends webhooks and runs the scheduled Spark job (docs/ha.md)
        self.election = election_for(config, "monitor")
        election = self.election if isinstance(self.election, Election) else None  # AlwaysLeader: not enabled
        self.notifier = Notifier(s.webhooks, s.webhook_timeout_s, s.webhook_retries, election=election)
        self.metrics = MetricsCache(self.snapshot, series=s.series)
        self.recent = RecentStore(s.recent_minutes)
        self.canary = _canary_scraper(config)
        self.analytics: AnalyticsRunner | None = None
        if s.analytics.every_s is not None:
            out = s.analytics.out or config.dashboard.analytics_dir
            retention = HistoryRetention(s.history_raw_days, s.history_rollup_days)
            self.analytics = AnalyticsRunner(
                s.analytics, s.history_dir, out, retention=retention, history_roll_s=s.history_roll_s
            )
        self._snapshot: Snapshot = EMPTY
        self._cycle_lock = threading.Lock()
        self.scheduler = BackgroundScheduler(timezone="UTC")
        self.api_server: Server | None = None
        self.metrics_server: Server | None = None
        self.cycles = 0
        # /healthz, /readyz: the sampling cycle is the loop; a cluster has answered once a sample reached it
        self.probes = ProbeState(config.clusters)
        self.probes.config_loaded()
        # the service's own gauges beside the snapshot's families: alive, ready, is_leader (read at scrape time)
        self._service_metrics = probe_registry(self.probes, "monitor")
        export_leader_gauge(self.election, self._service_metrics)

    def snapshot(self) -> Snapshot:
        return self._snapshot

    def start(self) -> MonitorService:
        s = self.config.monitor
        try:
            if s.metrics_port is not None:
                route = metrics_route(self._metrics_text, self.probes)
                self.metrics_server = Server(s.host, s.metrics_port, route, "metrics").start()
            if s.http_port is not None:
                router = make_router(
                    self.snapshot,
                    list(self.config.clusters),
                    recent=self.recent,
                    analytics=self.analytics.status if self.analytics else None,
                    probes=self.probes,
                )
                self.api_server = Server(s.host, s.http_port, router, "status-api").start()
        except OSError as exc:  # name the port and the setting that chose it
            setting, port = (
                ("monitor.http_port", s.http_port)
                if self.metrics_server or s.metrics_port is None
                else ("monitor.metrics_port", s.metrics_port)
            )
            if self.metrics_server:
                self.metrics_server.close()
            assert port is not None  # only a server with a port fails to listen
            raise UserError(listen_error(exc, s.host, port, setting), 2) from None
        self.election.start()
        self.probes.watch("sampling", stale_after_s(s.interval_s))
        self.sampler.start()
        self.sampler.wait_caught_up(min(5.0, s.interval_s))
        self.scheduler.add_job(
            self.cycle,
            "interval",
            seconds=s.interval_s,
            id="sample",
            max_instances=1,
            coalesce=True,
            next_run_time=_now_dt(),
        )
        if self.canary is not None:
            self.scheduler.add_job(
                self.canary.scrape,
                "interval",
                seconds=s.interval_s,
                id="canary-scrape",
                max_instances=1,
                coalesce=True,
                next_run_time=_now_dt(),
            )
        a = s.analytics
        if self.analytics is not None and a.every_s is not None:  # (a runner exists only with every_s)
            # its own thread from APScheduler's pool, its work in a child process: sampling never waits for it
            first = a.every_s if a.first_delay_s is None else a.first_delay_s
            self.scheduler.add_job(
                self._run_analytics,
                "interval",
                seconds=a.every_s,
                id="analytics",
                max_instances=1,
                coalesce=True,
                next_run_time=_now_dt(first),
            )
        # a cycle slowed by an unreachable cluster makes APScheduler skip the next run (coalesced, by design)
        # and warn each time; the cluster's own warning already says what is wrong
        logging.getLogger("apscheduler.scheduler").setLevel(logging.ERROR)
        self.scheduler.start()
        log.info(
            "monitor: sampling every %gs; metrics on %s:%s, API on %s:%s",
            s.interval_s,
            s.host,
            self.metrics_server.port if self.metrics_server else "-",
            s.host,
            self.api_server.port if self.api_server else "-",
        )
        return self

    def cycle(self) -> Snapshot | None:
        with self._cycle_lock:
            self.probes.tick("sampling")  # at the start and the end: only a cycle that never ends goes stale
            try:
                snap = self.sampler.sample()
            except Exception:
                log.exception("sampling cycle failed; trying again next interval")
                return None
            finally:
                self.probes.tick("sampling")
            self._snapshot = snap
            self.cycles += 1
            for alias, up in snap.cluster_up.items():
                self.probes.answered(alias, up)
            self.probes.cycle_done()
            try:
                canary = self.canary.latest if self.canary is not None else None
                self.recent.record(snap, canary, canary_fresh_ms=int(3000 * self.config.monitor.interval_s) + 2000)
            except Exception:
                log.exception("recent figures: cannot record the sample")
            try:
                if self.history is not None:
                    self.history.append(snapshot_table(snap))
            except Exception:
                log.exception("history: cannot append samples")
            try:
                self.notifier.observe(snap)
            except Exception:
                log.exception("webhooks: cannot queue notifications")
            return snap

    def _run_analytics(self, scheduled: bool = True) -> None:
        if scheduled and not self.election.is_leader():
            log.debug("analytics: the scheduled run is the leader's")
            return
        every_s = self.config.monitor.analytics.every_s
        assert self.analytics is not None and every_s is not None  # scheduled only when both are
        status = self.analytics.run()
        if status.state == "waiting":
            # no closed history file yet: look again within a minute rather than a whole interval later
            retry = min(every_s, 60.0)
            self.scheduler.add_job(
                self._retry_analytics, "date", run_date=_now_dt(retry), id="analytics-retry", replace_existing=True
            )

    def _retry_analytics(self) -> None:
        assert self.analytics is not None  # scheduled by _run_analytics only
        if self.election.is_leader():
            self.analytics.run()

    def run_analytics_now(self) -> None:
        """The scheduled Spark job at once (``monitor run`` on SIGUSR1); a run already going is not doubled."""
        if self.analytics is None:
            log.warning("analytics: asked to run now, but monitor.analytics.every_s is not set")
            return
        log.info("analytics: asked to run now")
        try:
            self.scheduler.add_job(
                self._run_analytics,
                "date",
                run_date=_now_dt(),
                id="analytics-now",
                replace_existing=True,
                kwargs={"scheduled": False},  # asked of this replica: it runs, leader or not
            )
        except Exception as exc:  # e.g. the scheduler is shutting down: a signal must never print a traceback
            log.warning("analytics: cannot run now: %s", exc)

    def _metrics_text(self) -> bytes:
        return self.metrics.render() + generate_latest(self._service_metrics)

    def stop(self) -> None:
        self.election.stop()  # first: the other replica takes over while this one shuts down
        if self.analytics is not None:
            self.analytics.stop()  # a Spark run in progress must not hold the shutdown
        try:
            self.scheduler.shutdown(wait=True)
        except Exception:  # not started
            pass
        with self._cycle_lock:
            if self.history is not None:
                self.history.close()
        for server in (self.api_server, self.metrics_server):
            if server is not None:
                server.close()
        self.notifier.close()
        self.sampler.close()
        log.info("monitor: stopped")


def _now_dt(delay_s: float = 0.0) -> datetime:
    from datetime import timedelta

    return datetime.now(UTC) + timedelta(seconds=delay_s)


def _canary_scraper(config: Config) -> CanaryScraper | None:
    """The canary's metrics address from the same config (the canary publishes there), or None without one."""
    c = config.canary
    if not c.metrics_port or not config.flows:
        return None
    host = "127.0.0.1" if c.metrics_host in ("0.0.0.0", "", "::") else c.metrics_host
    return CanaryScraper(
        f"http://{host}:{c.metrics_port}/metrics",
        hold_s=2 * c.interval_s + config.monitor.interval_s,
        timeout_s=min(2.0, config.monitor.interval_s),
    )


def run_until_signalled(service: MonitorService, stop: threading.Event) -> None:
    service.start()
    try:
        while not stop.wait(1.0):
            if service.election.fatal:
                raise UserError(f"leader: {service.election.fatal}", 2)
    finally:
        service.stop()
