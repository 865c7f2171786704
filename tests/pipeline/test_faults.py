"""Faults of the pipeline's stages and of the state database, on real journals and real SQLite.

Each test compares with a one-shot pass over the same journal (what `sentinel scan` stores):
a fault may delay a startup, never lose it, record it twice or change its findings.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog
from journaltools import StartupScript, build_journal, ready_startup, write_export

from sglang_sentinel.compare import Policy, evaluate
from sglang_sentinel.config import Config
from sglang_sentinel.config.schema import JournalConfig
from sglang_sentinel.model import Comparison, RuleMatch, StartupRecord
from sglang_sentinel.pipeline import CommitFailed, Pipeline, load_rules_and_policy
from sglang_sentinel.rules import MemoMatcher, RuleSet
from sglang_sentinel.sources import JournalSource
from sglang_sentinel.state import StateStore

UNIT = "sglang-faults.service"
POISON = "POISON-LINE"


def three_startups() -> list[StartupScript]:
    out = []
    for day, mrr in (("2026-03-01", 48), ("2026-03-02", 48), ("2026-03-03", 20)):
        s = ready_startup(f"{day} 10:00:00", mrr)
        s.unit = UNIT
        out.append(s)
    return out


def journal_of(tmp_path: Path, scripts: list[StartupScript], name: str = "j") -> Path:
    entries = [e for s in scripts for e in s.entries()]
    for e in entries:  # ready_startup writes the default unit name into its entries
        for key in ("_SYSTEMD_UNIT", "UNIT"):
            if key in e and str(e[key]).startswith("sglang-qwen"):
                e[key] = UNIT
    return build_journal(write_export(entries, tmp_path / f"{name}.export"), tmp_path / name)


def open_pipeline(
    journal: Path, state: Path, *, matcher: Any = None, store: StateStore | None = None, **kw: Any
) -> Pipeline:
    config = Config(units=(UNIT,), journal=JournalConfig(directory=journal))
    real_rules, policy = load_rules_and_policy(config)
    source = JournalSource([UNIT], directory=journal)
    source.open()
    p = Pipeline(
        source,
        real_rules,
        policy,
        store or StateStore(state),
        source_key="test",
        matcher=matcher,
        **kw,
    )
    p.resume(from_boot_start=False)
    return p


def drain(p: Pipeline) -> None:
    while p.process(limit=1000):
        p.commit()
    p.commit(final=True)


def outcome(store: StateStore) -> list[tuple[Any, ...]]:
    """What a pass stored: each startup with its facts, and its baseline and findings as a
    reader judges them (comparisons are not stored), journal order."""
    policy = load_rules_and_policy(Config(units=(UNIT,)))[1]
    out = []
    for r in store.startups([UNIT]):
        c = evaluate(store, r, policy)
        out.append(
            (
                r.invocation_id,
                r.outcome,
                r.facts.get("max_running_requests"),
                c.baseline.invocation_id if c.baseline else None,
                c.baseline_kind,
                sorted(f.check for f in c.findings),
            )
        )
    return out


def one_shot(tmp_path: Path, journal: Path, **kw: Any) -> list[tuple[Any, ...]]:
    p = open_pipeline(journal, tmp_path / "oneshot-state", **kw)
    drain(p)
    return outcome(p.store)


@pytest.fixture
def events() -> Iterator[list[MutableMapping[str, Any]]]:
    with structlog.testing.capture_logs() as logs:
        yield logs


# -- a failed transaction keeps its records -------------------------------------------------------


class LockHolder:
    """Another process holding the database's write lock (BEGIN IMMEDIATE) until released."""

    def __init__(self, db: Path) -> None:
        code = (
            "import sqlite3, sys\n"
            f"db = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n"
            "db.execute('ROLLBACK')\n"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == b"locked\n"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=10) == 0


