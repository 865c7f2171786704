"""The journal source's two readers (the unit's lines; PID 1's and coredump lines about it) hand
out exactly what one `journalctl -u` reader would, in its order, and resume exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal, ready_startup, seed_fixture_dir, write_export
from systemd import journal

from sglang_sentinel.sources import JournalSource

UNIT = "sglang-qwen.service"
COREDUMP_MESSAGE_ID = "fc2e22bc6ee647b6b90729ab34a250b1"


def coredump(script: StartupScript, when: str) -> dict[str, Any]:
    """systemd-coredump's entry about the unit, stamped like the script's entries."""
    entry = dict(script.entries()[-1])
    for name in list(entry):
        if not name.startswith("__") and name not in ("_BOOT_ID", "_MACHINE_ID", "_HOSTNAME"):
            del entry[name]
    entry.update(
        {
            "MESSAGE": "Process 412281 (python3) of user 0 dumped core.",
            "MESSAGE_ID": COREDUMP_MESSAGE_ID,
            "COREDUMP_UNIT": UNIT,
            "COREDUMP_PID": "412281",
            "_UID": "0",
            "_PID": "4242",
            "_SYSTEMD_UNIT": "systemd-coredump@0-4242-0.service",
            "_TRANSPORT": "journal",
        }
    )
    return entry


def other_unit(script: StartupScript, message: str) -> dict[str, Any]:
    entry = dict(script.entries()[-1])
    entry.update({"MESSAGE": message, "_SYSTEMD_UNIT": "cron.service", "_PID": "702"})
    entry.pop("_SYSTEMD_INVOCATION_ID", None)
    return entry


@pytest.fixture(scope="module")
def merged_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three files: the seed fixture (two startups, PID 1's lines), then two startups of which
    the second crashes with a coredump, with another unit's lines in between."""
    tmp = tmp_path_factory.mktemp("merge")
    out = tmp / "journal"
    build_journal(seed_fixture_dir() / "journal.export", out, "seed")
    later = ready_startup("2026-03-20 10:00:00", 48)
    later.line(
        "[2026-03-20 10:01:00 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.01, cuda graph: True, gen throughput (token/s): 5.00, #queue-req: 0"
    )
    entries = later.entries()
    entries.insert(2, other_unit(later, "(root) CMD (true)"))
    crash = ready_startup("2026-03-21 10:00:00", 26)
    crash.process_exited(139, when="2026-03-21 10:02:00")
    crash.failed("core-dump", when="2026-03-21 10:02:01")
    crash_entries = crash.entries()
    crash_entries.insert(3, coredump(crash, "2026-03-21 10:02:00"))
    crash_entries.append(other_unit(crash, "(root) CMD (date)"))
    build_journal(write_export(entries, tmp / "later.export"), out, "later")
    build_journal(write_export(crash_entries, tmp / "crash.export"), out, "crash")
    return out


def journalctl_order(directory: Path) -> list[str]:
    """The cursors one reader with `journalctl -u`'s disjunction hands out, in its order."""
    reader = journal.Reader(path=str(directory))
    reader.add_match(_SYSTEMD_UNIT=UNIT)
    reader.add_disjunction()
    reader.add_match(_PID="1", UNIT=UNIT)
    reader.add_disjunction()
    reader.add_match(MESSAGE_ID=COREDUMP_MESSAGE_ID, _UID="0", COREDUMP_UNIT=UNIT)
    reader.seek_head()
    cursors: list[str] = []
    while reader._next():
        cursors.append(str(reader._get_cursor()))
    reader.close()
    return cursors


def source_order(source: JournalSource, limit: int | None = None) -> list[str]:
    """The cursors of what `source.lines()` hands out, each read while it is suspended on it."""
    cursors: list[str] = []
    while True:
        before = len(cursors)
        for _ in source.lines(limit):
            cursor = source.cursor()
            assert cursor is not None
            cursors.append(cursor)
        if limit is None or len(cursors) == before:
            return cursors


def opened(directory: Path) -> JournalSource:
    source = JournalSource([UNIT], directory=directory)
    source.open()
    return source


def test_the_merge_is_journalctl_u_in_its_order(merged_journal: Path) -> None:
    expected = journalctl_order(merged_journal)
    source = opened(merged_journal)
    source.seek_head()
    got = source_order(source)
    assert len(expected) > 200  # the seed fixture's lines, PID 1's, the coredump
    assert got == expected
    # What a commit saves once everything is read: the last entry, a PID 1 line here.
    assert not _is_unit_line(merged_journal, expected[-1])
    assert source.cursor() == expected[-1]


def test_reading_in_batches_changes_nothing(merged_journal: Path) -> None:
    expected = journalctl_order(merged_journal)
    for limit in (1, 7):
        source = opened(merged_journal)
        source.seek_head()
        assert source_order(source, limit) == expected
        assert source.cursor() == expected[-1]


def test_resume_after_any_cursor_reads_each_line_once(merged_journal: Path) -> None:
    """Whether the saved cursor is a unit line's, PID 1's or the coredump's: the rest, exactly."""
    expected = journalctl_order(merged_journal)
    side = {
        c for c in expected if not _is_unit_line(merged_journal, c)
    }  # PID 1's and the coredump's
    assert len(side) >= 8
    picks = sorted(set(range(0, len(expected), 37)) | {expected.index(c) for c in side})
    for k in picks:
        source = opened(merged_journal)
        assert source.seek_cursor(expected[k]) is True
        assert source_order(source) == expected[k + 1 :], k
        source.close()


def test_resume_after_a_gone_cursor_continues_after_its_place(merged_journal: Path) -> None:
    expected = journalctl_order(merged_journal)
    k = len(expected) // 2
    # A cursor of an entry that is not in the journal, between entries k and k + 1.
    fields = dict(part.split("=", 1) for part in expected[k].split(";"))
    fields["i"] = format(int(fields["i"], 16), "x")
    fields["x"] = "0" * 16  # no entry has this hash
    gone = ";".join(f"{key}={value}" for key, value in fields.items())
    source = opened(merged_journal)
    assert source.seek_cursor(gone) is False
    rest = source_order(source)
    assert rest == expected[k + 1 :] or rest == expected[k:]


def _is_unit_line(directory: Path, cursor: str) -> bool:
    reader = journal.Reader(path=str(directory))
    reader.seek_cursor(cursor)
    reader._next()
    unit = reader._get("_SYSTEMD_UNIT").decode()
    reader.close()
    return bool(unit == UNIT)
