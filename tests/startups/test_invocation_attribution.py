"""Each line goes to the startup of its own invocation, wherever the journal puts it.

journald writes a stopped process's last buffered lines when it gets to them, which can be after
the next invocation's first lines. The scan reads every line's _SYSTEMD_INVOCATION_ID for this
(`bench.lowerbound` measures what that read costs): a scan that took a line's invocation from its
neighbours, or read a unit's lines invocation by invocation without the entries that carry no id,
would fail here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from journaltools import build_journal, ready_startup, write_export
from structlog.testing import capture_logs

from sglang_sentinel.cli import main
from sglang_sentinel.compare import load_policy
from sglang_sentinel.pipeline import Pipeline
from sglang_sentinel.rules import default_rules_dir, load_rules
from sglang_sentinel.sources import JournalSource
from sglang_sentinel.state import StateStore

UNIT = "sglang-qwen.service"

DECODE = (
    "[2026-03-20 {time} TP0] Decode batch, #running-req: {running}, #token: 50, token usage: 0.01, "
    "cuda graph: True, gen throughput (token/s): 30.00, #queue-req: 0"
)
KV_LINE = "[2026-03-20 10:04:58 TP0] KV Cache is allocated. #tokens: 1000, K size: 7.25 GB, V size: 7.25 GB"


def _scan(capsys: pytest.CaptureFixture[str], journal: Path, state: Path) -> list[dict[str, Any]]:
    code = main(["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    startups: list[dict[str, Any]] = json.loads(out)["startups"]
    return startups


def _journal(tmp_path: Path, late: list[str]) -> tuple[Path, str, str]:
    """Startup A, then startup B with a decode line, then A's `late` lines (journal order by
    time); returns the journal and the two invocation ids."""
    a = ready_startup("2026-03-20 10:00:00", 48)
    b = ready_startup("2026-03-20 10:05:00", 26)
    b.line(DECODE.format(time="10:05:10", running=3))
    a.at("2026-03-20 10:05:20")
    for message in late:
        a.line(message)
    b.at("2026-03-20 10:05:30")
    b.line(DECODE.format(time="10:05:30", running=3))
    entries = sorted(a.entries() + b.entries(), key=lambda e: int(str(e["__REALTIME_TIMESTAMP"])))
    # The late lines sit between B's lines, not at the end of the journal.
    order = [str(e.get("_SYSTEMD_INVOCATION_ID", "")) for e in entries]
    assert order[-1] == b.invocation_id and a.invocation_id in order[order.index(b.invocation_id) :]
    export = write_export(entries, tmp_path / "late.export")
    journal = tmp_path / "journal"
    build_journal(export, journal)
    return journal, a.invocation_id, b.invocation_id


def test_a_late_line_of_the_previous_invocation_stays_with_its_startup(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    journal, inv_a, inv_b = _journal(tmp_path, [DECODE.format(time="10:04:59", running=1), KV_LINE])
    by_id = {s["invocation_id"]: s for s in _scan(capsys, journal, tmp_path / "state")}
    assert set(by_id) == {inv_a, inv_b}
    a, b = by_id[inv_a], by_id[inv_b]
    assert a["facts"]["max_running_requests"] == 48
    assert b["facts"]["max_running_requests"] == 26
    # A's late decode line is A's; B has its own two.
    assert a["runtime"]["decode_lines"] == 1
    assert b["runtime"]["decode_lines"] == 2
    # A's late startup fact is A's, and B never saw one.
    assert a["facts"]["kv_cache_tokens"] == 1000
    assert b["facts"]["kv_cache_tokens"] is None


def test_a_line_without_an_invocation_id_is_read_with_its_unit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A unit line that carries no id (a journal merged from an older host, a process whose
    cgroup id journald could not read) goes to the unit's current startup: it is not lost."""
    b = ready_startup("2026-03-20 10:05:00", 26)
    b.line(DECODE.format(time="10:05:10", running=3))
    b.line(KV_LINE.replace("10:04:58", "10:05:11"))
    b.line(DECODE.format(time="10:05:12", running=3))
    entries = b.entries()
    no_id = [e for e in entries if "KV Cache" in str(e.get("MESSAGE"))]
    assert len(no_id) == 1
    del no_id[0]["_SYSTEMD_INVOCATION_ID"]
    journal = tmp_path / "journal"
    build_journal(write_export(entries, tmp_path / "no-id.export"), journal)
    (startup,) = _scan(capsys, journal, tmp_path / "state")
    assert startup["invocation_id"] == b.invocation_id
    assert startup["facts"]["kv_cache_tokens"] == 1000
    assert startup["runtime"]["decode_lines"] == 2


# --- the same, however the reading is cut into commits, and across a restart -------------------


def _pipeline(journal: Path, state: Path, key: str = "test") -> Pipeline:
    source = JournalSource([UNIT], directory=journal)
    source.open(follow=False)
    return Pipeline(
        source,
        load_rules([default_rules_dir()]),
        load_policy(None),
        StateStore(state),
        source_key=key,
    )


def _records(state: Path) -> dict[str, tuple[Any, ...]]:
    """What a startup's record says, by invocation id."""
    store = StateStore(state, readonly=True)
    return {
        r.invocation_id: (
            dict(r.facts),
            r.outcome,
            r.ready_at,
            r.ended_at,
            r.rule_hits.get("decode_batch", 0),
        )
        for r in store.startups()
    }


def _read(pipeline: Pipeline, limit: int | None) -> None:
    while True:
        n = pipeline.process(limit=limit)
        pipeline.commit(force=True, final=n == 0)
        if n == 0:
            return