def test_a_commit_failing_on_a_held_lock_keeps_its_startup_and_cursor(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    """The lock held past the busy timeout: CommitFailed, nothing stored; released: stored once."""
    scripts = three_startups()
    journal = journal_of(tmp_path, scripts)
    expected = one_shot(tmp_path, journal)
    state = tmp_path / "state"
    p = open_pipeline(journal, state, store=StateStore(state, busy_timeout=0.2))
    first = len(scripts[0].entries()) + len(scripts[1].entries())
    p.process(limit=first)
    p.commit()
    cursor_before = p.store.cursor("test")
    p.process()  # the regressed third startup
    holder = LockHolder(p.store.path)
    try:
        for _ in range(3):  # the fault lasts: every retry fails, nothing is lost meanwhile
            with pytest.raises(CommitFailed, match="database is locked"):
                p.commit()
    finally:
        holder.release()
    assert p.stats.commit_failures == 3
    assert p.store.cursor("test") == cursor_before
    assert len(p.store.startups([UNIT])) == 2
    p.commit()
    assert outcome(p.store) == expected
    assert expected[2][5] == ["max_running_requests_drop"]


def test_a_failed_commit_then_a_stop_reads_the_entries_again_on_start(tmp_path: Path) -> None:
    """The shutdown path's commit fails too: the cursor is not moved alone past the records."""
    scripts = three_startups()
    journal = journal_of(tmp_path, scripts)
    expected = one_shot(tmp_path, journal)
    state = tmp_path / "state"
    p = open_pipeline(journal, state, store=StateStore(state, busy_timeout=0.2))
    p.process(limit=len(scripts[0].entries()) + len(scripts[1].entries()))
    p.commit()
    p.process()
    holder = LockHolder(p.store.path)
    try:
        with pytest.raises(CommitFailed):
            p.commit()
        with pytest.raises(CommitFailed):
            p.commit(force=True)  # what Daemon._shutdown does
    finally:
        holder.release()
    p.source.close()
    p.store.close()
    again = open_pipeline(journal, state)
    drain(again)
    assert outcome(again.store) == expected


# -- one entry's or one startup's fault never stops the pipeline ----------------------------------


class Exploding:
    """A fact value whose truth, str() and JSON form raise: what a rule bug could hand on."""

    def __bool__(self) -> bool:
        raise RuntimeError("boom in bool()")

    def __str__(self) -> str:
        raise RuntimeError("boom in str()")

    __repr__ = __str__


class FaultyMatcher:
    """The real rules' matcher, except that a line with POISON in it makes `match` raise (stage
    rules) or return a match with an unusable value (the tracker or the state then fail on it)."""

    def __init__(self, real: RuleSet, fault: str) -> None:
        self.real = MemoMatcher(real)
        self.fault = fault
        self.rules = real

    def match(self, message: str) -> list[RuleMatch]:
        if POISON in message:
            if self.fault == "rules":
                raise ValueError("a rule blew up")
            if self.fault == "tracker":
                return [RuleMatch("ready", {"ready": Exploding()})]  # type: ignore[dict-item]
            if self.fault == "state":  # of no fact type: the tracker refuses to hold it
                return [RuleMatch("model_arch", {"kv_cache_dtype": Exploding()})]  # type: ignore[dict-item]
        return self.real.match(message)

    def match_line(self, raw: bytes) -> Any:
        if POISON.encode() in raw:
            return self.match(raw.decode())
        return self.real.match_line(raw)

    def known(self) -> None:
        return None  # every line through match_line, where the poison is


def poisoned(tmp_path: Path) -> tuple[Path, list[StartupScript]]:
    scripts = three_startups()
    # A poisoned line inside the second startup (after its first entry) and before the first.
    scripts[1].line(f"[2026-03-02 10:00:51 TP0] {POISON} one")
    scripts[0].line(f"[2026-03-01 10:00:01 TP0] {POISON} two")
    return journal_of(tmp_path, scripts), scripts


@pytest.mark.parametrize("stage", ["rules", "tracker"])
def test_an_entry_that_raises_is_logged_counted_and_skipped(
    tmp_path: Path, stage: str, events: list[dict[str, Any]]
) -> None:
    journal, _ = poisoned(tmp_path)
    clean = one_shot(tmp_path, journal)
    real, _policy = load_rules_and_policy(Config(units=(UNIT,)))
    p = open_pipeline(journal, tmp_path / "state", matcher=FaultyMatcher(real, stage))
    drain(p)
    assert outcome(p.store) == clean
    assert p.stats.processing_errors == {stage: 2}
    failed = [e for e in events if e["event"] == "processing_failed"]
    assert [e["stage"] for e in failed] == [stage, stage]
    assert all(e["cursor"] and "s=" in e["cursor"] for e in failed)


def test_a_fact_value_that_cannot_be_stored_is_refused_by_the_tracker(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    """A value of no fact type (JSON could not write it) is the tracker's fault, pure and
    compiled alike (mypyc checks the type by itself): the line is skipped, every startup is
    stored as without it, the cursor moves on. (A startup the store cannot write: below.)"""
    journal, _ = poisoned(tmp_path)
    clean = one_shot(tmp_path, journal)
    real, _policy = load_rules_and_policy(Config(units=(UNIT,)))
    p = open_pipeline(journal, tmp_path / "state", matcher=FaultyMatcher(real, "state"))
    drain(p)
    assert outcome(p.store) == clean
    assert p.stats.processing_errors == {"tracker": 2}
    failed = [e for e in events if e["event"] == "processing_failed"]
    assert len(failed) == 2  # once per startup
    assert p.store.cursor("test") is not None


class FaultyStore(StateStore):
    """A store that cannot write one startup (as a full column or a driver bug)."""

    bad = ""

    def save_startup(
        self, record: StartupRecord, builder: str | None, owner: str | None = None
    ) -> bool | None:
        if record.invocation_id == self.bad:
            raise ValueError("cannot store this one")
        return super().save_startup(record, builder, owner)


def test_a_startup_the_store_cannot_write_is_left_out_whole(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    journal = journal_of(tmp_path, three_startups())
    clean = one_shot(tmp_path, journal)
    store = FaultyStore(tmp_path / "state")
    store.bad = clean[0][0]
    p = open_pipeline(journal, tmp_path / "state", store=store)
    drain(p)
    assert store.startup(clean[0][0]) is None  # its savepoint rolled back the record too
    assert [row[0] for row in outcome(store)] == [clean[1][0], clean[2][0]]
    assert outcome(store)[1] == clean[2]
    assert p.stats.processing_errors == {"state": 1}


def test_a_comparison_that_raises_for_one_startup_leaves_the_others(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    scripts = three_startups()
    journal = journal_of(tmp_path, scripts)
    clean = one_shot(tmp_path, journal)
    bad = clean[1][0]

    def faulty(store: StateStore, record: StartupRecord, policy: Policy) -> Comparison:
        if record.invocation_id == bad:
            raise ZeroDivisionError("compare bug")
        return evaluate(store, record, policy)

    p = open_pipeline(journal, tmp_path / "state", evaluator=faulty)
    returned = []
    while p.process(limit=1000):
        returned += p.commit()
    returned += p.commit(final=True)
    # The startup is stored (and is the third one's baseline, as in the clean pass); only its
    # comparison failed, so the commit returned none for it.
    assert bad not in {c.record.invocation_id for c in returned}
    got = outcome_without(p.store, bad)
    assert got == [row for row in clean if row[0] != bad]
    assert p.stats.processing_errors == {"compare": 1}
    [event] = [e for e in events if e["event"] == "processing_failed"]
    assert event["stage"] == "compare" and event["invocation"] == bad[:8]
    assert p.stats.processing_errors == {"compare": 1}
    assert "ZeroDivisionError: compare bug" in event["error"]


def outcome_without(store: StateStore, uncompared: str) -> list[tuple[Any, ...]]:
    record = store.startup(uncompared)
    assert record is not None and record.facts["max_running_requests"] == 48
    return [row for row in outcome(store) if row[0] != uncompared]


# -- a split server_args line and the cursor -------------------------------------------------------


def split_startup() -> StartupScript:
    long_list = ", ".join(str(i) for i in range(30000))
    line = (
        "[2026-03-09 21:31:11] server_args=ServerArgs(model_path='/models/big', tp_size=8, "
        f"cuda_graph_bs=[{long_list}], attention_backend='fa3', dp_size=2)"
    )
    s = StartupScript(unit=UNIT, start="2026-03-09 21:31:07")
    s.started("2026-03-09 21:31:07")
    parts = [line[i : i + 49152] for i in range(0, len(line), 49152)]
    assert len(parts) >= 3
    for part in parts:
        s.line(part, when="2026-03-09 21:31:11")
    s.line("[2026-03-09 21:32:10] The server is fired up and ready to roll!")
    return s


def test_a_commit_between_the_parts_of_a_split_line_keeps_the_cursor_before_it(
    tmp_path: Path,
) -> None:
    """Killed (here: dropped) after any part: the restart reads the whole line again."""
    s = split_startup()
    journal = journal_of(tmp_path, [s])
    expected = one_shot(tmp_path, journal)
    scan_store = StateStore(tmp_path / "oneshot-state")
    [want] = scan_store.startups([UNIT])
    assert want.facts["dp_size"] == 2 and want.facts["attention_backend"] == "fa3"
    n = len(s.entries())
    for cut in range(1, n):
        state = tmp_path / f"state-{cut}"
        p = open_pipeline(journal, state)
        p.process(limit=cut)
        p.commit()
        p.source.close()
        p.store.close()  # a SIGKILL here loses only memory
        again = open_pipeline(journal, state)
        drain(again)
        [got] = again.store.startups([UNIT])
        assert outcome(again.store) == expected
        assert json.dumps(got.server_args, sort_keys=True) == json.dumps(
            want.server_args, sort_keys=True
        )
        assert got.facts == want.facts


def test_a_split_line_whose_continuation_never_comes_is_taken_as_it_is(tmp_path: Path) -> None:
    """The hold on the cursor is bounded: after SPLIT_HOLD_SECONDS the partial line is stored."""
    s = split_startup()
    entries = s.entries()[:2]  # Started + the first 48 KiB part, then silence
    journal = build_journal(write_export(entries, tmp_path / "x.export"), tmp_path / "j")
    now = [1000.0]
    p = open_pipeline(journal, tmp_path / "state", clock=lambda: now[0])
    p.process()
    assert p.commit() == [] and p.holding
    now[0] += 4.9
    assert p.commit() == [] and p.holding
    now[0] += 0.2
    [c] = p.commit()
    assert not p.holding
    assert c.record.server_args["model_path"] == "/models/big"
    assert p.store.cursor("test") is not None


def test_a_new_sglang_line_ends_a_split_line_that_never_balanced(tmp_path: Path) -> None:
    s = StartupScript(unit=UNIT, start="2026-03-09 21:31:07")
    s.started("2026-03-09 21:31:07")
    s.line("[2026-03-09 21:31:11] server_args=ServerArgs(model_path='/m', tp_size=4, x=[1, 2")
    s.line("[2026-03-09 21:32:10] The server is fired up and ready to roll!")
    s.line("Traceback text that is not a continuation")
    journal = journal_of(tmp_path, [s])
    p = open_pipeline(journal, tmp_path / "state")
    p.process()
    [c] = p.commit()  # not held: the prefixed line ended the split line
    assert c.record.outcome == "ready"
    assert c.record.server_args == {"model_path": "/m", "tp_size": 4}


@pytest.mark.parametrize(
    "wrapper", ["(SGLangEngine pid=206831) ", "sglang-1  | ", "2026-03-09T21:31:11.5Z "]
)
def test_a_new_wrapped_sglang_line_ends_a_split_line_that_never_balanced(
    tmp_path: Path, wrapper: str
) -> None:
    """The same with every line wrapped (a Ray actor's, docker compose's prefix): the wrapped
    SGLang line is a new line, not a continuation of the split one."""
    s = StartupScript(unit=UNIT, start="2026-03-09 21:31:07")
    s.started("2026-03-09 21:31:07")
    s.line(
        wrapper
        + "[2026-03-09 21:31:11] server_args=ServerArgs(model_path='/m', tp_size=4, x=[1, 2",
        when="2026-03-09 21:31:11",
    )
    s.line(wrapper + "[2026-03-09 21:32:10] The server is fired up and ready to roll!",
           when="2026-03-09 21:32:10")  # fmt: skip
    journal = journal_of(tmp_path, [s])
    p = open_pipeline(journal, tmp_path / "state")
    p.process()
    [c] = p.commit()  # not held: the wrapped prefixed line ended the split line
    assert c.record.outcome == "ready"
    assert c.record.server_args == {"model_path": "/m", "tp_size": 4}


def test_a_long_split_line_costs_linear_time(tmp_path: Path) -> None:
    """6 MiB of server_args in 48 KiB journald parts: one scan of the text, not one per part
    (it was 21.8 s for 1 MiB); the part over the 1 MiB cap is dropped, as a scan drops it.
    Timed in this process's CPU seconds, so a busy machine's waiting does not count."""
    from sglang_sentinel.startups import StartupTracker

    real, _policy = load_rules_and_policy(Config(units=(UNIT,)))
    long_list = ", ".join(f"'{i:08d}'" for i in range(6 * 1024 * 1024 // 12))
    line = (
        f"[2026-03-09 21:31:11] server_args=ServerArgs(model_path='/m', x=[{long_list}], tp_size=8)"
    )
    parts = [line[i : i + 49152] for i in range(0, len(line), 49152)]
    t = StartupTracker(MemoMatcher(real))
    from sglang_sentinel.model import JournalEntry

    inv = "a" * 32
    start = time.process_time()
    t.feed([JournalEntry(UNIT, parts[0], 1, invocation_id=inv)], lambda: 1)
    t.feed([part.encode() for part in parts[1:]], lambda: 2)
    t.feed([b"[2026-03-09 21:32:10] The server is fired up and ready to roll!"], lambda: 3)
    elapsed = time.process_time() - start
    rec = t.current(UNIT)
    assert rec is not None and rec.outcome == "ready"
    assert rec.server_args["model_path"] == "/m"
    assert len(parts) > 120
    assert elapsed < 3.0, f"{len(line) / 2**20:.1f} MiB split line took {elapsed:.2f} s"


def test_a_unit_whose_metrics_raise_leaves_the_others_on_metrics(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    """The metrics stage: one unit's comparison raising while the exported snapshot is built is
    counted and logged once; the other unit's series and the self metrics are still served."""
    from prometheus_client import generate_latest

    from sglang_sentinel.daemon import Daemon

    other = "sglang-faults-b.service"
    a = three_startups()
    b = ready_startup("2026-03-04 10:00:00", 64)
    b_entries = b.entries()
    for e in b_entries:
        for key in ("_SYSTEMD_UNIT", "UNIT"):
            if key in e and str(e[key]).startswith("sglang-qwen"):
                e[key] = other
    a_entries = [e for s in a for e in s.entries()]
    for e in a_entries:
        for key in ("_SYSTEMD_UNIT", "UNIT"):
            if key in e and str(e[key]).startswith("sglang-qwen"):
                e[key] = UNIT
    journal = build_journal(
        write_export(a_entries + b_entries, tmp_path / "m.export"), tmp_path / "m"
    )
    config = Config(
        units=(UNIT, other), journal=JournalConfig(directory=journal), state_dir=tmp_path / "s"
    )
    d = Daemon.from_config(config)
    d.source.open()
    d.pipeline.resume(from_boot_start=False)
    drain(d.pipeline)

    def faulty(store: StateStore, record: StartupRecord, policy: Policy) -> Comparison:
        if record.unit == UNIT:
            raise KeyError("metrics bug")
        return evaluate(store, record, policy)

    d.pipeline.evaluator = faulty
    for _ in range(3):  # as after three commits
        d.publish()
    text = generate_latest(d.registry).decode()
    assert f'sglang_sentinel_max_running_requests{{unit="{other}"}} 64.0' in text
    assert f'sglang_sentinel_max_running_requests{{unit="{UNIT}"}}' not in text
    assert 'sglang_sentinel_processing_errors_total{stage="metrics"} 3.0' in text
    failed = [e for e in events if e["event"] == "processing_failed"]
    assert [(e["stage"], e["unit"]) for e in failed] == [("metrics", UNIT)]
    d.source.close()
    d.store.close()


def test_a_full_disk_fails_the_commit_and_it_succeeds_once_there_is_room(tmp_path: Path) -> None:
    """ENOSPC on a small tmpfs mounted for the test: CommitFailed while full, then the same
    records stored exactly once with the cursor, as a one-shot pass stores them."""
    scripts = three_startups()
    journal = journal_of(tmp_path, scripts)
    expected = one_shot(tmp_path, journal)
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        state = mnt / "state"
        p = open_pipeline(journal, state)
        p.process(limit=len(scripts[0].entries()))
        p.commit()
        cursor_before = p.store.cursor("test")
        p.process()
        filler = mnt / "filler"
        with filler.open("wb") as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        with pytest.raises(CommitFailed, match="full"):
            # The big record makes sure the commit needs a new page.
            for _ in range(5):
                p.tracker.dirty()  # still pending each time
                p.commit()
        assert p.store.cursor("test") == cursor_before
        filler.unlink()
        p.commit()
        assert outcome(p.store) == expected
        p.source.close()
        p.store.close()
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
