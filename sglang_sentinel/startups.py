"""Startup aggregation: journal entries and rule matches -> one StartupRecord per invocation.

A startup is one service invocation. It is keyed by `_SYSTEMD_INVOCATION_ID` on the service's
lines and `INVOCATION_ID` on PID 1's; where a journal has neither, PID 1's "Started" line or a
new `server_args=` line opens a new startup under a deterministic synthetic id, so a second scan
of the same journal produces the same ids.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .fact_ranges import sane_facts
from .model import (
    RUNTIME_FACTS,
    STARTUP_FACTS,
    UNIT_FAILED,
    UNIT_PROCESS_EXIT,
    UNIT_STARTED,
    UNIT_STARTING,
    UNIT_STOPPED,
    FactValue,
    JournalEntry,
    Outcome,
    RuleMatch,
    StartupRecord,
)
from .redact import launch_flags, redact_cmdline, scrub_text
from .rules import BatchMatch, RuleSet
from .serverargs import is_complete, normalized_settings, parse_server_args
from .text import clean_message

Matcher = Callable[[str], list[RuleMatch]]
# RuleSet.match_raw: raw MESSAGE bytes -> a BatchMatch for a batch line (its facts are
# `rule.facts_of_raw(raw)`, converted only when needed); else match(clean_message(raw)).
RawMatcher = Callable[[bytes], "list[RuleMatch] | BatchMatch"]
_MISS: Any = object()  # a line match_raw's memo does not know

# Facts the tracker takes from server_args when no log line reported them.
_FROM_SETTINGS = (
    "tp_size",
    "dp_size",
    "model_path",
    "attention_backend",
    "chunked_prefill_size",
    "cuda_graph",
    "piecewise_cuda_graph",
)
_EXIT_RE = re.compile(r"code=(\w+), status=(\S+)")
_RESULT_RE = re.compile(r"Failed with result '([^']+)'")
_SGLANG_PREFIX = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
# A split server_args line never needs more than a few continuation entries (48K each).
_MAX_SERVER_ARGS_CHARS = 1 << 20


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
    server_args_pending: str | None = None
    flags: tuple[str, ...] = ()
    runtime: dict[str, FactValue] = field(default_factory=dict)
    has_server_args_line: bool = False
    # Batch lines not converted yet: BatchMatch -> its newest raw line, oldest first. Lines of
    # one BatchMatch set the same facts, so only the newest can still show in `runtime` (for a
    # fact, the last line that set it; any later line sets other facts) and the others are
    # never parsed. `settle()` applies these, in order, before `runtime` is read.
    deferred: dict[BatchMatch, bytes] = field(default_factory=dict)

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
        self.settle()
        data = {
            "unit": self.unit,
            "invocation_id": self.invocation_id,
            "started_at": self.started_at,
            "ready_at": self.ready_at,
            "ended_at": self.ended_at,
            "failure_reason": self.failure_reason,
            "exit_status": self.exit_status,
            "facts": {k: list(v) if isinstance(v, tuple) else v for k, v in self.facts.items()},
            "primary": sorted(self.primary),
            "rule_hits": self.rule_hits,
            "server_args": self.server_args,
            # Never persisted: the raw text is unredacted until it parses.
            "server_args_pending": None,
            "flags": list(self.flags),
            "runtime": self.runtime,
            "has_server_args_line": self.has_server_args_line,
        }
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> _Builder:
        d = json.loads(text)
        return cls(
            unit=d["unit"],
            invocation_id=d["invocation_id"],
            started_at=d["started_at"],
            ready_at=d["ready_at"],
            ended_at=d["ended_at"],
            failure_reason=d["failure_reason"],
            exit_status=d["exit_status"],
            facts={k: tuple(v) if isinstance(v, list) else v for k, v in d["facts"].items()},
            primary=set(d["primary"]),
            rule_hits=dict(d["rule_hits"]),
            server_args=d["server_args"],
            server_args_pending=d["server_args_pending"],
            flags=tuple(d["flags"]),
            runtime=dict(d["runtime"]),
            has_server_args_line=d["has_server_args_line"],
        )

    def snapshot(self) -> StartupRecord:
        self.settle()
        facts: dict[str, FactValue] = dict.fromkeys(STARTUP_FACTS)
        facts.update(self.facts)
        settings = normalized_settings(self.server_args) if self.server_args else {}
        for name in _FROM_SETTINGS:
            if facts.get(name) is None and settings.get(name) is not None:
                value = settings[name]
                if isinstance(value, int | float | bool | str):
                    facts[name] = value
        if self.ready_at is not None:
            facts["startup_seconds"] = round(self.ready_at - self.started_at, 3)
        facts, notes = sane_facts(facts)
        runtime, runtime_notes = sane_facts(self.runtime)
        return StartupRecord(
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
            runtime=runtime,
            notes=tuple(notes + runtime_notes),
        )


class StartupTracker:
    """Feeds entries through the rules and keeps the current startup of every unit."""

    def __init__(self, match: Matcher, match_raw: RawMatcher | None = None) -> None:
        self._match = match
        self.match_raw: RawMatcher = match_raw or (lambda raw: match(clean_message(raw)))
        self._builders: dict[str, _Builder] = {}  # invocation id -> builder
        self._current: dict[str, str] = {}  # unit -> invocation id of its newest startup
        self._dirty: set[str] = set()
        self.rule_hits: dict[str, int] = {}
        # The builder of the service line fed last, for `feed_same_invocation`.
        self._last_service: _Builder | None = None

    # -- persistence hooks --------------------------------------------------------------------

    def restore(self, builder_states: Iterable[str]) -> None:
        """Resume the open startups saved by `dirty_states()` before a restart."""
        for text in builder_states:
            b = _Builder.from_json(text)
            self._builders[b.invocation_id] = b
            current = self._current.get(b.unit)
            if current is None or self._builders[current].started_at <= b.started_at:
                self._current[b.unit] = b.invocation_id

    def take_dirty(self) -> list[tuple[StartupRecord, str]]:
        """Records changed since the last call, with their resumable state; oldest first."""
        out = [(self._builders[i].snapshot(), self._builders[i].to_json()) for i in self._dirty]
        self._dirty.clear()
        self._last_service = None
        # Only the newest startup of each unit can still change; forget the others.
        keep = set(self._current.values())
        for inv in [i for i in self._builders if i not in keep]:
            del self._builders[inv]
        out.sort(key=lambda pair: (pair[0].started_at, pair[0].invocation_id))
        return out

    def current(self, unit: str) -> StartupRecord | None:
        inv = self._current.get(unit)
        return self._builders[inv].snapshot() if inv else None

    # -- feeding ------------------------------------------------------------------------------

    def feed(self, entry: JournalEntry) -> None:
        if entry.from_pid1 or (entry.message_id is not None and entry.invocation_id is None):
            self._last_service = None
            self._feed_manager_line(entry)
        else:
            self._feed_service_line(entry)

    def feed_same_invocation(self, raw: bytes, realtime_us: Callable[[], int]) -> None:
        """A service line of the same unit and invocation as the service entry fed just before.

        What `feed` does with such an entry, minus what cannot change within an invocation
        (builder lookup, the _CMDLINE flags); the time is read only when a rule matched.
        """
        b = self._last_service
        if b is None:
            raise ValueError("feed_same_invocation() needs a service entry fed before it")
        if b.server_args_pending is not None:
            message = clean_message(raw)
            entry = JournalEntry(b.unit, message, realtime_us(), invocation_id=b.invocation_id)
            self._feed_service_line(entry)
            return
        matches = self.match_raw(raw)
        if isinstance(matches, BatchMatch):
            # A batch line: what _apply does with runtime facts, without the rank and the time,
            # and parsed only if it is still the newest line of its kind when read.
            rid = matches.rule.id
            deferred = b.deferred
            deferred.pop(matches, None)  # re-insert: the order is the order of the lines
            deferred[matches] = raw
            b.rule_hits[rid] = b.rule_hits.get(rid, 0) + 1
            self.rule_hits[rid] = self.rule_hits.get(rid, 0) + 1
            self._dirty.add(b.invocation_id)
        elif matches:
            ts = realtime_us() / 1e6
            for m in matches:
                self._apply(b, m, ts)
            self._dirty.add(b.invocation_id)

    def feed_lines(
        self, items: Iterable[JournalEntry | bytes], realtime_us: Callable[[], int]
    ) -> int:
        """Feed what `JournalSource.lines` yields, in order; returns how many items it yielded.

        `feed` for entries and `feed_same_invocation` for raw lines, with that one's batch-line
        case written out here: it is nearly every line of a busy unit, and keeping the builder's
        dicts in locals between entries saves a call and a dozen attribute reads per line.
        """
        n = 0
        match_raw = self.match_raw
        # match_raw's memo, looked up here: a memoised batch line or non-matching line (nearly
        # every line) then costs a dict lookup and no call.
        owner = getattr(match_raw, "__self__", None)
        memo = owner.line_memo() if isinstance(owner, RuleSet) else None
        memo_get, mask = (memo[0].get, memo[1]) if memo is not None else (None, b"")
        tracker_hits = self.rule_hits
        dirty = self._dirty
        # The builder raw lines belong to, while no server_args continuation is pending;
        # refreshed after every item that is not a batch line (any of those may change it).
        b: _Builder | None = None
        deferred: dict[BatchMatch, bytes] = {}
        hits: dict[str, int] = {}
        inv = ""
        # The current run of batch lines of one BatchMatch (most come in runs): it is the newest
        # kind in `deferred` already, and its lines are added to the hit counts when it ends.
        run: BatchMatch | None = None
        run_lines = 0
        for item in items:
            n += 1
            matches: Sequence[RuleMatch] = ()  # the exact-path matches of a raw line
            if b is not None and isinstance(item, bytes):
                verdict = memo_get(item.translate(mask), _MISS) if memo_get is not None else _MISS
                if verdict is None:
                    continue  # no rule matches a line of this shape
                if verdict.__class__ is not BatchMatch:
                    verdict = match_raw(item)
                if isinstance(verdict, BatchMatch):  # the feed_same_invocation batch-line case
                    if verdict is not run:
                        if run is not None:
                            _add_hits(run.rule.id, run_lines, hits, tracker_hits)
                        run, run_lines = verdict, 0
                        deferred.pop(verdict, None)  # re-insert: the order is that of the lines
                        dirty.add(inv)
                    deferred[verdict] = item
                    run_lines += 1
                    continue
                if not verdict:
                    continue
                matches = verdict
            # Anything else goes the ordinary way, with the counts of the run in place first.
            if run is not None:
                _add_hits(run.rule.id, run_lines, hits, tracker_hits)
                run = None
            if matches and b is not None:
                ts = realtime_us() / 1e6
                for m in matches:
                    self._apply(b, m, ts)
                dirty.add(inv)
            elif isinstance(item, bytes):
                self.feed_same_invocation(item, realtime_us)
            else:
                self.feed(item)
            b = self._last_service
            if b is not None and b.server_args_pending is not None:
                b = None  # a continuation may follow: feed_same_invocation handles it
            if b is not None:
                deferred, hits, inv = b.deferred, b.rule_hits, b.invocation_id
        if run is not None:
            _add_hits(run.rule.id, run_lines, hits, tracker_hits)
        return n

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
        if b.server_args_pending is not None and not _SGLANG_PREFIX.match(entry.message):
            # journald split an over-long server_args line; this entry is its continuation.
            self._extend_server_args(b, entry.message)
            self._dirty.add(b.invocation_id)
            return
        if entry.cmdline is not None and not b.flags:
            b.flags = launch_flags(redact_cmdline(entry.cmdline))
            self._dirty.add(b.invocation_id)
        matches = self._match(entry.message)
        if not matches:
            return
        for m in matches:
            self._apply(b, m, ts)
        self._dirty.add(b.invocation_id)

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
            b = _Builder(unit=unit, invocation_id=inv, started_at=ts)
            self._builders[inv] = b
            previous = self._builders.get(self._current.get(unit, ""))
            if previous is not None and previous.ended_at is None:
                previous.ended_at = ts
                self._dirty.add(previous.invocation_id)
            self._current[unit] = inv
            self._dirty.add(inv)
        return b

    @staticmethod
    def _synthetic_id(unit: str, realtime_us: int) -> str:
        return hashlib.sha256(f"{unit}\0{realtime_us}".encode()).hexdigest()[:32]

    # -- applying rule matches ------------------------------------------------------------------

    def _apply(self, b: _Builder, m: RuleMatch, ts: float) -> None:
        b.rule_hits[m.rule_id] = b.rule_hits.get(m.rule_id, 0) + 1
        self.rule_hits[m.rule_id] = self.rule_hits.get(m.rule_id, 0) + 1
        primary = m.rank.is_primary
        for name, value in m.facts.items():
            if value is None:
                continue
            if name == "server_args_repr":
                b.has_server_args_line = True
                b.server_args_pending = ""
                self._extend_server_args(b, str(value))
            elif name == "ready":
                if value and b.ready_at is None:
                    b.ready_at = ts
            elif name == "failure_reason":
                # After ready, a crash is the end of a served startup, not a failed startup.
                if b.ready_at is None and b.failure_reason is None:
                    b.failure_reason = scrub_text(str(value))[:500]
            elif name in RUNTIME_FACTS:
                b.settle()  # older deferred batch lines first
                b.runtime[name] = value
            elif isinstance(value, tuple):
                have = b.facts.get(name)
                merged = list(have) if isinstance(have, tuple) else []
                merged.extend(v for v in value if v not in merged)
                b.facts[name] = tuple(merged)
            else:
                if name not in b.facts or (primary and name not in b.primary):
                    b.facts[name] = scrub_text(value) if isinstance(value, str) else value
                    if primary:
                        b.primary.add(name)

    def _extend_server_args(self, b: _Builder, text: str) -> None:
        pending = (b.server_args_pending or "") + text
        if len(pending) > _MAX_SERVER_ARGS_CHARS:
            pending = pending[:_MAX_SERVER_ARGS_CHARS]
        complete = is_complete(pending)
        result = parse_server_args(pending, partial_ok=True)
        b.server_args = dict(result.args)
        # Keep waiting for a continuation only while the repr is unbalanced; the raw text is
        # held in memory only and never persisted (it may hold secrets before redaction).
        b.server_args_pending = None if complete else pending


def _add_hits(rule_id: str, lines: int, *counts: dict[str, int]) -> None:
    for hits in counts:
        hits[rule_id] = hits.get(rule_id, 0) + lines
