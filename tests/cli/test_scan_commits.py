"""A scan stores its startups without comparing them, compares each once at the end, and commits
only to let ended startups go: how often it commits changes nothing it reports or stores."""

from __future__ import annotations

import dataclasses
import sqlite3
import weakref
from pathlib import Path
from typing import Any

import pytest
from journaltools import build_journal, ready_startup, write_export

from sglang_sentinel import cli, pipeline
from sglang_sentinel.cli import main
from sglang_sentinel.compare.findings import compare
from sglang_sentinel.model import Comparison
from sglang_sentinel.state import DB_NAME

UNIT = "sglang-qwen.service"
DECODE = (
    "[2026-03-20 {t} TP0] Decode batch, #running-req: 3, #token: 50, token usage: 0.01, "
    "cuda graph: True, gen throughput (token/s): 30.00, #queue-req: 0"
)


def _journal(tmp_path: Path) -> Path:
    """Six startups of one unit, each with decode lines; a late line of each startup after the
    next one's first lines, and one of a startup two back (dropped)."""
    scripts = []
    for n in range(6):
        s = ready_startup(f"2026-03-20 1{n}:00:00", 40 + n)
        for second in range(10, 20):
            s.line(DECODE.format(t=f"1{n}:01:{second}"))
        scripts.append(s)
    for n in range(1, 6):
        scripts[n - 1].at(f"2026-03-20 1{n}:00:30").line(DECODE.format(t=f"1{n}:00:30"))
    scripts[0].at("2026-03-20 12:30:00").line(DECODE.format(t="12:30:00"))  # two back: dropped
    entries = sorted(
        (e for s in scripts for e in s.entries()), key=lambda e: int(str(e["__REALTIME_TIMESTAMP"]))
    )
    directory = tmp_path / "journal"
    build_journal(write_export(entries, tmp_path / "six.export"), directory)
    return directory


def _scan(journal: Path, state: Path, capsys: pytest.CaptureFixture[str]) -> str:
    argv = ["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--json"]
    assert main(argv) == 0
    return capsys.readouterr().out


def _stored(state: Path) -> list[tuple[Any, ...]]:
    """The startups as stored, without the time they were written."""
    db = sqlite3.connect(state / DB_NAME)
    try:
        columns = [r[1] for r in db.execute("PRAGMA table_info(startups)") if r[1] != "updated_at"]
        stored = db.execute(f"SELECT {', '.join(columns)} FROM startups ORDER BY rowid").fetchall()
        cursors = db.execute("SELECT source, cursor FROM cursors").fetchall()
        return [*stored, *cursors]
    finally:
        db.close()


def test_a_scan_compares_each_startup_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compared: list[str] = []

    def counting(record: Any, *args: Any) -> Any:
        compared.append(record.invocation_id)
        return compare(record, *args)

    monkeypatch.setattr("sglang_sentinel.compare.status.compare", counting)
    _scan(_journal(tmp_path), tmp_path / "state", capsys)
    assert len(compared) == 6
    assert len(set(compared)) == 6


def test_how_often_a_scan_commits_changes_nothing_it_reports_or_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    journal = _journal(tmp_path)
    once = _scan(journal, tmp_path / "once", capsys)
    commits = []
    real_commit = pipeline.Pipeline.commit

    def counting(self: pipeline.Pipeline, **kw: Any) -> Any:
        commits.append(self.tracker.ended_held)
        return real_commit(self, **kw)

    monkeypatch.setattr(pipeline.Pipeline, "commit", counting)
    # Read 7 entries at a time, commit as soon as one ended startup is held.
    monkeypatch.setattr(cli, "SCAN_CHUNK", 7)
    monkeypatch.setattr(cli, "SCAN_ENDED_HELD", 1)
    often = _scan(journal, tmp_path / "often", capsys)
    assert often == once
    assert _stored(tmp_path / "often") == _stored(tmp_path / "once")
    # one commit for each of the four startups that ended two back, and the last
    assert len(commits) == 5
    assert commits[:-1] == [1, 1, 1, 1]


def test_a_scan_commits_once_when_it_holds_few_ended_startups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    commits = []
    real_commit = pipeline.Pipeline.commit

    def counting(self: pipeline.Pipeline, **kw: Any) -> Any:
        commits.append(kw)
        return real_commit(self, **kw)

    monkeypatch.setattr(pipeline.Pipeline, "commit", counting)
    monkeypatch.setattr(cli, "SCAN_CHUNK", 7)
    _scan(_journal(tmp_path), tmp_path / "state", capsys)
    assert commits == [{"final": True}]


def test_a_scan_lets_each_comparison_go_once_rendered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A comparison holds two startups' records, decode samples and all: the scan keeps its
    output, not every comparison (its memory does not grow with the startups it reports)."""
    journal = _journal(tmp_path)
    expected = _scan(journal, tmp_path / "plain", capsys)

    class Watched(Comparison):  # a subclass without __slots__ can be weakly referenced
        pass

    alive: list[int] = []
    refs: list[weakref.ref[Comparison]] = []
    real_evaluate = cli.evaluate  # type: ignore[attr-defined]

    def watched(*args: Any, **kw: Any) -> Comparison:
        alive.append(sum(r() is not None for r in refs))
        c = real_evaluate(*args, **kw)
        w = Watched(**{f.name: getattr(c, f.name) for f in dataclasses.fields(c)})
        refs.append(weakref.ref(w))
        return w

    monkeypatch.setattr(cli, "evaluate", watched)
    assert _scan(journal, tmp_path / "watched", capsys) == expected
    assert alive == [0, 0, 0, 0, 0, 0]
