"""Each line goes to the startup of its own invocation, wherever the journal puts it.

journald writes a stopped process's last buffered lines when it gets to them, which can be after
the next invocation's first lines. The scan reads every line's _SYSTEMD_INVOCATION_ID for this
(`bench.lowerbound` measures what that read costs): a scan that took a line's invocation from its
neighbours, or read a unit's lines invocation by invocation without the entries that carry no id,
would fail here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from journaltools import build_journal, ready_startup, write_export

from sglang_sentinel.cli import main

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
