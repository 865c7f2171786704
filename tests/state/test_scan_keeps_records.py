"""A scan never weakens a stored startup (issue 20, item 1), on real journal files.

The attack: startup X is ready (max_running_requests 48) and decodes for 30 minutes; a full scan
records it and X is pinned. Then a scan starts inside X's decode lines (`--since`, or a plain
scan after a vacuum removed X's first minutes): it used to rewrite X as `starting`, facts null,
started 20 minutes later, so the next startup at 26 (-46 %) had nothing to be compared with and
`check` passed it, while `startups_total{outcome="ready"}` counted 3 startups for 2.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest
from journaltools import StartupScript, build_journal, write_export

from sglang_sentinel.cli import main
from sglang_sentinel.state import DB_NAME, StateStore

UNIT = "sglang-qwen.service"
X, Y = "a1" * 16, "b2" * 16
DAY = "2026-03-10"


def startup_x() -> StartupScript:
    """Ready at 10:00:55 with max_running_requests 48, then a decode line a minute to 10:30."""
    s = StartupScript(invocation_id=X, start=f"{DAY} 10:00:00", boot_at=f"{DAY} 08:00:00")
    s.started(f"{DAY} 10:00:00")
    s.line(
        f"[{DAY} 10:00:50 TP0] max_total_num_tokens=507050, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=48, context_len=262144, "
        "available_gpu_mem=10.00 GB"
    )
    s.line(f"[{DAY} 10:00:55] The server is fired up and ready to roll!")
    for minute in range(1, 31):
        s.line(
            f"[{DAY} 10:{minute:02d}:00 TP0] Decode batch, #running-req: 3, #full token: 13520, "
            "full token usage: 0.03, cuda graph: True, gen throughput (token/s): 156.84, "
            "#queue-req: 0"
        )
    return s


def startup_y() -> StartupScript:
    """The next start of the unit, 46 % less capacity."""
    s = StartupScript(invocation_id=Y, start=f"{DAY} 11:00:00", boot_at=f"{DAY} 08:00:00")
    s.started(f"{DAY} 11:00:00")
    s.line(
        f"[{DAY} 11:00:50 TP0] max_total_num_tokens=277552, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=26, context_len=262144, "
        "available_gpu_mem=10.00 GB"
    )
    s.line(f"[{DAY} 11:00:55] The server is fired up and ready to roll!")
    return s


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--since` reads local time; the journal's times are UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, _ = capsys.readouterr()
    return code, out


def stored_x(state: Path) -> tuple[str, float, object]:
    store = StateStore(state, readonly=True)
    try:
        record = store.startup(X)
    finally:
        store.close()
    assert record is not None
    return record.outcome, record.started_at, record.facts["max_running_requests"]


def ready_count(state: Path) -> int:
    db = sqlite3.connect(state / DB_NAME)
    try:
        row = db.execute(
            "SELECT value FROM counters WHERE name=?", (f"startups_total:ready:{UNIT}",)
        ).fetchone()
    finally:
        db.close()
    return int(row[0])


@pytest.mark.parametrize("how", ["since", "vacuum"])
def test_a_scan_from_inside_a_pinned_startup_keeps_it_and_check_fails_the_drop(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str
) -> None:
    """`scan --since` inside X's decode lines, or a plain scan after a vacuum removed X's first
    lines, keeps the pinned X as it was; the next startup's 48 -> 26 fails `check`."""
    state = str(tmp_path / "state")
    x = startup_x().write(tmp_path / "x.export")
    whole = build_journal([x], tmp_path / "whole")
    assert run(capsys, "scan", "--journal-dir", str(whole), "--state-dir", state)[0] == 0
    assert run(capsys, "baseline", "--pin", "--unit", UNIT, "--state-dir", state)[0] == 0
    before = stored_x(Path(state))
    assert before == ("ready", 1773136800.0, 48)

    y = startup_y().write(tmp_path / "y.export")
    if how == "since":
        later = build_journal([x, y], tmp_path / "later")
        scan = ["scan", "--journal-dir", str(later), "--since", f"{DAY} 10:20:00"]
    else:
        # The vacuum took X's first 20 minutes: its start, summary and ready lines are gone.
        cut = 1773138000 * 1_000_000  # 10:20:00
        tail = [e for e in startup_x().entries() if int(str(e["__REALTIME_TIMESTAMP"])) >= cut]
        assert len(tail) == 11
        kept = write_export(tail, tmp_path / "x-tail.export")
        later = build_journal([kept, y], tmp_path / "later")
        scan = ["scan", "--journal-dir", str(later)]
    code, out = run(capsys, *scan, "--state-dir", state, "--json")
    assert code == 0
    doc = json.loads(out)
    x_doc = next(s for s in doc["startups"] if s["invocation_id"] == X)
    assert (x_doc["outcome"], x_doc["facts"]["max_running_requests"]) == ("ready", 48)

    assert stored_x(Path(state)) == before
    code, out = run(capsys, "check", "--unit", UNIT, "--state-dir", state, "--json")
    assert code == 1
    [latest] = json.loads(out)["startups"]
    assert latest["invocation_id"] == Y
    assert latest["baseline"] == {"invocation_id": X, "kind": "pinned"}
    mrr = next(f for f in latest["findings"] if f["check"] == "max_running_requests_drop")
    assert (mrr["severity"], mrr["baseline"], mrr["current"]) == ("critical", 48, 26)
    # Two startups were ready, each counted once, however often they were read.
    assert ready_count(Path(state)) == 2
    assert run(capsys, "scan", "--journal-dir", str(whole), "--state-dir", state)[0] == 0
    assert ready_count(Path(state)) == 2
    assert stored_x(Path(state)) == before
