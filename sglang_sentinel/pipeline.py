"""The pipeline: journal source -> rules -> startup tracker -> comparison -> state.

Both `sentinel scan` (one pass) and `sentinel run` (follow) drive this; they differ only in
where reading starts and whether they wait for more.
"""

from __future__ import annotations

import time

import structlog

from .compare import Policy, compare, load_policy
from .config import Config
from .journal import JournalSource
from .model import Comparison, RuleMatch, StartupRecord, Stats
from .rules import RuleSet, default_rules_dir, load_rules
from .startups import StartupTracker
from .state import StateStore

log = structlog.get_logger("sglang_sentinel")


def load_rules_and_policy(config: Config) -> tuple[RuleSet, Policy]:
    """The bundled rules plus the configured rule dirs, and the policy with its overrides."""
    rules = load_rules([default_rules_dir(), *config.rules.dirs])
    policy = load_policy(config.rules.policy, dict(config.policy) or None)
    return rules, policy


def source_key(config: Config) -> str:
    """The key the journal cursor of this configuration's source is saved under."""
    if config.journal.directory is not None:
        return f"dir:{config.journal.directory.resolve()}"
    if config.journal.files:
        return "files:" + ",".join(str(f.resolve()) for f in config.journal.files)
    return "system"


def evaluate(
    store: StateStore, record: StartupRecord, policy: Policy, now: float | None = None
) -> Comparison:
    """Compare `record` with its unit's pinned baseline, else the previous ready startup.

    `now` (unix seconds) lets a startup still starting be judged stalled; stored comparisons are
    made without it, since a stall is a matter of the time it is looked at.
    """
    pinned_id = store.baseline_id(record.unit)
    if pinned_id is not None:
        pinned = store.startup(pinned_id)
        if pinned is not None:
            return compare(record, pinned, "pinned", policy, now)
    previous = store.previous_ready(record)
    return compare(record, previous, "previous" if previous else None, policy, now)


class Pipeline:
    """Reads what the journal has now, aggregates it, and commits it with the cursor."""

    def __init__(
        self,
        source: JournalSource,
        rules: RuleSet,
        policy: Policy,
        store: StateStore,
        *,
        source_key: str,
        stats: Stats | None = None,
        checkpoint_interval: float = 0.0,
    ) -> None:
        self.source = source
        self.rules = rules
        self.policy = policy
        self.store = store
        self.source_key = source_key
        self.stats = stats if stats is not None else Stats()
        self.tracker = StartupTracker(self._match, rules.match_raw)
        self._uncommitted = 0
        # A cursor move with no record change is committed at most this often (seconds);
        # replaying those entries after a crash changes nothing, so delaying them is safe.
        self.checkpoint_interval = checkpoint_interval
        self._last_checkpoint = 0.0

    def _match(self, message: str) -> list[RuleMatch]:
        return self.rules.match(message)

    def set_rules(self, rules: RuleSet) -> None:
        self.rules = rules
        self.tracker.match_raw = rules.match_raw

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
        self.tracker.restore(self.store.open_builders())
        cursor = self.store.cursor(self.source_key)
        oldest = time.time() - max_age_seconds if max_age_seconds is not None else None
        if cursor is not None and oldest is not None and _cursor_time(cursor) < oldest:
            self._count_cursor_reset("saved cursor is older than max_replay_age_seconds")
            cursor = None
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

    def _count_cursor_reset(self, reason: str) -> None:
        self.stats.cursor_resets += 1
        with self.store.transaction():
            self.store.add_counter("cursor_resets")
        log.warning("cursor_reset", reason=reason)

    def process(self, limit: int | None = None) -> int:
        """Feed the entries available now (at most `limit`); returns how many were read."""
        # Most lines come as raw bytes (a line of the invocation just seen); see JournalSource.lines.
        n = self.tracker.feed_lines(self.source.lines(limit), self.source.realtime_us)
        if n and self.source.last_realtime_us is not None:
            self.stats.last_entry_realtime = self.source.last_realtime_us / 1e6
        self.stats.entries_read += n
        self._uncommitted += n
        return n

    @property
    def pending(self) -> int:
        return self._uncommitted

    def commit(self, *, force: bool = False) -> list[Comparison]:
        """Persist changed startups, their comparisons and the cursor in one transaction."""
        dirty = self.tracker.take_dirty()
        comparisons: list[Comparison] = []
        now = time.monotonic()
        if not dirty and not force and now - self._last_checkpoint < self.checkpoint_interval:
            return comparisons
        cursor = self.source.cursor() if self._uncommitted else None
        if not dirty and cursor is None:
            return comparisons
        self._last_checkpoint = now
        with self.store.transaction():
            for record, builder in dirty:
                before = self.store.comparison_row(record.invocation_id)
                self.store.save_startup(record, builder)
                comparison = evaluate(self.store, record, self.policy)
                self.store.save_comparison(comparison)
                comparisons.append(comparison)
                if before is None:
                    self.stats.startups_recorded += 1
            if dirty:
                # Only each unit's newest startup can still change; older ones need no resume state.
                self.store.clear_builders(self._open_ids())
            if cursor is not None:
                self.store.save_cursor(self.source_key, cursor)
        self._uncommitted = 0
        for c in comparisons:
            log.debug("startup_saved", unit=c.record.unit, invocation=c.record.invocation_id[:8])
        return comparisons

    def _open_ids(self) -> list[str]:
        ids = []
        for unit in self.source.units:
            rec = self.tracker.current(unit)
            if rec is not None:
                ids.append(rec.invocation_id)
        return ids


def _cursor_time(cursor: str) -> float:
    """The realtime stamp a journal cursor carries (`t=` in hex microseconds); 0 if absent."""
    for part in cursor.split(";"):
        if part.startswith("t="):
            try:
                return int(part[2:], 16) / 1e6
            except ValueError:
                return 0.0
    return 0.0
