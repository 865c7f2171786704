"""Journal files appearing and disappearing under a running daemon (the journal's INVALIDATE)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from journaltools import build_journal, ready_startup, write_export
from sentinelproc import Sentinels, wait_until

UNIT = "sglang-qwen.service"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_new_journal_files_are_picked_up_without_spinning(
    sentinels: Sentinels, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    first = ready_startup("2026-03-01 10:00:00", 48)
    build_journal(write_export(first.entries(), tmp_path / "a.export"), journal, "a")
    sentinel = sentinels.start("--journal-dir", str(journal), state=tmp_path / "state")
    wait_until(
        sentinel.scrape_with(f'sglang_sentinel_max_running_requests{{unit="{UNIT}"}} 48.0'),
        20,
        "the first startup on /metrics",
    )
    # A rotated-in file: the directory gains a journal file while the daemon waits on it.
    second = ready_startup("2026-03-02 10:00:00", 26)
    build_journal(write_export(second.entries(), tmp_path / "b.export"), journal, "b")
    body = wait_until(
        sentinel.scrape_with(f'sglang_sentinel_max_running_requests{{unit="{UNIT}"}} 26.0'),
        20,
        "the second startup from the new file",
    )
    assert f'check="max_running_requests_drop",severity="critical",unit="{UNIT}"}} 1.0' in body
    # The old file is vacuumed away: the daemon keeps its state and does not spin.
    (journal / "a.journal").unlink()
    before = cpu_seconds(sentinel.proc.pid)
    time.sleep(2.0)  # measuring idle CPU over a fixed window, not waiting for an event
    used = cpu_seconds(sentinel.proc.pid) - before
    sentinel.check_alive()
    assert used < 0.2, f"{used:.2f} s of CPU in 2 s idle after a file was removed"
    assert f'sglang_sentinel_max_running_requests{{unit="{UNIT}"}} 26.0' in sentinel.scrape()
