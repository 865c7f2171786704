"""Issue 20 item 7: files a person hands the sentinel are bounded, a state from a newer sentinel
is named by every command, and read-only commands leave the state directory as they found it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from sentinelproc import clean_env, sentinel_argv

from sglang_sentinel.cli import main
from sglang_sentinel.config import load_config
from sglang_sentinel.daemon import Daemon
from sglang_sentinel.errors import RuleError
from sglang_sentinel.rules.files import load_rules
from sglang_sentinel.state import DB_NAME
from sglang_sentinel.state.store import SCHEMA_VERSION
from sglang_sentinel.yamlfile import MAX_FILE_BYTES

UNIT = "sglang-qwen.service"


def _big_rules(directory: Path, size: int, name: str = "99-big.yaml") -> Path:
    """A valid rule file (no rules) padded with comments to `size` bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    head = b"version: 1\nrules: []\n"
    line = b"# " + b"x" * 125 + b"\n"
    path = directory / name
    path.write_bytes(head + line * ((size - len(head)) // len(line) + 1))
    return path


# -- files: a size limit, no FIFO or device ------------------------------------------------------


def test_a_rules_file_past_the_limit_is_refused_naming_the_file_and_the_limit(
    tmp_path: Path,
) -> None:
    """A 1.1 MiB rules file is a problem of that file (not read, not parsed); one at the limit
    loads. Before: any size was parsed, 13.6 MB in 21 s on the follow loop."""
    big = _big_rules(tmp_path / "big", MAX_FILE_BYTES + 100_000)
    with pytest.raises(RuleError) as err:
        load_rules([tmp_path / "big"])
    assert err.value.problems == [
        f"{big}:-: larger than 1024 KiB, the most a config, rule, policy or baseline file may"
        " be; split it (rule files: one concern per file) or trim it"
    ]
    _big_rules(tmp_path / "fits", MAX_FILE_BYTES - 200)
    assert load_rules([tmp_path / "fits"]).rules == ()


def test_the_rule_files_together_are_bounded(tmp_path: Path) -> None:
    """Five files under the per-file limit but 4.5 MiB together: the fifth is named."""
    for i in range(5):
        last = _big_rules(tmp_path / "many", MAX_FILE_BYTES - 100_000, f"9{i}-part.yaml")
    with pytest.raises(RuleError) as err:
        load_rules([tmp_path / "many"])
    assert err.value.problems == [
        f"{last}:-: the rule files come to more than 4 MiB with this one, the most loaded at"
        " once; remove rule files"
    ]


def test_one_oversized_file_is_named_as_such_not_as_the_total(tmp_path: Path) -> None:
    """A 13.6 MB rules file (issue 20's attack) is a file over the per-file limit."""
    big = _big_rules(tmp_path / "one", 13_600_000)
    with pytest.raises(RuleError) as err:
        load_rules([tmp_path / "one"])
    assert err.value.problems == [
        f"{big}:-: larger than 1024 KiB, the most a config, rule, policy or baseline file may"
        " be; split it (rule files: one concern per file) or trim it"
    ]


def test_a_sighup_with_an_oversized_rules_file_keeps_the_running_rules_at_once(
    tmp_path: Path, seed_journal_dir: Path
) -> None:
    """The reload is rejected and counted in well under a second (the file is not parsed), and
    the running rules stay."""
    rules_dir = tmp_path / "rules"
    rules_dir.mkdir()
    config_path = tmp_path / "c.yaml"
    config_path.write_text(f"units: [{UNIT}]\nrules:\n  dirs: ['{rules_dir}']\n")
    overrides = {"journal.directory": str(seed_journal_dir), "state_dir": str(tmp_path / "s")}

    def loader() -> object:
        return load_config(config_path, environ={}, overrides=overrides)

    daemon = Daemon.from_config(loader(), loader=loader)  # type: ignore[arg-type]
    try:
        running = daemon.rules
        _big_rules(rules_dir, 12 * MAX_FILE_BYTES)
        # CPU time of this thread, which does the reload: parsing the 12 MiB would cost seconds
        # of it, while on a loaded machine wall time also counts the waits for a core.
        started = time.thread_time()
        daemon.reload()
        assert time.thread_time() - started < 1.0
        assert daemon.stats.rule_load_errors == 1
        assert daemon.rules is running
    finally:
        daemon.store.close()


def test_a_fifo_or_a_device_as_config_is_refused_without_blocking(tmp_path: Path) -> None:
    """`--config` naming a FIFO nobody writes, or /dev/zero: one line, exit 2, at once (before:
    open() of the FIFO blocked for ever, /dev/zero was read until memory ran out)."""
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        result = subprocess.run(
            sentinel_argv("config", "--config", str(path)),
            capture_output=True,
            text=True,
            timeout=60,
            env=clean_env(),
            check=False,
        )
        assert result.returncode == 2
        assert result.stderr.splitlines() == [
            "error: invalid configuration:",
            f"  {path}: not a regular file (a FIFO or a device?); give a file",
        ]


# -- a newer schema, named by every command ------------------------------------------------------


def _newer_state(state: Path, journal: Path) -> None:
    """A state as a future sentinel might leave it: version 99, `startups` without `unit`."""
    assert main(["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--json"]) == 0
    db = sqlite3.connect(state / DB_NAME)
    try:
        db.executescript(
            "DROP INDEX startups_unit_time; DROP INDEX startups_unit_seq;"
            "ALTER TABLE startups RENAME COLUMN unit TO target;"
            "UPDATE meta SET value='99' WHERE key='schema_version';"
        )
    finally:
        db.close()


def test_every_command_names_a_newer_schema_in_one_line(
    tmp_path: Path, seed_journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `check` and `startups` exited 3 with `KeyError: 'unit'`."""
    state = tmp_path / "s"
    _newer_state(state, seed_journal_dir)
    expected = (
        f"error: state database {state / DB_NAME} has schema version 99, newer than this"
        f" sentinel understands ({SCHEMA_VERSION}); upgrade sglang-sentinel (or move the state"
        " aside to start a new one)"
    )
    s = ["--state-dir", str(state)]
    commands = [
        ["check", *s],
        ["check", "--json", *s],
        ["startups", *s],
        ["startups", "--json", *s],
        ["report", *s],
        ["report", "--html", "-", *s],
        ["diff", *s],
        ["baseline", *s],
        ["baseline", "--pin", *s],
        ["baseline", "--unpin", "--unit", UNIT, *s],
        ["scan", "--journal-dir", str(seed_journal_dir), *s],
        ["run", "--journal-dir", str(seed_journal_dir), "--listen", "127.0.0.1:1", *s],
    ]
    capsys.readouterr()
    for argv in commands:
        code = main(argv)
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if not line.startswith("{")]
        assert (argv, code, lines) == (argv, 2, [expected])


@pytest.mark.parametrize("value", ["abc", "", "4.0"])
def test_a_damaged_schema_version_is_named_in_one_line(
    tmp_path: Path, seed_journal_dir: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """Before: every command exited 3 with `internal error: ValueError: invalid literal`."""
    state = tmp_path / "s"
    assert main(["scan", "--journal-dir", str(seed_journal_dir), "--state-dir", str(state)]) == 0
    db = sqlite3.connect(state / DB_NAME)
    try:
        db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (value,))
        db.commit()
    finally:
        db.close()
    capsys.readouterr()
    s = ["--state-dir", str(state)]
    for argv in (["check", *s], ["scan", "--journal-dir", str(seed_journal_dir), *s]):
        code = main(argv)
        lines = [ln for ln in capsys.readouterr().err.splitlines() if not ln.startswith("{")]
        assert (argv, code, lines) == (
            argv,
            2,
            [
                f"error: state database {state / DB_NAME} has no readable schema version"
                f" ({value!r}); move the state aside to start a new one"
            ],
        )


# -- read-only commands create nothing -----------------------------------------------------------


def test_read_only_commands_leave_the_state_directory_as_it_was(
    tmp_path: Path, seed_journal_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the state's owner (who may write the directory): after a scan and after a pin, every
    read-only command leaves exactly the database file, unchanged. Before: the first of them
    created -wal and -shm (SQLite makes both for any reader of a WAL database it can)."""
    state = tmp_path / "s"
    assert main(["scan", "--journal-dir", str(seed_journal_dir), "--state-dir", str(state)]) == 0

    def listing() -> list[tuple[str, int, int]]:
        return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in state.iterdir())

    for write in (None, ["baseline", "--pin"], ["baseline", "--unpin", "--unit", UNIT]):
        if write is not None:
            assert main([*write, "--state-dir", str(state)]) == 0
        before = listing()
        assert [name for name, _, _ in before] == [DB_NAME]
        for argv in (
            ["check"],
            ["check", "--json"],
            ["startups"],
            ["startups", "--json"],
            ["report"],
            ["diff"],
            ["baseline"],
            ["baseline", "--json"],
        ):
            main([*argv, "--state-dir", str(state)])
            assert listing() == before, argv
    capsys.readouterr()
