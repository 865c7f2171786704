"""`sentinel run`: follow the journal, keep state, serve metrics, talk to systemd.

The loop itself: run, signals, poll, drain and commit with retry, the watchdog's timing,
housekeeping and reload. What it says goes through announce.py; its parts are built from the
config by wiring.py; the HTTP routes are in http.py.

The loop polls the journal's inotify fd and a signal wake-up pipe together, so it sleeps until
the journal changes or a signal arrives; it never sleeps-and-polls the journal. Each drained
batch is committed with its cursor in one transaction (see state/store.py).
"""

from __future__ import annotations

import dataclasses
import math
import os
import select
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, make_wsgi_app

from .. import __version__
from ..compare import Policy, Snapshot, UnitStatus, stall_after, unit_status
from ..config import Config, plan_reload
from ..errors import ConfigError, JournalError, RuleError, SentinelError, StateError
from ..logs import Logger, configure_logging
from ..model import Comparison
from ..outputs import render_page
from ..pipeline import CommitFailed, Pipeline, load_rules_and_policy
from ..rules import RuleSet
from ..sources import file_reader_path, reader_path
from ..state import StateStore
from .announce import ANNOUNCED_KEPT, Announcer
from .http import BoundedWSGIServer, make_metrics_server, routes
from .kubeapi import pod_labels_of
from .metrics import SentinelCollector
from .wiring import FindingSink, SinkFactory, alert_pusher, build_pipeline

log = Logger("sglang_sentinel")

BATCH = 5_000  # entries between commits while catching up
# Longest stretch of reading between looks at signals, the watchdog and the commit: a SIGTERM
# or a watchdog ping never waits for a whole batch of long lines.
SLICE_S = 0.25
# Retries of a failed commit (database locked, disk full): first after this, doubling up to
# the cap; the records wait in memory and reading pauses meanwhile.
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 30.0
HOUSEKEEPING_S = 1.0  # longest sleep: pin changes, watchdog, status
# Shortest time between two reads of a busy source. A writer wakes the loop at each of its
# writes (a container's log file: a hundred a second at 20,000 lines/s), and each read ends in
# a commit that stores the open startup's whole resumable state (its decode samples): at most
# this many commits a second, whatever the writer does. A line waits at most this long.
DRAIN_INTERVAL_S = 0.1
PAGE_REFRESH_S = 30


@dataclasses.dataclass(frozen=True, slots=True)
class _Snapshot:
    """Per-unit views of the committed state, replaced whole after each commit."""

    views: tuple[UnitStatus, ...] = ()
    pinned: frozenset[str] = frozenset()


_D = TypeVar("_D", bound="Daemon")