@pytest.mark.parametrize("limit", [1, 2, 3, 5])
def test_late_lines_do_not_depend_on_when_the_state_is_committed(
    tmp_path: Path, limit: int
) -> None:
    """A commit forgets the finished startups; the one before the newest stays open, so a late
    line of it is A's whether or not a commit came between (it used to open a new, empty
    startup A, overwriting A's stored record, and end B)."""
    journal, inv_a, inv_b = _journal(tmp_path, [DECODE.format(time="10:04:59", running=1), KV_LINE])
    one = _pipeline(journal, tmp_path / "one-pass")
    one.source.seek_head()
    _read(one, None)
    stepped = _pipeline(journal, tmp_path / "stepped")
    stepped.source.seek_head()
    _read(stepped, limit)
    expected = _records(tmp_path / "one-pass")
    assert expected[inv_a][0]["kv_cache_tokens"] == 1000
    assert expected[inv_a][0]["max_running_requests"] == 48
    assert expected[inv_b][3] is None  # B never ended
    assert _records(tmp_path / "stepped") == expected
    assert stepped.stats.late_lines_dropped == 0


def test_a_late_line_after_a_restart_is_still_its_startups(tmp_path: Path) -> None:
    """The daemon stops after B's first lines and resumes from its cursor: the one before the
    newest startup is restored open too."""
    journal, _, _ = _journal(tmp_path, [DECODE.format(time="10:04:59", running=1), KV_LINE])
    one = _pipeline(journal, tmp_path / "one-pass")
    one.source.seek_head()
    _read(one, None)
    first = _pipeline(journal, tmp_path / "restarted")
    first.resume(from_boot_start=False)
    # Up to B's first decode line: A's started, summary and ready lines, then B's (the two
    # PID 1 lines come from the side reader and count too).
    read = 0
    while read < 7:
        read += first.process(limit=1)
        first.commit(force=True)
    first.source.close()
    second = _pipeline(journal, tmp_path / "restarted")
    second.resume(from_boot_start=False)
    _read(second, None)
    assert _records(tmp_path / "restarted") == _records(tmp_path / "one-pass")


def test_a_line_two_startups_back_is_dropped_and_its_record_kept(tmp_path: Path) -> None:
    """A's line after C started: A is closed (however the reading was committed), so the line
    is dropped, counted, and logged once; A's and the others' records are as without it."""
    a = ready_startup("2026-03-20 10:00:00", 48)
    b = ready_startup("2026-03-20 10:05:00", 26)
    c = ready_startup("2026-03-20 10:10:00", 30)
    a.at("2026-03-20 10:11:00")
    a.line(DECODE.format(time="10:04:59", running=1))
    a.line(KV_LINE)
    c.at("2026-03-20 10:12:00")
    c.line(DECODE.format(time="10:12:00", running=3))
    entries = sorted(
        a.entries() + b.entries() + c.entries(), key=lambda e: int(str(e["__REALTIME_TIMESTAMP"]))
    )
    journal = tmp_path / "journal"
    build_journal(write_export(entries, tmp_path / "late.export"), journal)
    results = []
    for limit in (None, 1):
        pipeline = _pipeline(journal, tmp_path / f"state-{limit}")
        pipeline.source.seek_head()
        with capture_logs() as logs:
            _read(pipeline, limit)
        assert pipeline.stats.late_lines_dropped == 2  # the decode line and the KV line
        # Logged once for the startup, not once a line.
        dropped = [e for e in logs if e["event"] == "late_line_dropped"]
        assert [e["invocation"] for e in dropped] == [a.invocation_id[:8]]
        results.append(_records(tmp_path / f"state-{limit}"))
    assert results[0] == results[1]
    records = results[0]
    assert set(records) == {a.invocation_id, b.invocation_id, c.invocation_id}
    assert records[a.invocation_id][0]["max_running_requests"] == 48
    assert records[a.invocation_id][0]["kv_cache_tokens"] is None
    assert records[a.invocation_id][1] == "ready"
    assert records[b.invocation_id][1] == "ready"
    assert records[c.invocation_id][3] is None  # C never ended
    assert records[c.invocation_id][4] == 1


def test_reading_again_does_not_overwrite_a_closed_startup_with_its_last_lines(
    tmp_path: Path,
) -> None:
    """The configuration's targets change (a new source key: no cursor for it) and
    `max_replay_age_seconds` starts the reading in the middle of startup A, stored complete and
    closed: the lines read again leave A's record as it was (they used to re-derive A from its
    last lines only: no summary, no ready)."""
    a = ready_startup("2026-03-20 10:00:00", 48)
    b = ready_startup("2026-03-20 10:05:00", 26)
    c = ready_startup("2026-03-20 10:10:00", 30)
    entries = a.entries() + b.entries() + c.entries()
    journal = tmp_path / "journal"
    build_journal(write_export(entries, tmp_path / "three.export"), journal)
    state = tmp_path / "state"
    first = _pipeline(journal, state)
    first.resume(from_boot_start=False)
    _read(first, None)
    first.source.close()
    before = _records(state)
    assert before[a.invocation_id][0]["max_running_requests"] == 48
    assert before[a.invocation_id][1] == "ready"
    # Read again from between A's summary line and its ready line.
    summary_at = int(str(a.entries()[1]["__REALTIME_TIMESTAMP"])) / 1e6
    again = _pipeline(journal, state, key="test+container")
    again.resume(from_boot_start=False, max_age_seconds=time.time() - summary_at - 1)
    _read(again, None)
    assert again.stats.entries_read > 0
    assert _records(state) == before
    assert again.stats.late_lines_dropped == 0  # read again, not late
