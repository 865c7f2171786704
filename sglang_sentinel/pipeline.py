"""The pipeline: journal source -> rules -> startup tracker -> comparison -> state.

Both `sentinel scan` (one pass) and `sentinel run` (follow) drive this; they differ only in
where reading starts and whether they wait for more.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import time
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .compare import Evaluate, Policy, decode_settings, evaluate, load_policy
from .config import Config
from .errors import StateError
from .logs import Logger
from .model import (
    DOCKER_PREFIX,
    Comparison,
    RuntimeView,
    SourceItem,
    Stats,
    parse_selector,
)
from .rules import MemoMatcher, RuleSet, default_rules_dir, load_rules
from .state import StateStore

if TYPE_CHECKING:
    from .rules import Matcher
    from .sources import Source

log = Logger("sglang_sentinel")


def load_rules_and_policy(config: Config) -> tuple[RuleSet, Policy]:
    """The bundled rules plus the configured rule dirs, and the policy with its overrides."""
    rules = load_rules([default_rules_dir(), *config.rules.dirs])
    policy = load_policy(config.rules.policy, dict(config.policy) or None)
    return rules, policy


def build_source(config: Config) -> Source:
    """The source for `config`'s targets: the journal for units and journald-driver containers,
    the log files for json-file containers (when `docker_root` has a containers directory: a
    host without Docker has none) and pods; both at once when both are named. A configuration
    with the journal only gets the JournalSource as before."""
    from .sources import CombinedSource, DockerLayout, FileSource, JournalSource, Layout, PodLayout

    layouts: list[Layout] = []
    if config.containers and _has_containers_dir(config.docker_root):
        layouts.append(DockerLayout(config.docker_root, config.containers))
    if config.kubernetes.pods:
        selectors = [parse_selector(p) for p in config.kubernetes.pods]
        layouts.append(PodLayout(config.kubernetes.pod_logs, selectors))
    journal_targets = config.units + tuple(DOCKER_PREFIX + c for c in config.containers)
    journal = None
    if journal_targets:
        journal = JournalSource(
            journal_targets,
            directory=config.journal.directory,
            files=config.journal.files,
            docker_units=config.docker_units,
        )
    files = FileSource(layouts) if layouts else None
    if journal is not None and files is not None:
        return CombinedSource(journal, files)
    if files is not None:
        return files
    assert journal is not None  # the config names at least one target
    return journal


def _has_containers_dir(docker_root: Path) -> bool:
    """`docker_root/containers` is a directory, or this user may not even look (dockerd makes
    its root 0710: the shipped unit's dynamic user cannot stat below it). Then the file source
    is set up all the same and says at start that it cannot read it (`Path.is_dir()` raised
    PermissionError here, and the daemon exited 3 on every Docker host that named a container)."""
    try:
        st = os.stat(docker_root / "containers")
    except PermissionError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode)


def source_key(config: Config) -> str:
    """The key this configuration's reading position and resume state are saved under: its
    journal source and its target list. Another list (a unit added) is another reader, which
    starts at the beginning of the boot; readers of one state never move each other's cursor
    or drop each other's open startups."""
    return f"{_journal_key(config)} targets={','.join(sorted(config.targets))}"


def _journal_key(config: Config) -> str:
    """The journal source alone: the key of a version-3 state's cursor (see adopt_legacy)."""
    if config.journal.directory is not None:
        return f"dir:{config.journal.directory.resolve()}"
    if config.journal.files:
        return "files:" + ",".join(str(f.resolve()) for f in config.journal.files)
    return "system"


# How long the cursor may stay before a split server_args line whose continuation has not come
# (journald writes a split line's entries together, so this is only reached when it never ends).
SPLIT_HOLD_SECONDS = 5.0


class Faults:
    """Faults of single entries, startups or units: each counted by stage (the
    `processing_errors_total` counters) and logged as `processing_failed`, a keyed one only the
    first time (a startup fails again on each change until it ends); the keys are bounded.

    The pipeline's own, handed to the daemon too (`Pipeline.faults`): one count, one memory."""

    KEPT = 1024

    def __init__(self, stats: Stats) -> None:
        self.stats = stats
        self._logged: set[tuple[str, str]] = set()

    def failed(
        self, stage: str, exc: Exception, *, once: tuple[str, str] | None = None, **where: object
    ) -> None:
        errors = self.stats.processing_errors
        errors[stage] = errors.get(stage, 0) + 1
        if once is not None:
            if once in self._logged:
                return
            if len(self._logged) >= self.KEPT:
                self._logged.clear()
            self._logged.add(once)
        log.error(
            "processing_failed",
            stage=stage,
            error=f"{type(exc).__name__}: {exc}"[:300],
            **where,
        )


class CommitFailed(StateError):
    """A transaction failed (database locked, disk full, I/O error); nothing of it was stored and
    its records stay pending, so committing again later stores them with their cursor."""


class Pipeline:
    """Reads what the journal has now, aggregates it, and commits it with the cursor."""

    def __init__(
        self,
        source: Source,
        rules: RuleSet,
        policy: Policy,
        store: StateStore,
        *,
        source_key: str | None,
        stats: Stats | None = None,
        checkpoint_interval: float = 0.0,
        startups_kept: int | None = None,
        matcher: Matcher | None = None,
        evaluator: Evaluate = evaluate,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.source = source
        self.rules = rules
        self.policy = policy
        self.store = store
        # Whose position and resume state this reading is (None: a one-pass scan, which keeps
        # neither: it never resumes, and must not move a daemon's).
        self.source_key = source_key
        self.stats = stats if stats is not None else Stats()
        # Imported here: the commands that only read the state import this module for
        # load_rules_and_policy alone and never load the tracker.
        from .startups import StartupTracker

        # The rules behind the matcher seam (rules/matcher.py): memoised unless one is given.
        self.tracker = StartupTracker(matcher or MemoMatcher(rules), on_error=self._entry_failed)
        self.tracker.monotonic = source.monotonic
        # The comparison stage; a seam so a fault in it can be injected and seen isolated.
        self.evaluator = evaluator
        self._clock = clock
        self._uncommitted = 0
        self._hold_since: float | None = None  # when a split line started holding the cursor
        self.cut_short = False  # the last process() stopped at its deadline or stop()
        self.faults = Faults(self.stats)
        # A cursor move with no record change is committed at most this often (seconds);
        # replaying those entries after a crash changes nothing, so delaying them is safe.
        self.checkpoint_interval = checkpoint_interval
        # Retention: each unit's stored startups beyond this many are pruned in the commit that
        # stores a new one (None: keep all). See StateStore.prune for what is always kept.
        self.startups_kept = startups_kept
        self._grown: set[str] = set()  # units with a new startup in the commit under way
        self._last_checkpoint = 0.0
        # invocation id -> latest batch-line values as of the last successful commit (never
        # persisted; read-only, replaced whole by each commit).
        self.runtime: Mapping[str, RuntimeView] = types.MappingProxyType({})
        # Startups the last successful commit stored (changed records plus batch-line-only ones).
        self.last_saved = 0
        # Of the startups the last commit compared, those the state already held with the same
        # outcome: read again (a replay after a cursor reset, another target list), not news.
        self.already_stored: frozenset[str] = frozenset()

    def set_rules(self, rules: RuleSet) -> None:
        self.rules = rules
        self.tracker.matcher = MemoMatcher(rules)

    def resume(
        self,
        *,
        from_boot_start: bool = True,
        max_age_seconds: float | None = None,
        boot_id: str | None = None,
    ) -> None:
        """Seek to the saved cursor (or the start of this boot) and restore open startups.

        `max_age_seconds` caps how far back reading starts, with or without a cursor. `boot_id`
        names "this boot" (default: the running kernel's, /proc/sys/kernel/random/boot_id).
        """
        from .startups import CLOSED_KEPT

        key = self.source_key
        if key is None:
            raise StateError("a reading without a source key cannot resume")
        legacy = key.split(" targets=", 1)[0]
        if legacy != key and self.store.adopt_legacy(legacy, key):
            log.info("cursor_adopted", source=legacy, reason="state saved before schema 4")
        self.tracker.restore(self.store.open_builders(key))
        cursor = self.store.cursor(key)
        oldest = time.time() - max_age_seconds if max_age_seconds is not None else None
        if cursor is not None and oldest is not None and self._cursor_time(cursor) < oldest:
            self._count_cursor_reset("saved cursor is older than max_replay_age_seconds")
            cursor = None
        # The startups stored that this reader holds no resume state of and that began before
        # where it starts reading stay as stored: a line of one after the cursor is too late,
        # as it would be without the restart; read again from before the cursor, it is
        # recorded already (re-deriving it from the lines in reach would overwrite the record
        # with a partial one). Those that began after it, this reader reads from their start.
        start = self._cursor_time(cursor) if cursor is not None else oldest
        closed = self.store.closed_invocations(key, self.source.units, CLOSED_KEPT, start)
        self.tracker.close(closed, reread=cursor is None)
        if cursor is None:
            if oldest is not None:
                self.source.seek_realtime(oldest)
            elif from_boot_start:
                self.source.seek_boot_start(boot_id)
            else:
                self.source.seek_head()
            return
        if not self.source.seek_cursor(cursor):
            self._count_cursor_reset("saved cursor's entry is gone; continuing after it")

    def _cursor_time(self, cursor: str) -> float:
        """The time a saved cursor is at: a file source's (JSON) or the journal's `t=`."""
        cursor_time = getattr(self.source, "cursor_time", None)
        if callable(cursor_time):
            return float(cursor_time(cursor))
        # Here, not at the top: the sources' face loads the journal reader, which the state
        # commands (check, report, startups) never need (tests/host/test_startup_cost.py).
        from .sources import journal_cursor_time

        return journal_cursor_time(cursor)

    def _count_cursor_reset(self, reason: str) -> None:
        self.stats.cursor_resets += 1
        with self.store.transaction():
            self.store.add_counter("cursor_resets")
        log.warning("cursor_reset", reason=reason)

    def process(
        self,
        limit: int | None = None,
        *,
        deadline: float | None = None,
        stop: Callable[[], bool] | None = None,
        read_ahead: bool = False,
    ) -> int:
        """Feed the entries available now (at most `limit`, and only until the monotonic
        `deadline` or `stop()`); returns how many were read. `read_ahead`: the source may read
        entries in batches (a one-shot scan; see JournalSource.lines)."""
        # The policy may have been reloaded (SIGHUP); decode warm-up is the one part the tracker uses.
        self.tracker.decode_warmup_seconds = decode_settings(self.policy).warmup_seconds
        # Most lines come as raw bytes (a line of the invocation just seen); see JournalSource.lines.
        if read_ahead:
            from .sources import JournalSource  # loaded already when the source is one

            read_ahead = isinstance(self.source, JournalSource)  # the one source that reads ahead
        items: Iterable[SourceItem] = (
            self.source.lines(limit, read_ahead=True)  # type: ignore[call-arg]
            if read_ahead
            else self.source.lines(limit)
        )
        cut: list[bool] = []
        if deadline is not None or stop is not None:
            items = _until(items, deadline, stop, self._clock, cut)
        n = self.tracker.feed(items, self.source.realtime_us)
        self.stats.journal_corrupt_reads = self.source.corrupt_reads
        self.stats.journal_truncated_reads = self.source.truncated_reads
        self.stats.late_lines_dropped = self.tracker.late_lines_dropped
        self.stats.forged_entries = self.source.forged_entries
        self.stats.journal_files_unreadable = len(self.source.unreadable_files)
        # Stopped by the deadline or stop(), not by the end of the journal or the limit.
        self.cut_short = bool(cut)
        if n and self.source.last_realtime_us is not None:
            self.stats.last_entry_realtime = self.source.last_realtime_us / 1e6
        self.stats.entries_read += n
        self._uncommitted += n
        return n

    @property
    def pending(self) -> int:
        return self._uncommitted

    @property
    def holding(self) -> bool:
        """A split server_args line keeps the state (and cursor) before its first entry."""
        return self._hold_since is not None

    def commit(
        self, *, force: bool = False, final: bool = False, caught_up: bool = False
    ) -> list[Comparison]:
        """Persist changed startups and the cursor in one transaction; compare each changed one.

        A startup only batch lines changed (runtime values, decode samples, rule_hits) waits
        like a cursor move: at most every `checkpoint_interval`, or at once when `caught_up`
        (the reader is at the end of the journal, so the published values are current). It is
        stored with the cursor, so its decode samples count exactly once across a restart,
        but neither re-derived nor compared again: its startup facts did not change. Returned
        are the comparisons of the startups whose facts changed.

        While a server_args line split by journald waits for its continuation, nothing is
        committed: the unparsed text is never stored (it may hold secrets), so the cursor stays
        before the line's first entry and a restart reads the whole line again. `final` (the end
        of a one-shot scan) takes such a line as it is. A failed transaction raises CommitFailed
        and keeps every record pending, so the next commit stores them with the cursor.
        """
        now = self._clock()
        self.last_saved = 0
        # Docker's 16 KiB pieces of a container line wait in the source the same way.
        if self.tracker.split_pending or self.source.partial_pending:
            if self._hold_since is None:
                self._hold_since = now
            if not final and now - self._hold_since < SPLIT_HOLD_SECONDS:
                return []
            self.tracker.end_splits()
        self._hold_since = None
        dirty = self.tracker.dirty()
        touched = self.tracker.touched()
        if (
            not dirty
            and not force
            and not (touched and caught_up)
            and now - self._last_checkpoint < self.checkpoint_interval
        ):
            return []
        key = self.source_key
        cursor = self.source.cursor() if self._uncommitted and key is not None else None
        if not dirty and not touched and cursor is None and not self._uncommitted:
            return []
        comparisons: list[Comparison] = []
        recorded = 0
        self._grown = set()
        already: set[str] = set()
        try:
            with self.store.transaction():
                for inv in dirty:
                    before = self.store.stored_outcome(inv)
                    saved = self._save(inv)
                    if saved is not None:
                        comparison, new = saved
                        comparisons.append(comparison)
                        recorded += new
                        if before == comparison.record.outcome:
                            already.add(inv)
                for inv in touched:
                    self._save_touched(inv)
                if dirty and key is not None:
                    # Only each unit's newest startup can still change; older ones need no
                    # resume state.
                    self.store.clear_builders(key, self._open_ids())
                if self.startups_kept is not None:
                    for unit in sorted(self._grown):
                        self.store.prune(unit, self.startups_kept)
                if cursor is not None and key is not None:
                    self.store.save_cursor(key, cursor)
        except (sqlite3.Error, OSError) as exc:
            self.stats.commit_failures += 1
            raise CommitFailed(f"cannot write {self.store.path}: {exc}") from exc
        self._last_checkpoint = now
        self.last_saved = len(dirty) + len(touched)
        self.already_stored = frozenset(already)
        if self.last_saved:
            self.runtime = types.MappingProxyType(dict(self.tracker.runtime_views()))
        self.tracker.mark_clean()
        self.stats.startups_recorded += recorded
        self._uncommitted = 0
        for c in comparisons:
            log.debug("startup_saved", unit=c.record.unit, invocation=c.record.invocation_id[:8])
        return comparisons

    def _save(self, inv: str) -> tuple[Comparison, int] | None:
        """Store one startup and compare it (inside the commit's transaction, so that a
        startup after it in the same commit finds it as its baseline).

        A fault of this one startup is logged, counted and leaves it out (a comparison that
        raises: only the comparison, the record is stored); the database's own errors fail the
        whole transaction.
        """
        store = self.store
        with store.savepoint() as ok:
            stage = "tracker"
            try:
                record, builder = self.tracker.saved_form(inv)
                stage = "state"
                if store.is_pruned(record):
                    return None  # read again after retention pruned it: stays pruned
                new = store.save_startup(record, builder, self.source_key)
                if new is None:
                    # The stored record is stronger (read from more of the startup's lines)
                    # and stays; it is what is compared and announced.
                    record = store.startup(inv) or record
                elif new and self.startups_kept is not None:
                    # Pruned as each new one is stored, so the pages it frees hold the next
                    # (a scan commits thousands at once: pruning at the end would grow the file
                    # to all of them first); and once more at the end (commit), when the
                    # startups that closed in this commit have no resume state left.
                    store.prune(record.unit, self.startups_kept)
                    self._grown.add(record.unit)
                stage = "compare"
                comparison = self.evaluator(store, record, self.policy)
            except (sqlite3.OperationalError, OSError):
                raise
            except Exception as exc:
                if stage != "compare":  # a record without its comparison is still worth keeping
                    ok.rollback()
                self.faults.failed(stage, exc, invocation=inv[:8], once=(stage, inv))
                return None
        return comparison, int(bool(new))

    def _save_touched(self, inv: str) -> None:
        """Store a startup only batch lines changed (inside the commit's transaction)."""
        with self.store.savepoint() as ok:
            stage = "tracker"
            try:
                record, builder = self.tracker.saved_form(inv)
                stage = "state"
                if self.store.is_pruned(record):
                    return
                self.store.save_startup(record, builder, self.source_key)
            except (sqlite3.OperationalError, OSError):
                raise
            except Exception as exc:
                ok.rollback()
                self.faults.failed(stage, exc, invocation=inv[:8], once=(stage, inv))

    def _entry_failed(self, stage: str, exc: Exception) -> None:
        self.faults.failed(stage, exc, cursor=self.source.cursor())

    def _open_ids(self) -> list[str]:
        return self.tracker.open_ids()


def _until(
    items: Iterable[SourceItem],
    deadline: float | None,
    stop: Callable[[], bool] | None,
    clock: Callable[[], float],
    cut: list[bool],
) -> Iterator[SourceItem]:
    """`items` until `deadline` passes or `stop()` says so; the reader stays on the last item
    handed out, so the cursor is exactly after what was processed.

    Checked every 16 items: a line costs at most a few ms (see bench/), so a SIGTERM or a
    watchdog ping waits well under a second even while a long split line is read."""
    for n, item in enumerate(items, 1):
        yield item
        if n & 15 == 0 and (
            (deadline is not None and clock() >= deadline) or (stop is not None and stop())
        ):
            cut.append(True)
            return
