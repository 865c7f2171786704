"""The daemon through faults while following a live journal: a held SQLite lock, a full disk
(ENOSPC on a small tmpfs), each followed by recovery, and a SIGKILL in the middle of the fault.
Every startup is recorded exactly once and the findings equal a one-shot scan's.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import journaltools
import pytest
import standin_sglang
from sentinelproc import Sentinel, Sentinels, cli_stdout, wait_until
from test_faults import LockHolder

UNIT = journaltools.unique_unit("sglang-faultsuite")
SEED_1 = "1" * 32
SEED_2 = "2" * 32
SEED_3 = "3" * 32


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    s = Sentinels(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs mounted for the test and unmounted after."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def fill(disk: Path) -> Path:
    """Fill the disk. The state (its WAL grows to 4 MiB before a checkpoint) may have filled the
    2 MiB already, so that not even the filler can be created: that is a full disk too."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


def stored(state: Path) -> dict[str, tuple[str, int]]:
    """invocation -> (outcome, rows) straight from SQLite."""
    db = sqlite3.connect(f"file:{state / 'sentinel.sqlite3'}?mode=ro", uri=True, timeout=10)
    try:
        rows = db.execute(
            "SELECT invocation_id, outcome, count(*) FROM startups GROUP BY invocation_id"
        ).fetchall()
    finally:
        db.close()
    return {inv: (outcome, n) for inv, outcome, n in rows}


def findings(state: Path) -> dict[str, list[str]]:
    """invocation -> finding checks, as `sentinel startups --json` judges the stored records."""
    out = cli_stdout(
        "startups", "--json", "--limit", "0", "--state-dir", str(state), "--unit", UNIT, timeout=60
    )
    return {
        s["invocation_id"]: sorted(f["check"] for f in s["findings"])
        for s in json.loads(out)["startups"]
    }


def scan_reference(journal: Path, tmp_path: Path) -> dict[str, list[str]]:
    out = cli_stdout(
        "scan",
        "--journal-dir",
        str(journal),
        "--state-dir",
        str(tmp_path / "reference"),
        "--unit",
        UNIT,
        "--json",
        timeout=60,
    )
    return {
        s["invocation_id"]: sorted(f["check"] for f in s["findings"])
        for s in json.loads(out)["startups"]
    }


def start(sentinels: Sentinels, journal: Path, state: Path) -> Sentinel:
    return sentinels.start("--journal-dir", str(journal), "--unit", UNIT, state=state)


def recorded(state: Path, *invs: str) -> bool:
    try:
        rows = stored(state)
    except sqlite3.Error:
        return False
    return all(rows.get(inv, ("",))[0] == "ready" for inv in invs)


def assert_like_a_scan(state: Path, journal: Path, tmp_path: Path, invs: list[str]) -> None:
    rows = stored(state)
    assert sorted(rows) == sorted(invs)
    assert {n for _, n in rows.values()} == {1}
    reference = scan_reference(journal, tmp_path)
    assert findings(state) == reference
    assert reference[SEED_2] != []  # startup 2 regresses against startup 1


def test_a_held_lock_then_a_full_disk_then_a_sigkill_lose_nothing(
    live_journald: journaltools.LiveJournald,
    sentinels: Sentinels,
    small_disk: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    journal = live_journald.journal_dir
    state = small_disk / "state"
    s = start(sentinels, journal, state)
    standin_sglang.run(live_journald, 1, SEED_1, unit=UNIT, delay_ms=1)
    wait_until(lambda: recorded(state, SEED_1), 30, "startup 1 stored")

    # 1. Another process holds the write lock while startup 2 arrives.
    holder = LockHolder(state / "sentinel.sqlite3")
    try:
        standin_sglang.run(live_journald, 2, SEED_2, unit=UNIT, delay_ms=1)
        failed = s.wait_event("commit_failed", 30)
        assert "database is locked" in str(failed["error"])
        assert not recorded(state, SEED_2)
        wait_until(
            s.scrape_when(lambda b: "sglang_sentinel_state_commit_failures_total 2.0" in b),
            30,
            "a retry failing too",
        )
    finally:
        holder.release()
    wait_until(lambda: recorded(state, SEED_2), 60, "startup 2 stored after the lock is freed")
    s.wait_event("commit_recovered", 30)

    # 2. The disk fills up while startup 3 arrives; a SIGKILL during the fault.
    filler = fill(small_disk)
    standin_sglang.run(live_journald, 2, SEED_3, unit=UNIT, delay_ms=1)
    wait_until(lambda: s.stderr().count('"commit_failed"') >= 2, 30, "the commit failing (ENOSPC)")
    errors = [e for e in s.events() if e.get("event") == "commit_failed"]
    assert "full" in str(errors[-1]["error"])
    assert not recorded(state, SEED_3)
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait(timeout=10)
    # Restarted while the disk is still full: it cannot even start a transaction; it keeps
    # trying (or refuses) but never stores a cursor past startup 3.
    filler.unlink(missing_ok=True)
    s2 = start(sentinels, journal, state)
    wait_until(lambda: recorded(state, SEED_3), 60, "startup 3 stored after room is made")
    s2.proc.send_signal(signal.SIGTERM)
    assert s2.proc.wait(timeout=10) == 0
    logs = s.stderr() + s2.stderr()
    assert "Traceback" not in logs
    assert_like_a_scan(state, journal, tmp_path, [SEED_1, SEED_2, SEED_3])
    with capsys.disabled():
        print(
            f"\n[faults] lock held: {s.stderr().count('commit_failed')} episode(s) logged, "
            f"recovered; ENOSPC + SIGKILL: recovered; 3 startups exactly once, findings = scan"
        )
