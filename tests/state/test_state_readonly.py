"""Read-only commands need read access only: a non-root user who can read the state (e.g. a
member of its group) runs `startups`, `check`, `baseline` and `diff` on a directory it cannot
write, with or without a running writer (WAL mode), and an unreadable state is called that."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import journaltools
import pytest
from conftest import require_root
from sentinelproc import clean_env, sentinel_argv

import sglang_sentinel
from sglang_sentinel.state import DB_NAME

AS_NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
SEED_1 = "6a1f0c2e"
UNIT = "sglang-qwen.service"  # the seed journal's unit (journal files only, no live unit)


def _reach_interpreter() -> str:
    """Shell lines that let nobody run this interpreter and import the checkout, in a private
    mount namespace.

    pyenv builds live under root's home (mode 0700), where nobody may not look, and so does a
    clone in /root with its .venv (the README's install, as root, on a fresh host): each such
    directory on the way to the interpreter's prefix, the venv or the checkout is covered by a
    world-searchable tmpfs that holds only bind mounts of the next steps. The state directory
    under test is not touched.
    """
    # The package directory, not the checkout: a checkout that is itself closed (a clone in a
    # `mktemp -d` directory, mode 0700) is then one of the directories on the way, covered too.
    package = Path(sglang_sentinel.__file__).resolve().parent
    bases = {
        Path(sys.base_prefix).resolve(),
        Path(os.path.realpath(sys.executable)),
        Path(sys.prefix).resolve(),
        package,
    }
    steps: dict[Path, set[str]] = {}
    for base in bases:
        for closed in reversed(base.parents):
            if closed == Path("/") or closed.stat().st_mode & 0o001:
                continue
            steps.setdefault(closed, set()).add(base.relative_to(closed).parts[0])
            break
    lines = []
    for closed, names in sorted(steps.items()):
        lines.append(
            f'keep=$(mktemp -d) && mount --rbind "{closed}" "$keep"'
            f' && mount -t tmpfs -o mode=0755 sentinel-test "{closed}"'
        )
        for step in sorted(names):
            lines.append(
                f'mkdir "{closed}/{step}" && mount --rbind "$keep/{step}" "{closed}/{step}"'
            )
    return "\n".join(lines)


def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    """`sentinel ARGS` as uid nobody, gid nogroup, no other groups."""
    script = f'set -e\n{_reach_interpreter()}\nexec "$@"'
    return subprocess.run(
        [
            *("unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"),
            *AS_NOBODY,
            *sentinel_argv(*args),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seed journal scanned by root, once for the module (a scan is a second each time;
    every test gets its own copy of what it wrote, closed cleanly: the database alone)."""
    require_root()
    tmp = tmp_path_factory.mktemp("scanned")
    state = tmp / "state"
    subprocess.run(
        sentinel_argv(
            "scan", "--journal-dir", str(journaltools.seed_journal(tmp)), "--state-dir", str(state)
        ),
        check=True,
        capture_output=True,
        env=clean_env(),
    )
    return state


@pytest.fixture
def state(scanned: Path) -> Iterator[Path]:
    """The seed journal scanned by root into STATE (root:nogroup, dir 0750, files 0640), in a
    directory nobody may traverse (tmp_path is root's own 0700)."""
    base = Path(tempfile.mkdtemp(prefix="sentinel-ro-"))
    try:
        base.chmod(0o755)
        state = base / "state"
        shutil.copytree(scanned, state)
        for path in (state, *state.iterdir()):
            shutil.chown(path, group="nogroup")
        state.chmod(0o750)
        yield state
    finally:
        shutil.rmtree(base)


def listing(state: Path) -> list[tuple[str, int, int]]:
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in state.iterdir())


def test_read_only_commands_work_for_a_reader_and_change_nothing(state: Path) -> None:
    """No -wal/-shm (the writer closed cleanly) and no write access: every read works."""
    before = listing(state)
    assert [name for name, _, _ in before] == [DB_NAME]
    startups = as_nobody("startups", "--state-dir", str(state))
    assert startups.returncode == 0, startups.stderr
    assert startups.stdout.count(UNIT) == 2
    check = as_nobody("check", "--state-dir", str(state))
    assert check.returncode == 1, check.stderr  # the seed's regressions: exit 1, as for root
    assert "max_running_requests 48 → 26" in check.stdout
    baseline = as_nobody("baseline", "--state-dir", str(state))
    assert (baseline.returncode, baseline.stdout.split(":")[0]) == (0, UNIT), baseline.stderr
    diff = as_nobody("diff", "--state-dir", str(state))
    assert diff.returncode == 0, diff.stderr
    assert "max_running_requests" in diff.stdout
    assert listing(state) == before


def test_a_reader_sees_what_a_running_writer_has_not_checkpointed(state: Path) -> None:
    """A writer (the daemon) holds the database open in WAL mode: its -wal and -shm exist, the
    reader may not write them, and still reads the pin that so far lives only in the WAL."""
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from sglang_sentinel.state import StateStore\n"
            "s = StateStore(Path(sys.argv[1])); s.pin(sys.argv[2], sys.argv[3])\n"
            "print('pinned', flush=True); sys.stdin.read()",
            str(state),
            UNIT,
            "6a1f0c2e9b7d4e3f8a5b1c0d2e4f6a8b",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "pinned\n"
        assert (state / f"{DB_NAME}-wal").exists() and (state / f"{DB_NAME}-shm").exists()
        baseline = as_nobody("baseline", "--state-dir", str(state))
        assert baseline.returncode == 0, baseline.stderr
        assert baseline.stdout.startswith(SEED_1), baseline.stdout
        assert baseline.stdout.rstrip().endswith("(baseline)"), baseline.stdout
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        assert writer.wait(timeout=30) == 0


def test_an_unreadable_state_is_called_not_readable(state: Path) -> None:
    """Not "not writable": a read needs no write. Database 0600, then the directory 0700."""
    (state / DB_NAME).chmod(0o600)
    result = as_nobody("startups", "--state-dir", str(state))
    assert result.returncode == 2
    assert f"state database {state / DB_NAME} is not readable by this user" in result.stderr
    assert "writable" not in result.stderr
    (state / DB_NAME).chmod(0o640)
    state.chmod(0o700)
    result = as_nobody("check", "--state-dir", str(state))
    assert result.returncode == 2
    assert f"state directory {state} is not readable by this user" in result.stderr


def test_pinning_still_needs_write_access(state: Path) -> None:
    result = as_nobody("baseline", "--pin", SEED_1, "--unit", UNIT, "--state-dir", str(state))
    assert result.returncode == 2
    assert f"state database {state / DB_NAME} is not writable by this user" in result.stderr


def test_a_state_behind_a_closed_parent_is_called_not_readable(state: Path) -> None:
    """systemd's DynamicUser keeps /var/lib/SERVICE behind /var/lib/private (0700): a reader
    cannot even open the state directory's path. Before: "internal error: PermissionError",
    exit 3 (the booted-Debian e2e run as nobody)."""
    state.parent.chmod(0o700)
    for command in ("startups", "check", "baseline"):
        result = as_nobody(command, "--state-dir", str(state))
        assert result.returncode == 2, (command, result.stderr)
        assert f"state directory {state} is not readable by this user" in result.stderr
        assert "internal error" not in result.stderr
    result = as_nobody("baseline", "--pin", SEED_1, "--unit", UNIT, "--state-dir", str(state))
    assert result.returncode == 2, result.stderr
    assert "internal error" not in result.stderr
