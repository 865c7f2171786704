"""A state database or journal that goes bad under the sentinel: refused or reported, never a
traceback, an endless loop or silent writes to a deleted file."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest
from journaltools import build_journal, ready_startup, write_export
from sentinelproc import free_port, popen_sentinel, stop, wait_until

from sglang_sentinel.cli import main
from sglang_sentinel.errors import JournalError
from sglang_sentinel.sources import JournalSource
from sglang_sentinel.state import DB_NAME

UNIT = "sglang-qwen.service"


def scanned_state(tmp_path: Path) -> tuple[Path, Path]:
    journal = build_journal(
        write_export(ready_startup("2026-03-01 10:00:00", 48).entries(), tmp_path / "x.export"),
        tmp_path / "j",
    )
    state = tmp_path / "state"
    args = ["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--unit", UNIT]
    assert main(args) == 0
    return journal, state


def test_a_zero_length_database_is_a_one_line_error_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / DB_NAME).write_bytes(b"")
    rc = main(["startups", "--state-dir", str(state), "--unit", UNIT])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1
    assert "is empty (zero length or never written)" in err and "sentinel scan" in err


def test_a_page_corrupted_database_is_a_one_line_error_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, state = scanned_state(tmp_path)
    capsys.readouterr()
    db = state / DB_NAME
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) >= 3 * page
    data[page + 8 : 2 * page] = os.urandom(page - 8)  # the second page (a table's b-tree)
    db.write_bytes(bytes(data))
    for argv in (["startups"], ["check"], ["baseline"]):
        rc = main([*argv, "--state-dir", str(state), "--unit", UNIT])
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        assert err.count("\n") == 1, err
        assert f"mv {db} {db}.broken" in err and "sentinel scan" in err


def test_the_daemon_stops_loudly_when_its_database_is_deleted(tmp_path: Path) -> None:
    journal, state = scanned_state(tmp_path)
    err = tmp_path / "run.stderr"
    proc = popen_sentinel(
        [
            "run",
            "--journal-dir",
            str(journal),
            "--state-dir",
            str(state),
            "--unit",
            UNIT,
            "--listen",
            f"127.0.0.1:{free_port()}",
        ],
        err,
    )
    try:
        wait_until(lambda: "sentinel_started" in err.read_text(), 30, "the daemon to start")
        (state / DB_NAME).unlink()
        rc = proc.wait(timeout=30)
    finally:
        stop(proc)
    assert rc == 2
    text = err.read_text()
    assert "was deleted while the sentinel ran" in text


class QuietReader:
    """A libsystemd reader stand-in with nothing to read (the side and probe readers)."""

    data_threshold = 64 * 1024

    def fileno(self) -> int:
        return -1

    def flush_matches(self) -> None:
        pass

    def add_match(self, *args: str, **fields: str) -> None:
        pass

    def add_disjunction(self) -> None:
        pass

    def add_conjunction(self) -> None:
        pass

    def process(self) -> int:
        return 0

    def seek_tail(self) -> None:
        pass

    def _previous(self) -> bool:
        return False

    def _next(self) -> bool:
        return False

    def close(self) -> None:
        pass


class StuckReader(QuietReader):
    """A reader on a corrupt spot that never advances: every sd_journal_next() is EBADMSG."""

    def __init__(self) -> None:
        self.calls = 0

    def _next(self) -> bool:
        self.calls += 1
        raise OSError(errno.EBADMSG, "Bad message")

    def _get(self, field: str) -> bytes:
        raise KeyError(field)

    def _get_realtime(self) -> int:
        return 0

    def test_cursor(self, cursor: str) -> bool:
        return False


def test_an_ebadmsg_that_does_not_advance_is_an_error_not_an_endless_loop(
    tmp_path: Path,
) -> None:
    reader = StuckReader()
    # The unit reader is opened first, then the side and probe readers.
    readers: list[QuietReader] = [reader, QuietReader(), QuietReader()]
    source = JournalSource([UNIT], directory=tmp_path, open_reader=lambda: readers.pop(0))
    source.open()
    with pytest.raises(JournalError, match="corrupt reads in a row without progress"):
        list(source.lines())
    assert reader.calls == 10_000
    assert source.corrupt_reads == 10_000
