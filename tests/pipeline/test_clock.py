"""Wrong wall clocks: the journal's order decides the latest startup and the baseline, the
monotonic clock measures durations, and the startup is flagged with the evidence."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal, write_export

from sglang_sentinel.cli import main
from sglang_sentinel.model import StartupRecord
from sglang_sentinel.state import DB_NAME, StateStore
from sglang_sentinel.state.codec import record_to_json
from sglang_sentinel.state.store import SCHEMA_VERSION

UNIT = "sglang-clock.service"


def startup(start: str, mrr: int, boot_id: str, boot_at: str) -> StartupScript:
    s = StartupScript(unit=UNIT, start=start, boot_at=boot_at, boot_id=boot_id)
    s.started(start)
    day = start[:10]
    hour = start[11:13]
    s.line(
        f"[{day} {hour}:00:50 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=4096, "
        "available_gpu_mem=10.00 GB"
    )
    s.line(f"[{day} {hour}:00:55] The server is fired up and ready to roll!")
    return s


BOOT_A = "a" * 32
BOOT_B = "b" * 32


def scan(tmp_path: Path, entries: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> Any:
    journal = build_journal(write_export(entries, tmp_path / "x.export"), tmp_path / "j")
    state = tmp_path / "state"
    argv = ["--journal-dir", str(journal), "--state-dir", str(state), "--unit", UNIT]
    assert main(["scan", "--json", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    return doc, state


def check(state: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    rc = main(["check", "--json", "--state-dir", str(state), "--unit", UNIT])
    return rc, json.loads(capsys.readouterr().out)


def test_a_boot_with_its_clock_in_the_future_does_not_hide_the_next_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Boot A's clock says 2030; boot B (correct, later in the journal) drops 48 -> 20."""
    a = startup("2030-06-01 10:00:00", 48, BOOT_A, "2030-06-01 09:00:00")
    b = startup("2026-03-02 10:00:00", 20, BOOT_B, "2026-03-02 09:00:00")
    doc, state = scan(tmp_path, a.entries() + b.entries(), capsys)
    second = {s["invocation_id"]: s for s in doc["startups"]}[b.invocation_id]
    assert [f["check"] for f in second["findings"]] == ["max_running_requests_drop"]
    assert any(n.startswith("clock_skew: started") for n in second["notes"])
    rc, result = check(state, capsys)
    assert rc == 1
    [latest] = result["startups"]
    assert latest["invocation_id"] == b.invocation_id
    assert latest["facts"]["max_running_requests"] == 20
    store = StateStore(state, readonly=True)
    latest_record = store.latest(UNIT)
    assert latest_record is not None and latest_record.invocation_id == b.invocation_id


def test_a_startup_recorded_with_its_clock_in_the_past_gets_its_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = startup("2026-03-01 10:00:00", 48, BOOT_A, "2026-03-01 09:00:00")
    b = startup("2020-01-01 10:00:00", 20, BOOT_B, "2020-01-01 09:00:00")
    doc, state = scan(tmp_path, a.entries() + b.entries(), capsys)
    by_id = {s["invocation_id"]: s for s in doc["startups"]}
    assert by_id[b.invocation_id]["baseline"]["invocation_id"] == a.invocation_id
    assert [f["check"] for f in by_id[b.invocation_id]["findings"]] == ["max_running_requests_drop"]
    rc, _ = check(state, capsys)
    assert rc == 1


def test_a_clock_stepped_back_during_a_startup_gives_the_monotonic_duration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = startup("2026-03-01 10:00:00", 48, BOOT_A, "2026-03-01 09:00:00")
    entries = s.entries()
    ready = entries[-1]
    assert b"fired up" in str(ready["MESSAGE"]).encode()
    start_us = int(entries[0]["__REALTIME_TIMESTAMP"])
    mono_start = int(entries[0]["__MONOTONIC_TIMESTAMP"])
    ready["__REALTIME_TIMESTAMP"] = str(start_us - 600_000_000)  # the clock went back 10 min
    doc, state = scan(tmp_path, entries, capsys)
    [rec] = doc["startups"]
    mono_s = (int(ready["__MONOTONIC_TIMESTAMP"]) - mono_start) / 1e6
    # The report and the status page say the same, never the wall clock's -10 min.
    assert main(["report", "--state-dir", str(state), "--unit", UNIT]) == 0
    assert main(["report", "--html", "-", "--state-dir", str(state), "--unit", UNIT]) == 0
    shown = capsys.readouterr().out
    assert shown.count("ready in 55s") == 2, shown
    assert rec["facts"]["startup_seconds"] == round(mono_s, 3)
    assert rec["facts"]["startup_seconds"] > 0
    [note] = [n for n in rec["notes"] if n.startswith("clock_skew")]
    assert "the wall clock moved" in note and "monotonic" in note


