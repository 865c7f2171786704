"""Startup aggregation: journal entries and rule matches -> one StartupRecord per invocation.

A startup is one service invocation. It is keyed by `_SYSTEMD_INVOCATION_ID` on the service's
lines and `INVOCATION_ID` on PID 1's; where a journal has neither, PID 1's "Started" line or a
new `server_args=` line opens a new startup under a deterministic synthetic id, so a second scan
of the same journal produces the same ids.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..fact_ranges import sane_facts
from ..facts import FROM_SETTINGS, RUNTIME_FACTS, STARTUP_FACTS
from ..logs import Logger
from ..logtemplates import DOWNGRADE, OTHER
from ..model import (
    UNIT_FAILED,
    UNIT_PROCESS_EXIT,
    UNIT_STARTED,
    UNIT_STARTING,
    UNIT_STOPPED,
    Evidence,
    FactValue,
    JournalEntry,
    Outcome,
    RuleMatch,
    RuntimeView,
    SourceItem,
    StartupRecord,
)
from ..redact import launch_flags, redact_cmdline, scrub_head
from ..rules import LINE_START_RE, BatchMatch, Matcher, strip_wrappers
from ..serverargs import BalanceScanner, normalized_settings, parse_server_args
from ..state import builder_from_json, builder_to_json
from ..text import clean_message
from .decode_samples import (
    DECODE_RULE,
    OBSERVED_RULES,
    PHASE_RULES,
    PREFILL_RULE,
    SHAPE_MASK,
    DecodeState,
)
from .ledger import LogLedger, Vocabulary

log = Logger("sglang_sentinel")

# Told about an exception while handling one entry: the stage ("rules" or "tracker") and the error.
ErrorSink = Callable[[str, Exception], None]
_MISS: Any = object()  # a line the matcher's known answers do not have

_EXIT_RE = re.compile(r"code=(\w+), status=(\S+)")
_RESULT_RE = re.compile(r"Failed with result '([^']+)'")
_TRACEBACK_HEAD = "Traceback (most recent call last):"
# Failure reasons that say a start died but not of what (the traceback head, the main process's
# SIGQUIT line, a dead scheduler, a failed warmup): the exception line of the scheduler's
# traceback names the error, so it takes their place (see _Builder.reason_kind).
_GENERIC_REASON_RE = re.compile(
    r"(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*Error: )?(?:Received sigquit from a child process"
    r"|SIGQUIT received from a failing child|Initialization failed\.|Exception in run_tp_server:"
    r"|Rank \d+ scheduler (?:is dead|died during initialization))"
)
# A split server_args line never needs more than a few continuation entries (48K each).
_MAX_SERVER_ARGS_CHARS = 1 << 20
# Forgotten startups whose runtime values stay available (see StartupTracker.runtime_views).
_ENDED_RUNTIME_KEPT = 16
# Entries kept of a list fact (config files missing, ...): one per distinct file, so a few
# dozen on a large MoE model; a further one is dropped.
LIST_KEPT = 64
# A text fact (and each item of a list fact) is kept in its first FACT_CHARS, a failure reason in
# its first REASON_CHARS, each redacted at a cost bounded by that length (`redact.scrub_head`): a
# 48 KiB line of rule bait cost 35 ms to redact whole, and was stored whole.
FACT_CHARS = 2000
REASON_CHARS = 500
# Closed startups remembered (StartupTracker._closed), so that a line of one never starts it afresh.
CLOSED_KEPT = 256
# How a closed startup's lines are dropped (StartupTracker._closed).
LATE, LOGGED, RECORDED = "late", "logged", "recorded"
# Wall and monotonic clocks may disagree this much (seconds) before it counts as a clock step.
CLOCK_STEP_TOLERANCE_S = 2.0


# The builder's fields stored as they are (state/codec.py: builder_to_json, BuilderDoc); the
# others are converted on the way (primary, decode, clock_notes, ledger) or never stored.
_SAVED = (
    "unit",
    "invocation_id",
    "started_at",
    "ready_at",
    "ended_at",
    "failure_reason",
    "exit_status",
    "facts",
    "rule_hits",
    "server_args",
    "flags",
    "has_server_args_line",
    "start_mono",
    "ready_mono",
)


@dataclass(slots=True)
class _Builder:
    """The mutable accumulation behind one StartupRecord; serialisable so a restart resumes it."""

    unit: str
    invocation_id: str
    started_at: float
    ready_at: float | None = None
    ended_at: float | None = None
    failure_reason: str | None = None
    exit_status: str | None = None
    facts: dict[str, FactValue] = field(default_factory=dict)
    primary: set[str] = field(default_factory=set)
    rule_hits: dict[str, int] = field(default_factory=dict)
    server_args: dict[str, Any] = field(default_factory=dict)
    # The text of a server_args line journald split into several entries, while continuations
    # may follow: pieces joined and parsed once the repr balances (see _extend_server_args).
    server_args_pending: str | None = None
    pending_pieces: list[str] = field(default_factory=list)
    pending_chars: int = 0
    pending_scan: BalanceScanner = field(default_factory=BalanceScanner)
    pending_parsed_at: int = 0
    flags: tuple[str, ...] = ()
    # The latest batch-line values (`scope: runtime` facts): in memory only, never persisted
    # (see RuntimeView); a restart starts them empty.
    runtime: dict[str, FactValue] = field(default_factory=dict)
    has_server_args_line: bool = False
    # The journal's monotonic time (µs, boot id hex) of the start and of ready: a duration
    # within one boot that a stepped wall clock cannot bend.
    start_mono: tuple[int, str] | None = None
    ready_mono: tuple[int, str] | None = None
    # Evidence that the wall clock was wrong around this startup (`clock_skew: ...` notes).
    clock_notes: list[Evidence] = field(default_factory=list)
    # Where failure_reason came from: "generic" (it says a start died but not of what: the first
    # exception line after it replaces it), "exception" (an exception line: a rule's own reason,
    # such as `Capture cuda graph failed: ...`, still replaces it) or "" (a rule's reason). And
    # the last exception line seen, for a generic reason that comes right after it (a cut
    # traceback, or the main process's line written before the scheduler's last one). Not
    # stored: a restored builder with a generic reason is "generic" again (from_json).
    reason_kind: str = ""
    last_exception: str | None = None
    # A chained traceback goes on (its `During handling of the above exception ...` line): the
    # next exception line is the one the start died of and replaces an exception reason. Not
    # stored either (a restart between the two lines keeps the first exception).
    chained: bool = False
    # Batch lines not converted yet: BatchMatch -> its newest raw line, oldest first. Lines of
    # one BatchMatch set the same facts, so only the newest can still show in `runtime` (for a
    # fact, the last line that set it; any later line sets other facts) and the others are
    # never parsed. `settle()` applies these, in order, before `runtime` is read.
    deferred: dict[BatchMatch, bytes] = field(default_factory=dict)
    # Decode intervals at like load and startup phase marks (decode_samples.py).
    decode: DecodeState = field(default_factory=DecodeState)
    # The startup window's lines as templates, downgrade and other (ledger.py).
    ledger: LogLedger = field(default_factory=LogLedger)
    # The last full snapshot(): a change that only batch lines made (rule_hits, decode) is
    # stored as this with those two fields replaced (`StartupTracker.saved_form`), without
    # re-deriving the facts from ~300 server_args fields.
    record: StartupRecord | None = None

    def settle(self) -> None:
        """Apply the deferred batch lines to `runtime`, in the order they came."""
        for batch, raw in self.deferred.items():
            facts = batch.rule.facts_of_raw(raw)  # cannot fail: deferred only when it cannot
            if facts is not None:
                self.runtime.update(facts)
        self.deferred.clear()

    @property
    def outcome(self) -> Outcome:
        if self.ready_at is not None:
            return "ready"
        if self.failure_reason is not None:
            return "failed"
        return "starting"

    def to_json(self) -> str:
        """This builder as the builders table stores it (state/codec.py writes the shape)."""
        self.settle()
        return builder_to_json(
            **{name: getattr(self, name) for name in _SAVED},
            primary=self.primary,
            decode=self.decode.to_dict(),
            clock_notes=self.clock_notes,
            ledger=self.ledger.to_doc(),
        )

    @classmethod
    def from_json(cls, text: str) -> _Builder:
        d = builder_from_json(text)
        return cls(
            **{name: getattr(d, name) for name in _SAVED},
            primary=set(d.primary),
            decode=DecodeState.from_dict(d.decode),
            clock_notes=list(d.clock_notes),
            ledger=LogLedger.from_doc(d.ledger),
            reason_kind=(
                "generic" if d.failure_reason and _names_no_error(d.failure_reason) else ""
            ),
        )

    def snapshot(self) -> StartupRecord:
        self.settle()
        facts: dict[str, FactValue] = dict.fromkeys(STARTUP_FACTS)
        facts.update(self.facts)
        settings = normalized_settings(self.server_args) if self.server_args else {}
        for name in FROM_SETTINGS:  # facts.py: from server_args when no line said
            if facts.get(name) is None and settings.get(name) is not None:
                value = settings[name]
                if isinstance(value, int | float | bool | str):
                    facts[name] = value
        clock_notes = list(self.clock_notes)
        if self.ready_at is not None:
            wall = self.ready_at - self.started_at
            start, ready = self.start_mono, self.ready_mono
            if start is not None and ready is not None and start[1] == ready[1]:
                mono = (ready[0] - start[0]) / 1e6
                facts["startup_seconds"] = round(mono, 3)
                if abs(wall - mono) > CLOCK_STEP_TOLERANCE_S:
                    clock_notes.append(
                        _clock_skew(
                            f"the wall clock moved {wall - mono:+.0f} s during this "
                            f"startup (ready {wall:.0f} s after the start by the wall clock, "
                            f"{mono:.0f} s by the journal's monotonic clock); startup_seconds "
                            "is the monotonic time"
                        )
                    )
            elif wall >= 0:
                facts["startup_seconds"] = round(wall, 3)
            else:
                clock_notes.append(
                    _clock_skew(
                        f"ready {-wall:.0f} s before the start by the wall clock and "
                        "no monotonic time to measure with; startup_seconds recorded as null"
                    )
                )
        facts, notes = sane_facts(facts)
        record = StartupRecord(
            unit=self.unit,
            invocation_id=self.invocation_id,
            started_at=self.started_at,
            ready_at=self.ready_at,
            outcome=self.outcome,
            facts=facts,
            launch_flags=self.flags,
            server_args=self.server_args,
            failure_reason=self.failure_reason,
            ended_at=self.ended_at,
            rule_hits=dict(self.rule_hits),
            notes=tuple(notes + clock_notes),
            decode=self.decode.summary(),
            ledger=self.ledger.to_doc(),
        )
        self.record = record
        return record

    def runtime_view(self) -> RuntimeView:
        """The latest batch-line values, an impossible one as None (fact_ranges.py)."""
        self.settle()
        facts, _ = sane_facts(self.runtime)
        return RuntimeView(self.unit, self.invocation_id, facts)


def _clock_skew(text: str) -> Evidence:
    return Evidence("clock_skew", detail=text)


class StartupTracker:
    """Feeds entries through the rules and keeps the current startup of every unit."""

    def __init__(
        self,
        matcher: Matcher,
        on_error: ErrorSink | None = None,
    ) -> None:
        # The rules, behind one seam: exact or memoised (rules/matcher.py), the same answers.
        self.matcher = matcher
        # An exception while handling one entry goes here and the entry is skipped; without a
        # sink it propagates (tests that want to see it).
        self.on_error = on_error
        # The journal's monotonic time of the entry being fed, (µs, boot id hex), when the
        # source can tell (JournalSource.monotonic); durations then ignore wall-clock steps.
        self.monotonic: Callable[[], tuple[int, str] | None] | None = None
        self._builders: dict[str, _Builder] = {}  # invocation id -> builder
        self._current: dict[str, str] = {}  # unit -> invocation id of its newest startup
        # unit -> invocation id of the startup before its newest: kept open, since journald can
        # write a stopped process's last lines after the next invocation's first ones.
        self._previous: dict[str, str] = {}
        # Closed startups (insertion order, bounded): two startups of their unit came after
        # them, or they were stored closed before a restart. A line of one is dropped rather
        # than opening a startup with the same id, which would overwrite the stored record with
        # a near-empty one. The value: LATE (its lines are late: counted, logged once), LOGGED
        # (that was logged), RECORDED (stored before a restart whose reading starts before its
        # lines, with no cursor: they come again, and are skipped quietly).
        self._closed: dict[str, str] = {}
        self.late_lines_dropped = 0
        self._dropping: str | None = None  # the entry fed last was dropped: so are its raw lines
        self._dirty: set[str] = set()
        # Changed by batch lines only (runtime facts, rule_hits, decode samples): stored with
        # the cursor like a cursor move, without re-deriving the record or comparing it.
        self._touched: set[str] = set()
        # The runtime values of startups forgotten by mark_clean(), newest last, so the
        # exporter still shows a unit's latest decided startup's while a new one starts.
        self._ended_runtime: dict[str, RuntimeView] = {}
        self.rule_hits: dict[str, int] = {}
        # The builder of the service line fed last: the raw lines after it are of its invocation.
        self._last_service: _Builder | None = None
        # Decode lines this long after ready are past JIT warm-up (policy decode_throughput_drop).
        self.decode_warmup_seconds = 300.0
        self._vocabulary: Vocabulary | None = None  # of the rule set `_vocabulary_of`
        self._vocabulary_of: object = None

    # -- persistence hooks --------------------------------------------------------------------

    def restore(self, builder_states: Iterable[str]) -> None:
        """Resume the open startups saved by `dirty_states()` before a restart."""
        for text in builder_states:  # in journal order: a unit's last one is its current one
            b = _Builder.from_json(text)
            self._builders[b.invocation_id] = b
            if b.unit in self._current:
                older = self._previous.get(b.unit)
                if older is not None:
                    self._close(older)
                self._previous[b.unit] = self._current[b.unit]
            self._current[b.unit] = b.invocation_id

    def take_dirty(self) -> list[tuple[StartupRecord, str]]:
        """Records changed since the last call, with their resumable state; oldest first."""
        changed = self._dirty | self._touched
        out = [self.saved_form(i) for i in self._builders if i in changed]
        self.mark_clean()
        return out

    def dirty(self) -> list[str]:
        """Invocations changed since the last `mark_clean()`, oldest first; they stay dirty, so
        a failed commit can offer them again."""
        # The builders' insertion order is the journal's order (restored ones first): the
        # store numbers new startups in the order they are saved, never by the wall clock.
        dirty = self._dirty
        return [i for i in self._builders if i in dirty]

    def touched(self) -> list[str]:
        """Invocations only batch lines changed since the last `mark_clean()` (not in `dirty()`),
        oldest first: their decode samples and rule_hits must be stored with the cursor, but
        their startup facts, and so their comparison, are as last stored."""
        dirty, touched = self._dirty, self._touched
        return [i for i in self._builders if i in touched and i not in dirty]

    def saved_form(self, invocation_id: str) -> tuple[StartupRecord, str]:
        """One startup's record and its resumable state (JSON).

        A startup only batch lines changed since its last snapshot is that snapshot with its
        rule_hits and decode summary brought up to date (the only fields batch lines change),
        which is the snapshot it would make, for a fraction of the cost.
        """
        b = self._builders[invocation_id]
        if invocation_id in self._dirty or b.record is None:
            record = b.snapshot()
        else:
            record = dataclasses.replace(
                b.record, rule_hits=dict(b.rule_hits), decode=b.decode.summary()
            )
        return record, b.to_json()

    def runtime_views(self) -> Mapping[str, RuntimeView]:
        """invocation id -> latest batch-line values: each unit's current startup and the few
        startups forgotten last; a copy the caller may publish as is."""
        views = dict(self._ended_runtime)
        for inv in self._previous.values():
            b = self._builders.get(inv)
            if b is not None and (b.runtime or b.deferred):
                views[inv] = b.runtime_view()
        for inv in self._current.values():
            b = self._builders.get(inv)
            if b is not None:
                views[inv] = b.runtime_view()
        return views

    def mark_clean(self) -> None:
        """The records `dirty()` and `touched()` returned are stored: forget them and the
        finished startups."""
        self._dirty.clear()
        self._touched.clear()
        self._last_service = None
        # Only the newest startup of each unit, and late lines of the one before, can still
        # change it; forget the others.
        keep = set(self.open_ids())
        for inv in [i for i in self._builders if i not in keep]:
            b = self._builders.pop(inv)
            if b.runtime or b.deferred:
                self._ended_runtime[inv] = b.runtime_view()
            self._close(inv)
        while len(self._ended_runtime) > _ENDED_RUNTIME_KEPT:
            del self._ended_runtime[next(iter(self._ended_runtime))]

    def close(self, invocation_ids: Iterable[str], *, reread: bool = False) -> None:
        """Take these startups, stored closed before a restart, as closed (oldest first).
        `reread`: the reading starts before their lines (no cursor), which come again."""
        for inv in invocation_ids:
            if inv not in self._builders:
                self._close(inv, RECORDED if reread else LATE)

    def _close(self, inv: str, how: str = LATE) -> None:
        """No line changes this startup any more (see `_closed`)."""
        self._closed.setdefault(inv, how)
        while len(self._closed) > CLOSED_KEPT:
            del self._closed[next(iter(self._closed))]

    def open_ids(self) -> list[str]:
        """The startups that can still change, in journal order: each unit's newest, and the
        one before it (a late line of its process may still come); their resumable state must
        survive a restart."""
        open_ = {*self._current.values(), *self._previous.values()}
        return [i for i in self._builders if i in open_]

    @property
    def ended_held(self) -> int:
        """Startups no line changes any more, held only until the next commit stores them."""
        closed = self._closed
        return sum(1 for i in self._builders if i in closed)

    @property
    def dirty_count(self) -> int:
        return len(self._dirty | self._touched)

    @property
    def split_pending(self) -> bool:
        """A server_args line split by journald waits for its continuation entries."""
        return any(b.server_args_pending is not None for b in self._builders.values())

    def end_splits(self) -> None:
        """Take every pending split server_args line as it is (no continuation will come)."""
        for b in self._builders.values():
            if b.server_args_pending is not None:
                _end_server_args(b)
                self._dirty.add(b.invocation_id)
        self._last_service = None

    def current(self, unit: str) -> StartupRecord | None:
        inv = self._current.get(unit)
        return self._builders[inv].snapshot() if inv else None

    def current_id(self, unit: str) -> str | None:
        """The invocation id of the unit's newest startup, without building its record."""
        return self._current.get(unit)

    def _observe(
        self, b: _Builder, rule_id: str, line: bytes | str, realtime_us: Callable[[], int]
    ) -> None:
        """Hand a line of a rule the decode comparison reads to the startup's DecodeState."""
        ts = realtime_us() / 1e6 if rule_id == DECODE_RULE else 0.0
        b.decode.observe(rule_id, line, ts, b.ready_at, self.decode_warmup_seconds)

    # -- feeding ------------------------------------------------------------------------------

    def feed(self, items: Iterable[SourceItem], realtime_us: Callable[[], int]) -> int:
        """Feed what `JournalSource.lines` yields, in order; returns how many items it yielded.

        An item is a JournalEntry, or the raw MESSAGE of a service line of the same unit and
        invocation as the service entry before it, whose time `realtime_us()` gives while the
        source is suspended on it (see `SourceItem`). Raw lines are nearly every line of a busy
        unit: a line the matcher already knows to match nothing, or to be a batch line, costs a
        dict lookup here and no call; a batch line is kept unparsed (`_Builder.deferred`).
        """
        n = 0
        matcher = self.matcher
        match_line = matcher.match_line
        known = matcher.known()
        known_get, mask = (known[0].get, known[1]) if known is not None else (None, b"")
        tracker_hits = self.rule_hits
        touched = self._touched
        # The builder raw lines belong to while no server_args continuation is pending, and its
        # dicts; refreshed after every item that is not a batch line (any of those may change it).
        b = self._raw_builder()
        deferred: dict[BatchMatch, bytes] = b.deferred if b is not None else {}
        hits: dict[str, int] = b.rule_hits if b is not None else {}
        inv = b.invocation_id if b is not None else ""
        # The current run of batch lines of one BatchMatch (most come in runs): it is the newest
        # kind in `deferred` already, and its lines are added to the hit counts when it ends.
        run: BatchMatch | None = None
        run_lines = 0
        # The ledger's cheap test (a downgrade word in the raw line), for startup-window lines.
        downgrade = self.vocabulary().raw_search
        ledger_raw = self._ledger_raw
        for item in items:
            n += 1
            try:
                if b is not None and item.__class__ is bytes:
                    raw: bytes = item
                    # The digit-masked line: the matcher's key, and decode_line's line shape.
                    shape = raw.translate(mask) if known_get else b""
                    verdict: Any = known_get(shape, _MISS) if known_get else _MISS
                    if verdict is None:  # no rule matches a line of this shape
                        if b.ready_at is None and b.failure_reason is None:
                            ledger_raw(b, raw, (), downgrade)
                        continue
                    if verdict.__class__ is not BatchMatch:
                        try:
                            verdict = match_line(raw)
                        except Exception as exc:
                            raise _StageFault("rules") from exc
                    if verdict.__class__ is BatchMatch:
                        rid = verdict.rule.id
                        if rid in OBSERVED_RULES:
                            if rid == DECODE_RULE:  # nearly every line of a busy server
                                b.decode.decode_line(
                                    raw,
                                    shape or raw.translate(SHAPE_MASK),
                                    realtime_us,
                                    b.ready_at,
                                    self.decode_warmup_seconds,
                                )
                            elif rid == PREFILL_RULE:
                                b.decode.prefill_line(raw, shape or raw.translate(SHAPE_MASK))
                            else:
                                self._observe(b, rid, raw, realtime_us)
                        if verdict is not run:
                            if run is not None:  # _add_hits, written out: decode and prefill
                                ended = run.rule.id  # lines alternate, so runs are short
                                hits[ended] = hits.get(ended, 0) + run_lines
                                tracker_hits[ended] = tracker_hits.get(ended, 0) + run_lines
                            run, run_lines = verdict, 0
                            deferred.pop(verdict, None)  # re-insert: the order is that of the lines
                            touched.add(inv)
                        deferred[verdict] = raw
                        run_lines += 1
                        continue
                    if b.ready_at is None and b.failure_reason is None:
                        ledger_raw(b, raw, verdict, downgrade)
                    if not verdict:
                        continue
                    if run is not None:
                        _add_hits(run.rule.id, run_lines, hits, tracker_hits)
                        run = None
                    ts = realtime_us() / 1e6
                    for m in verdict:
                        self._apply(b, m, ts)
                        if m.rule_id in OBSERVED_RULES:
                            self._observe(b, m.rule_id, raw, realtime_us)
                    self._changed(inv, verdict)
                    if b.server_args_pending is not None:
                        b = None  # a split server_args line: its continuations go to _feed_raw
                    continue
                # Anything else goes the ordinary way, with the counts of the run in place first.
                if run is not None:
                    _add_hits(run.rule.id, run_lines, hits, tracker_hits)
                    run = None
                if isinstance(item, bytes):
                    self._feed_raw(item, realtime_us)
                else:
                    self._feed_entry(item)
                b = self._raw_builder()
                if b is not None:
                    deferred, hits, inv = b.deferred, b.rule_hits, b.invocation_id
            except Exception as exc:  # one entry's fault never stops the pipeline
                if self.on_error is None:
                    raise
                self.on_error(_stage_of(exc), _cause(exc))
                # Start over from what the tracker knows; the run's counts so far stand.
                if run is not None:
                    _add_hits(run.rule.id, run_lines, hits, tracker_hits)
                    run = None
                b = None
        if run is not None:
            _add_hits(run.rule.id, run_lines, hits, tracker_hits)
        return n

    def _raw_builder(self) -> _Builder | None:
        """The builder the next raw line belongs to, when `feed` may handle it inline: none
        while a split server_args line waits for its continuation."""
        b = self._last_service
        return b if b is not None and b.server_args_pending is None else None

    def _feed_entry(self, entry: JournalEntry) -> None:
        self._last_service = None  # until this entry's builder is known
        inv = entry.invocation_id
        self._dropping = self._closed.get(inv) if inv else None
        manager = entry.from_pid1 or (entry.message_id is not None and inv is None)
        if self._dropping is not None:
            if not manager:  # PID 1 about a closed startup: nothing to attach it to, as ever
                self._closed_line(entry.unit, str(inv))
            return
        if manager:
            self._feed_manager_line(entry)
        else:
            self._feed_service_line(entry)

    def _feed_raw(self, raw: bytes, realtime_us: Callable[[], int]) -> None:
        """A raw line `feed` does not handle inline: the continuation of a split server_args
        line, or a line after an entry whose handling failed (it went with that entry)."""
        b = self._last_service
        if b is None:
            if self._dropping == LATE or self._dropping == LOGGED:
                self.late_lines_dropped += 1
            return
        entry = JournalEntry(
            b.unit, clean_message(raw), realtime_us(), invocation_id=b.invocation_id
        )
        self._feed_service_line(entry)

    def _feed_manager_line(self, entry: JournalEntry) -> None:
        ts = entry.realtime_us / 1e6
        mid = entry.message_id
        msg = entry.message
        starting = mid in (UNIT_STARTING, UNIT_STARTED) or (
            mid is None and (msg.startswith("Starting ") or msg.startswith("Started "))
        )
        if starting:
            if entry.invocation_id:
                self._builder(entry.unit, entry.invocation_id, ts)
                return
            # Without invocation ids, "Starting" and the "Started" after it open one startup.
            current = self._builders.get(self._current.get(entry.unit, ""))
            fresh = current is not None and not current.rule_hits and current.outcome == "starting"
            if not fresh:
                self._builder(entry.unit, self._synthetic_id(entry.unit, entry.realtime_us), ts)
            return
        b = self._builder_for_manager(entry)
        if b is None:
            return
        if mid == UNIT_PROCESS_EXIT or "Main process exited" in msg:
            m = _EXIT_RE.search(msg)
            if m:
                b.exit_status = f"code={m.group(1)}, status={m.group(2)}"
        elif mid == UNIT_FAILED or "Failed with result" in msg:
            m = _RESULT_RE.search(msg)
            if b.ready_at is None and b.failure_reason is None:
                result = m.group(1) if m else "failed"
                detail = f" ({b.exit_status})" if b.exit_status else ""
                b.failure_reason = f"unit failed with result '{result}'{detail}"
                if b.ended_at is None:
                    b.ended_at = ts
        elif mid == UNIT_STOPPED or msg.startswith("Stopped ") or "Deactivated successfully" in msg:
            b.ended_at = ts
        else:
            return
        self._dirty.add(b.invocation_id)

    def _builder_for_manager(self, entry: JournalEntry) -> _Builder | None:
        if entry.invocation_id and entry.invocation_id in self._builders:
            return self._builders[entry.invocation_id]
        if entry.invocation_id:
            return None  # about an invocation we never saw start; nothing to attach it to
        inv = self._current.get(entry.unit)
        return self._builders.get(inv) if inv else None

    def _feed_service_line(self, entry: JournalEntry) -> None:
        ts = entry.realtime_us / 1e6
        b = self._service_builder(entry, ts)
        self._last_service = b
        if b.server_args_pending is not None:
            if not _starts_sglang_line(entry.message):
                # journald split an over-long server_args line; this entry is its continuation.
                self._extend_server_args(b, entry.message)
                self._dirty.add(b.invocation_id)
                return
            # A new SGLang line: the split line (never balanced) is over.
            _end_server_args(b)
            self._dirty.add(b.invocation_id)
        if entry.cmdline is not None and not b.flags:
            b.flags = launch_flags(redact_cmdline(entry.cmdline))
            self._dirty.add(b.invocation_id)
        try:
            matches = self.matcher.match(entry.message)
        except Exception as exc:
            raise _StageFault("rules") from exc
        if b.ready_at is None and b.failure_reason is None:
            kind = DOWNGRADE if self.vocabulary().hits(entry.message) else OTHER
            if kind is DOWNGRADE or b.ledger.takes_other():
                self._ledger(b, entry.message, matches, kind)
        if not matches:
            return
        for m in matches:
            self._apply(b, m, ts)
            if m.rule_id in OBSERVED_RULES:
                self._observe(b, m.rule_id, entry.message, lambda: entry.realtime_us)
        self._changed(b.invocation_id, matches)

    def vocabulary(self) -> Vocabulary:
        """The ledger's downgrade words of the matcher's rule set (a reload may replace it)."""
        rules = self.matcher.rules
        if self._vocabulary is None or self._vocabulary_of is not rules:
            self._vocabulary = Vocabulary(rules.downgrade_words)
            self._vocabulary_of = rules
        return self._vocabulary

    def _ledger_raw(
        self,
        b: _Builder,
        raw: bytes,
        matches: Sequence[RuleMatch],
        downgrade: Callable[[bytes], object] | None,
    ) -> None:
        """A startup-window line (raw) into the startup's ledger: a downgrade line always, any
        other while the ledger takes them (ledger.py bounds them)."""
        if downgrade is not None and downgrade(raw):
            self._ledger(b, clean_message(raw), matches, DOWNGRADE)
        elif b.ledger.takes_other():
            self._ledger(b, clean_message(raw), matches, OTHER)

    def _ledger(self, b: _Builder, message: str, matches: Sequence[RuleMatch], kind: str) -> None:
        """A startup-window line of this kind into the startup's ledger."""
        if b.ledger.offer(message, matches, kind):
            self._dirty.add(b.invocation_id)

    def _changed(self, inv: str, matches: Sequence[RuleMatch]) -> None:
        """Mark a startup changed by these matches: touched when they set runtime facts only
        (what a batch line does), else dirty."""
        if all(m.rule_id not in PHASE_RULES and m.facts.keys() <= RUNTIME_FACTS for m in matches):
            self._touched.add(inv)
        else:
            self._dirty.add(inv)

    def _service_builder(self, entry: JournalEntry, ts: float) -> _Builder:
        if entry.invocation_id:
            return self._builder(entry.unit, entry.invocation_id, ts)
        current = self._builders.get(self._current.get(entry.unit, ""))
        opens_new = current is None or (
            current.has_server_args_line and "server_args=" in entry.message
        )
        if opens_new:
            return self._builder(entry.unit, self._synthetic_id(entry.unit, entry.realtime_us), ts)
        assert current is not None
        return current

    def _builder(self, unit: str, inv: str, ts: float) -> _Builder:
        b = self._builders.get(inv)
        if b is None:
            b = _Builder(unit=unit, invocation_id=inv, started_at=ts, start_mono=self._mono())
            self._builders[inv] = b
            previous = self._builders.get(self._current.get(unit, ""))
            if previous is not None and ts < previous.started_at - CLOCK_STEP_TOLERANCE_S:
                # Later in the journal but earlier by the clock: one of the two clocks was wrong.
                # Order stays the journal's; the evidence goes with the newer startup.
                b.clock_notes.append(
                    _clock_skew(
                        f"started {previous.started_at - ts:.0f} s before the previous "
                        f"startup {previous.invocation_id[:8]} by the wall clock, though after "
                        "it in the journal; ordered by the journal"
                    )
                )
            if previous is not None and previous.ended_at is None:
                previous.ended_at = ts
                self._dirty.add(previous.invocation_id)
            if previous is not None:
                # The startup before the previous one is closed now, whenever it is stored: its
                # late lines are dropped however the reading was cut into commits.
                older = self._previous.get(unit)
                if older is not None:
                    self._close(older)
                self._previous[unit] = previous.invocation_id
            self._current[unit] = inv
            self._dirty.add(inv)
        return b

    def _closed_line(self, unit: str, inv: str) -> None:
        """A line of a closed startup: dropped; a late one is counted, and logged once per
        startup."""
        how = self._closed[inv]
        if how == RECORDED:
            return
        self.late_lines_dropped += 1
        if how == LATE:
            self._closed[inv] = LOGGED
            log.warning(
                "late_line_dropped",
                unit=unit,
                invocation=inv[:8],
                reason="a line of a startup two startups back; its stored record is kept",
            )

    def _mono(self) -> tuple[int, str] | None:
        return self.monotonic() if self.monotonic is not None else None

    @staticmethod
    def _synthetic_id(unit: str, realtime_us: int) -> str:
        return hashlib.sha256(f"{unit}\0{realtime_us}".encode()).hexdigest()[:32]

    # -- applying rule matches ------------------------------------------------------------------

    def _apply(self, b: _Builder, m: RuleMatch, ts: float) -> None:
        facts = m.facts
        if (
            "failure_reason" not in facts
            and "failure_exception" not in facts
            and "traceback_chained" not in facts
        ):
            b.last_exception = None  # only an exception line right before a reason names it
        if m.rule_id in PHASE_RULES:
            b.decode.phase(m.rule_id, ts)
        b.rule_hits[m.rule_id] = b.rule_hits.get(m.rule_id, 0) + 1
        self.rule_hits[m.rule_id] = self.rule_hits.get(m.rule_id, 0) + 1
        primary = m.rank.is_primary
        for name, value in m.facts.items():
            if value is None:
                continue
            if not isinstance(value, _FACT_TYPES):
                # What compiled (mypyc) code checks by itself: a rule's value of no fact type
                # is this stage's fault, pure or compiled, before the builder holds it.
                raise TypeError(f"fact {name}: a {type(value).__name__} is no fact value")
            if name == "server_args_repr":
                b.has_server_args_line = True
                b.server_args_pending = ""
                b.pending_pieces, b.pending_chars, b.pending_parsed_at = [], 0, 0
                b.pending_scan = BalanceScanner()
                self._extend_server_args(b, str(value))
            elif name == "ready":
                if value and b.ready_at is None:
                    b.ready_at = ts
                    b.ready_mono = self._mono()
            elif name == "failure_reason":
                # After ready, a crash is the end of a served startup, not a failed startup.
                # "... hit an exception: Traceback (most recent call last):" names no error; the
                # traceback's last line (e.g. the no-KV-memory ValueError) then replaces it.
                reason = scrub_head(str(value), REASON_CHARS)
                generic = _names_no_error(reason)
                if b.ready_at is None and (
                    b.failure_reason is None
                    or b.failure_reason.endswith(_TRACEBACK_HEAD)
                    # a rule's reason (`Capture cuda graph failed: ...`, the outer exception
                    # of a chained traceback) over a generic one or an exception line
                    or (b.reason_kind != "" and not generic)
                ):
                    b.reason_kind = "generic" if generic else ""
                    if generic and b.last_exception is not None:
                        reason, b.reason_kind = b.last_exception, "exception"
                    b.failure_reason = reason
                    if not generic:
                        b.chained = False  # a rule's reason for the chain's last exception
            elif name == "traceback_chained":
                b.chained = True
            elif name == "failure_exception":
                text = scrub_head(str(value), REASON_CHARS)
                if not _names_no_error(text):  # `RuntimeError: Rank 0 scheduler died ...`
                    b.last_exception = text
                    # The first exception after a generic reason, or the next one of a chained
                    # traceback: the start died of the last exception of the chain, not of the
                    # one it was handling (later tracebacks, such as the main process's
                    # EOFError after a scheduler died, are not chained to it and do not count).
                    if b.ready_at is None and (
                        b.reason_kind == "generic" or (b.chained and b.reason_kind == "exception")
                    ):
                        b.failure_reason, b.reason_kind = text, "exception"
                    b.chained = False
            elif name in RUNTIME_FACTS:
                b.settle()  # older deferred batch lines first
                b.runtime[name] = value
            elif isinstance(value, tuple):
                have = b.facts.get(name)
                merged = list(have) if isinstance(have, tuple) else []
                merged.extend(
                    c for c in (scrub_head(v, FACT_CHARS) for v in value) if c not in merged
                )
                b.facts[name] = tuple(merged[:LIST_KEPT])
            else:
                if name not in b.facts or (primary and name not in b.primary):
                    b.facts[name] = (
                        scrub_head(value, FACT_CHARS) if isinstance(value, str) else value
                    )
                    if primary:
                        b.primary.add(name)

    def _extend_server_args(self, b: _Builder, text: str) -> None:
        """Add one piece of a (possibly split) server_args line; linear in the line's length.

        The pieces are only scanned for balance; the text is parsed when the scanner says the
        repr may be complete, or when it has doubled since the last parse (a bound on the work
        should the scanner and the parser disagree). The raw text is held in memory only and
        never persisted (it may hold secrets before redaction); the pipeline keeps its cursor
        before the line's first entry while it is pending.
        """
        room = _MAX_SERVER_ARGS_CHARS - b.pending_chars
        if room <= 0:
            return  # over the cap: the rest of the line is dropped, as a scan drops it
        piece = text[:room]
        b.pending_pieces.append(piece)
        b.pending_chars += len(piece)
        b.pending_scan.feed(piece)
        b.server_args_pending = ""  # pending; the text lives in pending_pieces
        if not b.pending_scan.maybe_complete and b.pending_chars < 2 * max(
            b.pending_parsed_at, 1 << 16
        ):
            return
        pending = "".join(b.pending_pieces)
        b.pending_pieces = [pending]
        b.pending_parsed_at = b.pending_chars
        result = parse_server_args(pending, partial_ok=True)
        if result.complete or result.error is not None:
            b.server_args = dict(result.args)
            _clear_pending(b)


