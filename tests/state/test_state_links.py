"""The state directory's files are opened without following links (sglang_sentinel/state/files.py).

The state directory is the daemon user's, and root runs commands in it. Before, a dangling
`sentinel.sqlite3` link made root's `scan` create a root-owned file at its target, and a link to
another application's SQLite file gave that file the sentinel's tables, WAL mode and mode 0640.
Now a link (or a foreign, world-writable or hard-linked file) as the database, its -wal or its
-shm is refused with one line, by every command, and its target is left as it was.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_root
from journaltools import build_journal, ready_startup, write_export

from sglang_sentinel.cli import main
from sglang_sentinel.errors import StateError
from sglang_sentinel.state import DB_NAME, StateStore


@pytest.fixture(scope="module")
def jdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("journal")
    export = write_export(ready_startup("2026-03-20 10:00:00", 48).entries(), base / "j.export")
    return build_journal(export, base / "journal")


def other_app_db(path: Path) -> bytes:
    """Another application's SQLite file (rollback journal, mode 0600); its bytes."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("INSERT INTO accounts (name) VALUES ('alice')")
    db.commit()
    db.close()
    path.chmod(0o600)
    return path.read_bytes()


def scan_once(jdir: Path, state: Path) -> None:
    """A real state in `state`, its connection closed (the CLI leaves closing to the collector:
    a connection closed later, inside the next command, would unlink a -wal link planted
    meanwhile, as SQLite removes its WAL file on the last close)."""
    assert main(["scan", "--journal-dir", str(jdir), "--state-dir", str(state)]) == 0
    gc.collect()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    _, err = capsys.readouterr()
    return code, err.splitlines()


def commands(state: Path, jdir: Path) -> list[list[str]]:
    """A writer and read-only commands, each on `state`."""
    s = ["--state-dir", str(state)]
    return [
        ["scan", "--journal-dir", str(jdir), *s],
        ["check", *s],
        ["startups", *s],
        ["baseline", "--pin", "latest", *s],
    ]


@pytest.mark.parametrize("name", [DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm"])
def test_a_dangling_link_is_refused_and_nothing_is_created_at_its_target(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jdir: Path, name: str
) -> None:
    state = tmp_path / "state"
    if name != DB_NAME:  # a companion link beside a real database
        scan_once(jdir, state)
    state.mkdir(exist_ok=True)
    target = tmp_path / "elsewhere" / "planted"
    target.parent.mkdir()
    (state / name).unlink(missing_ok=True)
    (state / name).symlink_to(target)
    for argv in commands(state, jdir):
        code, err = run(capsys, *argv)
        assert code == 2, argv
        assert err == [
            f"error: state file {state / name} (-> {target}) is a symbolic link; the sentinel "
            "does not follow links in its state directory; refusing to open it: remove or "
            "replace it (`mv` it aside) and run the command again"
        ], argv
        assert list(target.parent.iterdir()) == [], argv


def test_a_link_to_another_applications_database_leaves_it_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jdir: Path
) -> None:
    other = tmp_path / "app" / "app.db"
    other.parent.mkdir()
    before = other_app_db(other)
    state = tmp_path / "state"
    state.mkdir()
    (state / DB_NAME).symlink_to(other)
    for argv in commands(state, jdir):
        code, err = run(capsys, *argv)
        assert code == 2 and len(err) == 1 and "is a symbolic link" in err[0], argv
    assert other.read_bytes() == before
    assert oct(other.stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in other.parent.iterdir()) == ["app.db"]  # no -wal, no -shm


def test_a_link_for_the_wal_to_another_file_leaves_it_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, jdir: Path
) -> None:
    """A -wal link (SQLite would write the log through it) beside the real database."""
    state = tmp_path / "state"
    scan_once(jdir, state)
    victim = tmp_path / "victim.conf"
    victim.write_bytes(b"keep me\n")
    (state / f"{DB_NAME}-wal").unlink(missing_ok=True)
    (state / f"{DB_NAME}-wal").symlink_to(victim)
    capsys.readouterr()
    for argv in commands(state, jdir):
        code, err = run(capsys, *argv)
        assert code == 2 and len(err) == 1 and f"{DB_NAME}-wal (-> {victim})" in err[0], argv
    assert victim.read_bytes() == b"keep me\n"


@pytest.mark.parametrize("kind", ["foreign-owner", "world-writable", "hard-link", "fifo"])
def test_a_database_that_is_not_the_sentinels_own_file_is_refused(
    tmp_path: Path, jdir: Path, kind: str
) -> None:
    state = tmp_path / "state"
    StateStore(state).close()
    db = state / DB_NAME
    if kind == "foreign-owner":
        require_root()  # chown
        os.chown(db, 65534, 65534)
        want = "belongs to nobody (uid 65534), not to this user or the state directory's owner"
    elif kind == "world-writable":
        db.chmod(0o646)
        want = "is writable by every user (mode 0646)"
    elif kind == "hard-link":
        os.link(db, tmp_path / "elsewhere.sqlite3")
        want = "has 2 hard links (another name elsewhere shares the file)"
    else:
        db.unlink()
        os.mkfifo(db)
        want = "is not a regular file"
    for readonly in (False, True):
        with pytest.raises(StateError) as raised:
            StateStore(state, readonly=readonly)
        assert str(raised.value) == (
            f"state file {db} {want}; refusing to open it: remove or replace it (`mv` it "
            "aside) and run the command again"
        )


def test_the_state_directory_itself_may_be_a_link(tmp_path: Path, jdir: Path) -> None:
    """systemd's DynamicUser= makes /var/lib/NAME a link to /var/lib/private/NAME."""
    real = tmp_path / "private" / "sentinel"
    real.mkdir(parents=True)
    (tmp_path / "sentinel").symlink_to(real)
    assert (
        main(["scan", "--journal-dir", str(jdir), "--state-dir", str(tmp_path / "sentinel")]) == 0
    )
    assert oct((real / DB_NAME).stat().st_mode & 0o777) == "0o640"
    store = StateStore(tmp_path / "sentinel", readonly=True)
    assert [r.facts["max_running_requests"] for r in store.startups(["sglang-qwen.service"])] == [
        48
    ]
    store.close()


def test_another_process_closing_the_database_leaves_an_open_writer_its_wal(
    tmp_path: Path,
) -> None:
    """Opening a writer chmods the database through a descriptor; closing a descriptor of a file
    drops every POSIX lock this process holds on it, SQLite's shared lock on a WAL database
    included. Done after SQLite opened the file, the next other process to close its
    connection took itself for the last one, checkpointed and deleted the -wal and -shm, and the
    writer's later commits went to the unlinked WAL: no other process ever saw them (the
    daemon's commit after a held lock, test_fault_suite)."""
    state = tmp_path / "state"
    store = StateStore(state)
    db = state / DB_NAME

    def in_another_process(sql: str) -> str:
        code = (
            "import sqlite3\n"
            f"db = sqlite3.connect({str(db)!r})\n"
            f"print(db.execute({sql!r}).fetchall())\n"
            "db.close()\n"
        )
        return subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=30
        ).stdout.strip()

    try:
        assert in_another_process("SELECT count(*) FROM startups") == "[(0,)]"
        assert sorted(os.listdir(state)) == [DB_NAME, f"{DB_NAME}-shm", f"{DB_NAME}-wal"]
        with store.transaction():
            store.save_cursor("probe", "s=1")
        assert in_another_process("SELECT source, cursor FROM cursors") == "[('probe', 's=1')]"
    finally:
        store.close()