class Daemon:
    """One running sentinel: pipeline + metrics endpoint + systemd notifications.

    It is handed its parts: the pipeline (which holds the journal source and the state store it
    commits to), the registry its collector joins, how to build the alert sink, the wall clock
    and how SIGHUP re-reads the configuration. `from_config` builds them from a Config.
    """

    def __init__(
        self,
        config: Config,
        pipeline: Pipeline,
        *,
        registry: CollectorRegistry | None = None,
        sinks: SinkFactory = alert_pusher,
        loader: Callable[[], Config] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.pipeline = pipeline
        # The pipeline's own source, store and counters: one of each, whoever holds it.
        self.source = pipeline.source
        self.store = pipeline.store
        self.stats = pipeline.stats
        self._clock = clock
        self._sinks = sinks
        # How SIGHUP re-reads the configuration: the CLI passes its own loader so that command
        # line overrides (--listen, --state-dir, ...) apply again and are not seen as changes.
        self._loader = loader
        self._stop = False
        self._reload = False
        self._server: BoundedWSGIServer | None = None
        self._data_version = -1
        self._watchdog_s = _watchdog_interval()
        self._last_ping = 0.0
        self.announcer = Announcer()
        self.pusher: FindingSink | None = None
        self._page_lock = threading.Lock()
        # A failed commit: when to retry it, the next wait, and the failures in this episode.
        self._retry_at: float | None = None
        self._retry_wait = RETRY_FIRST_S
        self._failed_commits = 0
        if registry is None:
            registry = CollectorRegistry(auto_describe=False)
        # Pod labels from the Kubernetes API, only when kubernetes.labels names some.
        self.pod_labels = pod_labels_of(config.kubernetes, os.environ)
        registry.register(
            SentinelCollector(self.snapshot, reader=reader_path(), file_reader=file_reader_path())
        )
        self.registry = registry
        self._snapshot = _Snapshot()

    @classmethod
    def from_config(
        cls: type[_D],
        config: Config,
        *,
        loader: Callable[[], Config] | None = None,
        clock: Callable[[], float] = time.time,
        sinks: SinkFactory = alert_pusher,
    ) -> _D:
        """The daemon `config` describes: its rules and policy, state store, journal source and
        pipeline, a registry of its own and the Alertmanager pusher."""
        return cls(config, build_pipeline(config), sinks=sinks, loader=loader, clock=clock)

    @property
    def rules(self) -> RuleSet:
        return self.pipeline.rules

    @property
    def policy(self) -> Policy:
        return self.pipeline.policy

    # -- what the exporter and alerts see ---------------------------------------------------------

    def views(self) -> tuple[UnitStatus, ...]:
        """What the exporter, the status line and the alerts show: the last published snapshot.

        Scrapes run on the HTTP thread; they read this immutable snapshot and never the SQLite
        connection the loop writes through, so a scrape cannot see a row a failed transaction
        later rolls back.
        """
        return self._snapshot.views

    def snapshot(self) -> Snapshot:
        """What one scrape reads (any thread): the published statuses and pins, with the
        policy, copies of the counters and rule hits and this host's GPU taken now."""
        published = self._snapshot
        stats = self.stats
        return Snapshot(
            units=published.views,
            pinned=published.pinned,
            policy=self.policy,
            stats=dataclasses.replace(stats, processing_errors=dict(stats.processing_errors)),
            rule_hits=dict(self.pipeline.tracker.rule_hits),
            gpu=self.config.gpu or "",
            pod_label_names=self.pod_labels.names if self.pod_labels else (),
            pod_labels=self.pod_labels.labels() if self.pod_labels else {},
        )

    def publish(self) -> None:
        """Rebuild the snapshot from committed state (loop thread only, after a commit)."""
        statuses = unit_status(
            self.store,
            self.config.targets,
            self.policy,
            now=self._clock(),
            history=0,
            evaluator=self.pipeline.evaluator,
            on_error=self._view_failed,  # one unit's fault never empties /metrics
        )
        views = []
        pods = self.source.pods
        for status in statuses:
            c = status.comparison
            runtime = self.pipeline.runtime.get(c.record.invocation_id) if c else None
            if runtime:
                status = dataclasses.replace(status, runtime=runtime.facts)
            latest = status.latest
            pod = pods.get(latest.record.invocation_id) if latest is not None else None
            views.append(dataclasses.replace(status, pod=pod) if pod else status)
        self._snapshot = _Snapshot(tuple(views), frozenset(self.store.baselines()))

    def _view_failed(self, unit: str, exc: Exception) -> None:
        # Counted at every publish, logged once per unit and kind: each one would repeat it.
        self.pipeline.faults.failed("metrics", exc, once=(unit, type(exc).__name__), unit=unit)

    def status_page(self) -> str:
        """The page served at `/`: the same renderer as `sentinel report --html`."""
        # A read-only connection of its own per request, opened and closed on the HTTP thread
        # serving it: it sees committed state only, and an SQLite connection must not move
        # between threads. The lock renders one page at a time.
        with self._page_lock:
            store = StateStore(self.config.state_dir, readonly=True)
            try:
                statuses = unit_status(store, self.config.targets, self.policy, now=self._clock())
            except sqlite3.Error as exc:
                raise StateError(f"status page: cannot read the state: {exc}") from exc
            finally:
                store.close()
        return render_page(
            statuses,
            generated_at=time.time(),
            version=__version__,
            refresh_seconds=PAGE_REFRESH_S,
            metrics_link=True,
        )

    # -- lifecycle --------------------------------------------------------------------------------

    def serve(self) -> None:
        host, port = self.config.listen.host, self.config.listen.port
        try:
            server = make_metrics_server(
                host, port, routes(make_wsgi_app(self.registry), self.status_page)
            )
        except OSError as exc:
            raise SentinelError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        self._server = server
        threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
        log.info("metrics_listening", address=f"{host}:{server.server_port}")

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_port)

    def run(self) -> int:
        self.source.open()
        # The local journal starts at this boot; a journal directory or file (another machine's,
        # a copy) is read from its beginning.
        local = self.config.journal.directory is None and not self.config.journal.files
        self.pipeline.resume(
            from_boot_start=local, max_age_seconds=self.config.max_replay_age_seconds
        )
        self.stats.cursor_resets = self.store.counter("cursor_resets")
        self.publish()
        self._remember_announced()
        self.serve()
        self._restart_pusher()
        if self.pod_labels is not None:
            self.pod_labels.start()
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        old_fd = signal.set_wakeup_fd(wake_w)
        handlers = self._install_signals()
        self.announcer.ready()
        log.info(
            "sentinel_started",
            units=list(self.config.targets),
            version=__version__,
            # Which optional C readers pip built (it leaves one out quietly where it cannot).
            journal_reader=reader_path(),
            file_reader=file_reader_path(),
        )
        try:
            self._loop(wake_r)
        finally:
            self.announcer.stopping()
            self._shutdown()
            signal.set_wakeup_fd(old_fd)
            for sig, h in handlers.items():
                signal.signal(sig, h)
            os.close(wake_r)
            os.close(wake_w)
        log.info("sentinel_stopped")
        return 0

    def _install_signals(self) -> dict[int, Any]:
        def on_term(signum: int, frame: FrameType | None) -> None:
            self._stop = True

        def on_hup(signum: int, frame: FrameType | None) -> None:
            self._reload = True

        previous: dict[int, Any] = {}
        for sig, fn in (
            (signal.SIGTERM, on_term),
            (signal.SIGINT, on_term),
            (signal.SIGHUP, on_hup),
        ):
            previous[sig] = signal.signal(sig, fn)
        return previous

    def _loop(self, wake_r: int) -> None:
        poller = select.poll()
        poller.register(self.source.fileno(), self.source.poll_events())
        poller.register(wake_r, select.POLLIN)
        signals = select.poll()  # the wake-up pipe alone: a signal ends a coalescing wait
        signals.register(wake_r, select.POLLIN)
        self._drain()  # catch up with what is already there
        drained_at = time.monotonic()
        longest_sleep_s = HOUSEKEEPING_S
        if self._watchdog_s:
            # Wake often enough to ping at half the interval even when the journal is idle;
            # a quarter leaves room for timer slack (a wake at 99 ms must not skip a ping).
            longest_sleep_s = min(longest_sleep_s, self._watchdog_s / 4)
        while not self._stop:
            timeout_ms = max(1, int(longest_sleep_s * 1000))
            journal_ms = self.source.timeout_ms()
            if journal_ms is not None:
                timeout_ms = min(timeout_ms, journal_ms)
            if self._retry_at is not None:
                wait_ms = int((self._retry_at - time.monotonic()) * 1000)
                timeout_ms = max(1, min(timeout_ms, wait_ms))
            poller.poll(timeout_ms)
            rest = drained_at + DRAIN_INTERVAL_S - time.monotonic()
            if rest > 0 and not self._stop:
                signals.poll(max(1, math.ceil(rest * 1000)))
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            if self._stop:
                break
            self.source.acknowledge_changes()
            self._drain()
            drained_at = time.monotonic()
            if self._reload:
                self._reload = False
                # Loading rules takes up to a few seconds (their size is bounded: yamlfile):
                # the whole watchdog interval is left for it, not what remains of it.
                self._ping_watchdog(now_anyway=True)
                self.reload()
            self._housekeeping()

    def _drain(self) -> None:
        """Read and commit everything available now, in slices of at most BATCH entries and
        SLICE_S seconds; while a commit keeps failing, retry it with backoff and read nothing."""
        while not self._stop:
            if self._retry_at is not None and (
                time.monotonic() < self._retry_at or not self._commit()
            ):
                return
            try:
                n = self.pipeline.process(
                    limit=BATCH,
                    deadline=time.monotonic() + SLICE_S,
                    stop=lambda: self._stop,
                )
            except JournalError as exc:
                self.stats.journal_up = False
                log.error("journal_read_failed", error=str(exc))
                return
            self.stats.journal_up = True
            caught_up = n == 0 or (n < BATCH and not self.pipeline.cut_short)
            if not self._commit(caught_up=caught_up):
                return
            if caught_up:
                self.stats.processing_lag_seconds = 0.0
                return
            if self.stats.last_entry_realtime is not None:
                self.stats.processing_lag_seconds = max(
                    0.0, time.time() - self.stats.last_entry_realtime
                )
            self._ping_watchdog()

    def _commit(self, *, caught_up: bool = False) -> bool:
        """Commit what was read; on failure schedule a retry and say False."""
        try:
            comparisons = self.pipeline.commit(caught_up=caught_up)
        except CommitFailed as exc:
            self._failed_commits += 1
            if self._failed_commits == 1:
                log.error(
                    "commit_failed",
                    error=str(exc),
                    pending_startups=self.pipeline.tracker.dirty_count,
                    action="keeping the records and the cursor; retrying",
                )
            self._ping_watchdog()  # a fault of the disk is not a hang of the loop
            self._retry_at = time.monotonic() + self._retry_wait
            self._retry_wait = min(self._retry_wait * 2, RETRY_MAX_S)
            return False
        if self._failed_commits:
            log.info("commit_recovered", failed_attempts=self._failed_commits)
        self._retry_at, self._retry_wait, self._failed_commits = None, RETRY_FIRST_S, 0
        self._after_commit(comparisons)
        return True

    def _after_commit(self, comparisons: Sequence[Comparison]) -> None:
        self.announcer.recorded(comparisons, self.pipeline.already_stored)
        if comparisons or self.pipeline.last_saved:
            self.publish()
            self._sync_findings()

    def _remember_announced(self) -> None:
        """Take what an earlier run already logged from the state: the recent startups' outcomes
        and findings, each unit's open findings and the pins. A restart (or a replay after a
        cursor reset) then logs startup_recorded / finding_raised only for what is new."""
        # Only the newest ANNOUNCED_KEPT, and without decoding their records: what a restart
        # reads (and holds) does not grow with the stored history.
        outcomes = self.store.recent_outcomes(self.config.units, ANNOUNCED_KEPT)
        # From now on a commit by another process (the CLI's pin) changes data_version.
        self._data_version = self.store.data_version()
        self.announcer.remember(outcomes, self.views(), self._pins())

    def _pins(self) -> dict[str, str]:
        return {unit: inv for unit, (inv, _) in self.store.baselines().items()}

    def _sync_findings(self) -> None:
        """Log findings raised/cleared and hand the open ones to the alert pusher."""
        wanted = self.announcer.findings(self.views())
        if self.pusher is not None:
            self.pusher.update(wanted)

    def _stall_due(self) -> bool:
        """True when a startup under way has passed its stall time since the last snapshot."""
        now = self._clock()
        for view in self.views():
            c = view.starting
            if (
                c is not None
                and not c.findings
                and now - c.record.started_at >= stall_after(c.baseline, self.policy)
            ):
                return True
        return False

    def _housekeeping(self) -> None:
        self.store.check_file()  # a deleted database: stop loudly rather than write to nothing
        version = self.store.data_version()
        if version != self._data_version:
            self.publish()
            if self._data_version != -1:
                log.info("state_changed_externally", reason="baseline pinned or unpinned")
                self.announcer.pin_changes(self.config.units, self._pins())
                self._sync_findings()
            self._data_version = version
        # The stall timer (the loop wakes at least every HOUSEKEEPING_S): a startup that logs
        # nothing more still becomes stalled on time.
        if self._stall_due():
            self.publish()
            self._sync_findings()
        self._ping_watchdog()
        self._update_status()

    def _ping_watchdog(self, *, now_anyway: bool = False) -> None:
        # Called only from the loop, so a hung loop stops the pings and systemd restarts us.
        now = time.monotonic()
        if self._watchdog_s and (now_anyway or now - self._last_ping >= self._watchdog_s / 2):
            self.announcer.watchdog()
            self._last_ping = now

    def _update_status(self) -> None:
        self.announcer.status(self.views())

    def reload(self) -> None:
        """SIGHUP: re-read config, rules and policy; keep the old set if the new one is invalid.

        Every setting that can change in a running process is applied; the ones bound at start
        (what is read, where state lives, the listening socket, where reading starts) are named
        and kept until restart. config.reload.ON_RELOAD has the decision for every key.
        """
        try:
            loaded = self._loader() if self._loader else self.config
            rules, policy = load_rules_and_policy(loaded)
        except (ConfigError, RuleError) as exc:
            self.stats.rule_load_errors += 1
            log.error("reload_rejected", problems=exc.problems)
            return
        old = self.config
        plan = plan_reload(old, loaded)
        config = self.config = plan.config
        self.pipeline.set_rules(rules)
        self.pipeline.policy = policy
        self.pipeline.checkpoint_interval = config.checkpoint_interval_seconds
        self.pipeline.startups_kept = config.startups_kept_per_unit
        configure_logging(config.log.format, config.log.level)
        if config.alertmanager != old.alertmanager:
            self._restart_pusher()
        # The policy may judge the same startups differently now: the findings it raises or
        # clears are logged and pushed at once (a new pusher gets the open ones), not at the
        # next journal entry.
        self.publish()
        self._sync_findings()
        if plan.needs_restart:
            log.warning("reload_partial", needs_restart=list(plan.needs_restart))
        log.info("reload_done", rules=len(rules.rules), applied=list(plan.applied))

    def _restart_pusher(self) -> None:
        """(Re)create the alert sink from the current alertmanager settings."""
        if self.pusher is not None:
            self.pusher.stop()
            self.pusher = None
        self.pusher = self._sinks(self.config, self.stats)
        if self.pusher is not None:
            self.pusher.start()

    def _shutdown(self) -> None:
        # One last try; when it fails nothing of it is stored (the cursor neither), so the next
        # start reads those entries again.
        try:
            self.pipeline.commit(force=True)
        except SentinelError as exc:
            log.error(
                "final_commit_failed", error=str(exc), action="entries are read again on start"
            )
        if self.pusher is not None:
            self.pusher.stop()
        if self.pod_labels is not None:
            self.pod_labels.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.source.close()
        self.store.close()


def _watchdog_interval() -> float:
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and pid != str(os.getpid())):
        return 0.0
    try:
        return int(usec) / 1e6
    except ValueError:
        return 0.0


def run_daemon(config: Config, *, loader: Callable[[], Config] | None = None) -> int:
    configure_logging(config.log.format, config.log.level)
    return Daemon.from_config(config, loader=loader).run()