# The types of a FactValue (model.py), for the check in _apply.
_FACT_TYPES = (str, int, float, tuple)


def _names_no_error(reason: str) -> bool:
    """True for a failure reason that says a start died but not of what."""
    return reason.endswith(_TRACEBACK_HEAD) or _GENERIC_REASON_RE.match(reason) is not None


def _end_server_args(b: _Builder) -> None:
    """Parse a pending split line as far as it goes and stop waiting for more of it."""
    result = parse_server_args("".join(b.pending_pieces), partial_ok=True)
    b.server_args = dict(result.args)
    _clear_pending(b)


def _clear_pending(b: _Builder) -> None:
    b.server_args_pending = None
    b.pending_pieces = []
    b.pending_chars = 0
    b.pending_parsed_at = 0


class _StageFault(Exception):
    """An exception raised by another stage (the rules) while the tracker handled an entry."""

    def __init__(self, stage: str) -> None:
        super().__init__(stage)
        self.stage = stage


def _stage_of(exc: Exception) -> str:
    return exc.stage if isinstance(exc, _StageFault) else "tracker"


def _cause(exc: Exception) -> Exception:
    if isinstance(exc, _StageFault) and isinstance(exc.__cause__, Exception):
        return exc.__cause__
    return exc


def _starts_sglang_line(message: str) -> bool:
    """A new SGLang line (its `[time ...]` prefix), also inside the wrappers other tools put
    before it (a Ray actor's, docker compose's): never the continuation of a split line."""
    return LINE_START_RE.match(strip_wrappers(message)) is not None


def _add_hits(rule_id: str, lines: int, *counts: dict[str, int]) -> None:
    for hits in counts:
        hits[rule_id] = hits.get(rule_id, 0) + lines
