"""A state directory written by the previous release (schema 2: notes and findings' evidence
stored as sentences) still loads, and every output shows those sentences as that release did."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from sglang_sentinel.cli import main
from sglang_sentinel.evidence import render_evidence
from sglang_sentinel.model import Evidence
from sglang_sentinel.rules import default_rules_dir, load_rules
from sglang_sentinel.rules.matcher import ExactMatcher
from sglang_sentinel.startups import StartupTracker
from sglang_sentinel.state import DB_NAME, StateStore

UNIT = "sglang-qwen.service"
OLD, NEW, OPEN = "a" * 32, "b" * 32, "c" * 32
SKEW = (
    "clock_skew: the wall clock moved +3600 s during this startup (ready 3700 s after the start "
    "by the wall clock, 100 s by the journal's monotonic clock); startup_seconds is the "
    "monotonic time"
)
INVALID = "fact_invalid: tp_size=nan is not a finite number; recorded as null"
FLAGS = "flags added: --enable-foo"
SET_BY_SGLANG = (
    "server_args prefill_cp_mode: unset → x (field added); not on the command line: set by SGLang"
)


def _old_record(invocation: str, started: float, mrr: int, notes: list[str]) -> str:
    """A record row exactly as the previous release's state.record_to_json wrote it."""
    facts: dict[str, object] = {"max_running_requests": mrr, "tp_size": None}
    return json.dumps(
        {
            "unit": UNIT,
            "invocation_id": invocation,
            "started_at": started,
            "ready_at": started + 100.0,
            "ended_at": None,
            "outcome": "ready",
            "failure_reason": None,
            "facts": facts,
            "launch_flags": ["--model-path /m"],
            "server_args": {},
            "rule_hits": {},
            "runtime": {},
            "decode": {},
            "notes": notes,
        },
        sort_keys=True,
    )


def _old_builder(invocation: str, started: float) -> str:
    """An open startup's builder as the previous release persisted it (clock notes as text)."""
    return json.dumps(
        {
            "unit": UNIT,
            "invocation_id": invocation,
            "started_at": started,
            "ready_at": None,
            "ended_at": None,
            "failure_reason": None,
            "exit_status": None,
            "facts": {},
            "primary": [],
            "rule_hits": {},
            "server_args": {},
            "server_args_pending": None,
            "flags": [],
            "runtime": {},
            "has_server_args_line": False,
            "decode": None,
            "start_mono": None,
            "ready_mono": None,
            "clock_notes": [SKEW],
        },
        sort_keys=True,
    )


@pytest.fixture
def old_state(tmp_path: Path) -> Path:
    """A state directory whose rows the previous release wrote (schema 2, text evidence)."""
    state = tmp_path / "state"
    StateStore(state).close()
    db = sqlite3.connect(state / DB_NAME)
    # Back to the previous release's schema: version 2, with its comparisons table.
    db.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    db.execute(
        "CREATE TABLE comparisons (invocation_id TEXT PRIMARY KEY REFERENCES startups"
        " (invocation_id), baseline_id TEXT, baseline_kind TEXT, findings TEXT NOT NULL)"
    )
    rows = [
        (OLD, 1_700_000_000.0, _old_record(OLD, 1_700_000_000.0, 48, []), None, 1),
        (NEW, 1_700_100_000.0, _old_record(NEW, 1_700_100_000.0, 26, [INVALID, SKEW]), None, 2),
    ]
    for inv, started, rec, builder, seq in rows:
        db.execute(
            "INSERT INTO startups (invocation_id, unit, started_at, outcome, record, builder,"
            " updated_at, seq) VALUES (?, ?, ?, 'ready', ?, ?, ?, ?)",
            (inv, UNIT, started, rec, builder, started, seq),
        )
    old_finding = {
        "check": "max_running_requests_drop",
        "severity": "critical",
        "baseline": 48,
        "current": 26,
        "message": "max_running_requests 48 → 26 (−46 %)",
        "evidence": [FLAGS, SET_BY_SGLANG],
    }
    db.execute(
        "INSERT INTO comparisons VALUES (?, ?, 'previous', ?)",
        (NEW, OLD, json.dumps([old_finding])),
    )
    db.commit()
    db.close()
    return state


def test_old_text_notes_load_as_notes_that_read_the_same(old_state: Path) -> None:
    store = StateStore(old_state)  # upgrades the schema (the old findings table goes)
    try:
        record = store.startup(NEW)
    finally:
        store.close()
    assert record is not None
    assert record.notes == (Evidence("note", detail=INVALID), Evidence("note", detail=SKEW))
    assert [render_evidence(n) for n in record.notes] == [INVALID, SKEW]


def test_the_json_contract_of_an_old_state_keeps_its_note_sentences(
    old_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["check", "--state-dir", str(old_state), "--unit", UNIT, "--json"])
    out, err = capsys.readouterr()
    assert code == 1, err  # the drop, judged again from the old records
    [startup] = json.loads(out)["startups"]
    assert startup["notes"] == [INVALID, SKEW]
    assert [f["check"] for f in startup["findings"]] == ["max_running_requests_drop"]


def test_an_open_startup_saved_by_the_old_release_resumes_with_its_clock_note() -> None:
    tracker = StartupTracker(ExactMatcher(load_rules([default_rules_dir()])))
    tracker.restore([_old_builder(OPEN, 1_700_200_000.0)])
    [(record, saved)] = [tracker.saved_form(OPEN)]
    assert [render_evidence(n) for n in record.notes] == [SKEW]
    # Saved again in the new form, it reads back the same.
    assert json.loads(saved)["clock_notes"] == [{"kind": "note", "detail": SKEW}]
    again = StartupTracker(ExactMatcher(load_rules([default_rules_dir()])))
    again.restore([saved])
    assert again.saved_form(OPEN)[0].notes == record.notes