V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE startups (invocation_id TEXT PRIMARY KEY, unit TEXT NOT NULL,
    started_at REAL NOT NULL, outcome TEXT NOT NULL, record TEXT NOT NULL, builder TEXT,
    updated_at REAL NOT NULL);
CREATE INDEX startups_unit_time ON startups (unit, started_at);
CREATE TABLE comparisons (invocation_id TEXT PRIMARY KEY REFERENCES startups (invocation_id),
    baseline_id TEXT, baseline_kind TEXT, findings TEXT NOT NULL);
CREATE TABLE baselines (unit TEXT PRIMARY KEY,
    invocation_id TEXT NOT NULL REFERENCES startups (invocation_id), pinned_at REAL NOT NULL);
CREATE TABLE cursors (source TEXT PRIMARY KEY, cursor TEXT NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO meta VALUES ('schema_version', '1');
"""


def v1_state(tmp_path: Path) -> Path:
    state = tmp_path / "v1"
    state.mkdir()
    db = sqlite3.connect(state / DB_NAME)
    db.executescript(V1_SCHEMA)
    for inv, t, outcome, mrr in (
        ("1" * 32, 100.0, "ready", 48),
        ("2" * 32, 200.0, "failed", None),
        ("3" * 32, 300.0, "ready", 20),
    ):
        record = StartupRecord(
            unit=UNIT,
            invocation_id=inv,
            started_at=t,
            ready_at=t + 1 if outcome == "ready" else None,
            outcome=outcome,  # type: ignore[arg-type]
            facts={"max_running_requests": mrr},
        )
        db.execute(
            "INSERT INTO startups VALUES (?, ?, ?, ?, ?, NULL, 0)",
            (inv, UNIT, t, outcome, record_to_json(record)),
        )
    db.commit()
    db.close()
    return state


@pytest.mark.parametrize("readonly", [False, True])
def test_a_version_1_state_is_upgraded_in_place(tmp_path: Path, readonly: bool) -> None:
    state = v1_state(tmp_path)
    store = StateStore(state, readonly=readonly)
    assert [r.invocation_id[0] for r in store.startups([UNIT])] == ["1", "2", "3"]
    latest = store.latest(UNIT)
    assert latest is not None and latest.invocation_id == "3" * 32
    assert store.outcome_counts(UNIT) == {"ready": 2, "failed": 1}
    prev = store.previous_ready(latest)
    assert prev is not None and prev.invocation_id == "1" * 32
    db = sqlite3.connect(state / DB_NAME)
    assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    assert db.execute("SELECT name FROM sqlite_master WHERE name='comparisons'").fetchall() == []
    assert db.execute("SELECT seq FROM startups ORDER BY seq").fetchall() == [(1,), (2,), (3,)]
    store.close()
    again = StateStore(state)  # opening an upgraded state again changes nothing
    assert again.outcome_counts(UNIT) == {"ready": 2, "failed": 1}


def test_startups_total_never_goes_down_when_an_outcome_flips(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s")
    failed = StartupRecord(UNIT, "f" * 32, 1.0, None, "failed", {}, failure_reason="x")
    with store.transaction():
        store.save_startup(failed, None)
    assert store.outcome_counts(UNIT) == {"ready": 0, "failed": 1}
    ready = StartupRecord(UNIT, "f" * 32, 1.0, 2.0, "ready", {})
    with store.transaction():
        store.save_startup(ready, None)
        store.save_startup(ready, None)
    assert store.outcome_counts(UNIT) == {"ready": 0, "failed": 1}
    other = StartupRecord(UNIT, "e" * 32, 3.0, 4.0, "ready", {})
    with store.transaction():
        store.save_startup(other, None)
    assert store.outcome_counts(UNIT) == {"ready": 1, "failed": 1}
