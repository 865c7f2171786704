"""The C journal reader (sglang_sentinel/sources/_journalread.c) reads what python-systemd's Reader reads.

Every entry of every journal the repository carries (the demo, the seed fixture, the golden
cases), plus a built one with what the fast path has to get right (a compressed long _CMDLINE, a
compressed long MESSAGE, entries without MESSAGE or without an invocation id, a late line of the
previous invocation between the next one's), is read by both: the same entries in the same
order, the same fields, times and cursors. A scan gives the same output on either path, and
`cursor()` / `monotonic()` answer for the line handed out last while the C reader reads ahead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journaltools import build_journal, ready_startup, write_export
from systemd import journal

from sglang_sentinel.cli import main
from sglang_sentinel.compiled import hot_path
from sglang_sentinel.sources import JournalSource, readers

REPO = Path(__file__).resolve().parents[2]
UNIT = "sglang-qwen.service"
EXPORTS = sorted(
    p.relative_to(REPO).as_posix()
    for p in [*REPO.glob("demo/*.export"), *REPO.glob("tests/**/journal.export")]
)
# A command line past journald's compression threshold (512 bytes), as SGLang's often are.
LONG_CMDLINE = "/opt/sglang/.venv/bin/python3 -m sglang.launch_server " + " ".join(
    f"--flag-{i} value-{i * 7919 % 1000}" for i in range(80)
)
DECODE = (
    "[2026-03-20 {t} TP0] Decode batch, #running-req: 3, #token: 50, token usage: 0.01, "
    "cuda graph: True, gen throughput (token/s): 30.00, #queue-req: 0"
)


def test_the_c_reader_is_built() -> None:
    """The supported install (scripts/bootstrap.sh: gcc, libsystemd-dev) builds the C reader."""
    assert readers._journalread is not None
    assert readers.reader_path() == ("python" if os.environ.get("SENTINEL_READER") else "c")
    c = readers._journalread
    assert (c.RUN_LIMIT, c.RUN_END, c.RUN_CHECK, c.RUN_UNREAD) == (
        readers.RUN_LIMIT,
        readers.RUN_END,
        readers.RUN_CHECK,
        readers.RUN_UNREAD,
    )


def _tricky(tmp_path: Path) -> Path:
    """Two startups with long command lines, A's late lines between B's, lines without an id or
    MESSAGE, and a long (compressed) MESSAGE."""
    a = ready_startup("2026-03-20 10:00:00", 48)
    b = ready_startup("2026-03-20 10:05:00", 26)
    for s in (a, b):
        s.cmdline = LONG_CMDLINE
    b.line(DECODE.format(t="10:05:10"))
    b.line("x" * 3000)  # compressed by journal-remote, past the walk's threshold
    a.at("2026-03-20 10:05:20")
    a.line(DECODE.format(t="10:05:20"))
    b.at("2026-03-20 10:05:30")
    for second in range(31, 40):
        b.line(DECODE.format(t=f"10:05:{second}"))
    entries: list[dict[str, Any]] = sorted(
        a.entries() + b.entries(), key=lambda e: int(str(e["__REALTIME_TIMESTAMP"]))
    )
    no_id = dict(entries[-3])
    del no_id["_SYSTEMD_INVOCATION_ID"]
    no_message = dict(entries[-2])
    del no_message["MESSAGE"]
    entries[-3], entries[-2] = no_id, no_message
    directory = tmp_path / "tricky"
    build_journal(write_export(entries, tmp_path / "tricky.export"), directory)
    return directory


def _journals(tmp_path: Path) -> Iterator[Path]:
    for export in EXPORTS:
        yield build_journal(REPO / export, tmp_path / export.replace("/", "_"))
    yield _tricky(tmp_path)


def _field(reader: Any, name: str) -> bytes | None:
    try:
        value: bytes = reader._get(name)
    except KeyError:
        return None
    return value


# (data threshold, walk threshold): the walk at the caller's threshold, cut short by it, and at a
# threshold of its own below it (a MESSAGE past it is read again whole).
@pytest.mark.parametrize(("threshold", "walk"), [(0, 0), (100, 0), (0, 64)])
def test_both_readers_read_the_same_fields_of_every_entry(
    tmp_path: Path, threshold: int, walk: int
) -> None:
    c_reader = readers._journalread.Reader
    entries = 0
    for directory in _journals(tmp_path):
        py, c = journal.Reader(path=str(directory)), c_reader(path=str(directory))
        py.data_threshold = c.data_threshold = threshold
        c.walk_threshold = walk
        py.seek_head()
        c.seek_head()
        while True:
            more = py._next()
            assert c._next() == more
            if not more:
                break
            entries += 1
            assert c._get_realtime() == py._get_realtime()
            assert tuple(c._get_monotonic()) == tuple(py._get_monotonic())
            assert c._get_cursor() == py._get_cursor()
            assert c.test_cursor(py._get_cursor())
            message, invocation = _field(py, "MESSAGE"), _field(py, "_SYSTEMD_INVOCATION_ID")
            # The one walk read_run reads, at the threshold the caller set.
            assert c.fields() == (message, invocation)
            for name in ("MESSAGE", "_SYSTEMD_INVOCATION_ID", "_SYSTEMD_UNIT", "_CMDLINE", "NONE"):
                assert _field(c, name) == _field(py, name)
        py.close()
        c.close()
    assert entries > 100


def _items(source: JournalSource, read_ahead: bool) -> list[tuple[Any, ...]]:
    """Every item `lines()` hands out, with its time, cursor and monotonic time at that point."""
    source.open(follow=False)
    source.seek_head()
    out = []
    for item in source.lines(read_ahead=read_ahead):
        text = item if isinstance(item, bytes) else (item.unit, item.message, item.invocation_id)
        out.append((text, source.realtime_us(), source.cursor(), source.monotonic()))
    source.close()
    return out


def test_read_ahead_hands_out_the_same_lines_with_their_own_cursor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _tricky(tmp_path)
    c_ahead = _items(JournalSource([UNIT], directory=directory), read_ahead=True)
    c_each = _items(JournalSource([UNIT], directory=directory), read_ahead=False)
    monkeypatch.setenv("SENTINEL_READER", "python")
    py = _items(JournalSource([UNIT], directory=directory), read_ahead=False)
    assert len(py) == 18
    assert c_ahead == py
    assert c_each == py


def test_a_read_ahead_closed_early_leaves_the_cursor_on_the_last_line(tmp_path: Path) -> None:
    directory = _tricky(tmp_path)
    source = JournalSource([UNIT], directory=directory)
    source.open(follow=False)
    source.seek_head()
    lines = source.lines(read_ahead=True)
    cursors = []
    for _ in range(12):
        next(lines)
        cursors.append(source.cursor())
    lines.close()
    assert source.cursor() == cursors[-1]
    # and reading on starts right after it
    rest = list(source.lines(read_ahead=True))
    source.close()
    everything = _items(JournalSource([UNIT], directory=directory), read_ahead=False)
    assert len(rest) == len(everything) - 12


def _scan(directory: Path, unit: str, state: Path, capsys: pytest.CaptureFixture[str]) -> str:
    argv = ["scan", "--journal-dir", str(directory), "--unit", unit, "--state-dir", str(state)]
    assert main([*argv, "--json"]) in (0, 1)
    return capsys.readouterr().out


def test_a_scan_reports_the_same_on_either_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for directory in _journals(tmp_path):
        units = subprocess.run(
            ["journalctl", "--no-pager", "-D", str(directory), "-F", "_SYSTEMD_UNIT"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        unit = sorted(u for u in units if "sglang" in u)[0]
        monkeypatch.delenv("SENTINEL_READER", raising=False)
        c = _scan(directory, unit, tmp_path / f"{directory.name}-c", capsys)
        monkeypatch.setenv("SENTINEL_READER", "python")
        py = _scan(directory, unit, tmp_path / f"{directory.name}-py", capsys)
        assert json.loads(c)["startups"], directory.name
        assert c == py, directory.name


def test_version_names_the_readers() -> None:
    for env, path in (({}, "c"), ({"SENTINEL_READER": "python"}, "python")):
        done = subprocess.run(
            [sys.executable, "-m", "sglang_sentinel.cli", "--version"],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            check=True,
        )
        assert (
            done.stdout == f"sglang-sentinel 0.1.0 (journal reader: {path}, file reader: {path}, "
            f"hot path: {hot_path()})\n"
        )
