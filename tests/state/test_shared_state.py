"""Scans and a daemon share one state without losing or skipping anything (issue 20, item 3).

The README's commands (`sentinel run`, `sentinel scan`, `baseline --pin`, `check`) run in every
order against one state while the journal grows, on real journal files. What used to break:
the cursor was keyed by the journal source alone and the resume state was anybody's, so
(b) `scan --unit B` moved the daemon's cursor and it skipped A's next startup; (c) the daemon
then counted a cursor reset for an entry that was only not one of its units'; (d) a scan of
another journal directory cleared the daemon's open startup, whose summary and ready lines were
then dropped as late: it stayed `starting`; (a) a unit added to `units` was never read.

The daemon is `Daemon.from_config` in this process, reading what the journal has and committing
it as `sentinel run` does, then stopping (its final commit); the rest are `sentinel.cli.main`.
"""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from journaltools import ExportValue, StartupScript, build_journal, write_export

from sglang_sentinel.cli import main
from sglang_sentinel.config.load import load_config
from sglang_sentinel.daemon import Daemon
from sglang_sentinel.state import DB_NAME, StateStore

A, B, C, D = (f"sglang-{x}.service" for x in "abcd")
DAY = "2026-03-10"
BOOT = f"{DAY} 08:00:00"


def ready(unit: str, inv: str, hhmm: str, mrr: int) -> StartupScript:
    s = StartupScript(unit=unit, invocation_id=inv, start=f"{DAY} {hhmm}:00", boot_at=BOOT)
    s.started(f"{DAY} {hhmm}:00")
    s.line(
        f"[{DAY} {hhmm}:20 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, "
        f"max_prefill_tokens=16384, max_running_requests={mrr}, context_len=4096, "
        "available_gpu_mem=10.00 GB"
    )
    s.line(f"[{DAY} {hhmm}:30] The server is fired up and ready to roll!")
    return s


def segments() -> list[list[dict[str, ExportValue]]]:
    """Three stretches of one boot's journal.

    1 (10:00-10:10): A1 starts (loading), B1, C1 and D1 are ready.
    2 (10:20-10:30): A1's summary line (48) and ready line; B2 is ready.
    3 (11:00): A2 is ready at 26.
    """
    a1 = StartupScript(unit=A, invocation_id="a1" * 16, start=f"{DAY} 10:00:00", boot_at=BOOT)
    a1.started(f"{DAY} 10:00:00")
    a1.line(f"[{DAY} 10:00:10 TP0] Load weight begin. avail mem=78.10 GB")
    a1.line(
        f"[{DAY} 10:20:00 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=48, context_len=4096, "
        "available_gpu_mem=10.00 GB"
    )
    a1.line(f"[{DAY} 10:20:05] The server is fired up and ready to roll!")
    a1_entries = a1.entries()
    one = [
        *a1_entries[:2],
        *ready(B, "b1" * 16, "10:01", 30).entries(),
        *ready(C, "c1" * 16, "10:02", 40).entries(),
        *ready(D, "d1" * 16, "10:03", 40).entries(),
    ]
    two = [*a1_entries[2:], *ready(B, "b2" * 16, "10:25", 30).entries()]
    three = ready(A, "a2" * 16, "11:00", 26).entries()
    return [
        sorted(seg, key=lambda e: int(str(e["__REALTIME_TIMESTAMP"]))) for seg in (one, two, three)
    ]


def run_daemon(journal: Path, state: Path, units: Sequence[str]) -> None:
    """`sentinel run --journal-dir JOURNAL` with these units, until it has read what is there."""
    config = load_config(
        overrides={
            "journal.directory": str(journal),
            "state_dir": str(state),
            "units": list(units),
        },
        environ={},
    )
    daemon = Daemon.from_config(config)
    daemon.source.open()
    daemon.pipeline.resume(from_boot_start=False)
    daemon._drain()
    daemon._shutdown()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out if code in (0, 1) else err


Step = Callable[[Path, Path, Path], None]


@pytest.fixture(scope="module")
def journals(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, Path]]:
    """Per stretch: its journal file, and a directory with a copy of the journal up to it."""
    tmp = tmp_path_factory.mktemp("shared")
    out: list[tuple[Path, Path]] = []
    so_far: list[dict[str, ExportValue]] = []
    for n, segment in enumerate(segments(), 1):
        so_far += segment
        part = build_journal(write_export(segment, tmp / f"seg{n}.export"), tmp / f"seg{n}")
        copy = build_journal(write_export(so_far, tmp / f"copy{n}.export"), tmp / f"copy{n}")
        out.append((part / "test.journal", copy))
    return out


@pytest.mark.parametrize("order", list(itertools.permutations(["run", "scan", "copy"])))
def test_the_readme_commands_in_any_order_lose_and_skip_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    journals: list[tuple[Path, Path]],
    order: tuple[str, ...],
) -> None:
    state = tmp_path / "state"
    journal = tmp_path / "journal"
    journal.mkdir()
    steps: dict[str, Step] = {
        "run": lambda j, s, copy: run_daemon(j, s, [A]),
        "scan": lambda j, s, copy: _ok(
            cli(capsys, "scan", "--unit", B, "--journal-dir", str(j), "--state-dir", str(s))
        ),
        # Another journal directory (a copy of this one): a scan of C there.
        "copy": lambda j, s, copy: _ok(
            cli(capsys, "scan", "--unit", C, "--journal-dir", str(copy), "--state-dir", str(s))
        ),
    }
    for n, (part, copy) in enumerate(journals, 1):
        shutil.copyfile(part, journal / f"seg{n}.journal")  # the journal grows
        for name in order:
            steps[name](journal, state, copy)
        if n == 2:
            _ok(cli(capsys, "baseline", "--pin", "--unit", A, "--state-dir", str(state)))
    # D is added to the daemon's units: read from the start of the journal.
    run_daemon(journal, state, [A, B, D])

    store = StateStore(state, readonly=True)
    try:
        got = {
            r.invocation_id[:2]: (r.unit, r.outcome, r.started_at, r.facts["max_running_requests"])
            for r in store.startups()
        }
        counts = {u: store.outcome_counts(u)["ready"] for u in (A, B, C, D)}
        resets = store.counter("cursor_resets")
    finally:
        store.close()
    base = 1773136800.0  # 10:00:00
    assert got == {
        "a1": (A, "ready", base, 48),
        "b1": (B, "ready", base + 60, 30),
        "c1": (C, "ready", base + 120, 40),
        "d1": (D, "ready", base + 180, 40),
        "b2": (B, "ready", base + 1500, 30),
        "a2": (A, "ready", base + 3600, 26),
    }
    assert counts == {A: 2, B: 2, C: 1, D: 1}
    assert resets == 0
    code, out = cli(capsys, "check", "--unit", A, "--state-dir", str(state), "--json")
    assert code == 1
    [latest] = json.loads(out)["startups"]
    assert latest["baseline"] == {"invocation_id": "a1" * 16, "kind": "pinned"}
    mrr = next(f for f in latest["findings"] if f["check"] == "max_running_requests_drop")
    assert (mrr["severity"], mrr["baseline"], mrr["current"]) == ("critical", 48, 26)
    assert cli(capsys, "check", "--unit", B, "--state-dir", str(state))[0] == 0
    # Each reader keeps its own position: the daemon's two target lists, nothing of the scans.
    db = sqlite3.connect(state / DB_NAME)
    try:
        keys = sorted(k for (k,) in db.execute("SELECT source FROM cursors"))
    finally:
        db.close()
    where = f"dir:{journal.resolve()}"
    assert keys == [f"{where} targets={A}", f"{where} targets={A},{B},{D}"]


def _ok(result: tuple[int, str]) -> None:
    assert result[0] == 0, result[1]


def test_a_version_3_state_resumes_where_it_was_after_the_upgrade(
    tmp_path: Path, journals: list[tuple[Path, Path]]
) -> None:
    """A state schema 3 left (one cursor for the journal source, the open startup's builder in
    its row) is upgraded on open; the daemon takes that cursor and builder over: it reads only
    what is new (no reset), and the open startup A1 becomes ready with its 48."""
    state, journal = tmp_path / "state", tmp_path / "journal"
    journal.mkdir()
    shutil.copyfile(journals[0][0], journal / "seg1.journal")
    run_daemon(journal, state, [A])
    where = f"dir:{journal.resolve()}"
    # Back to schema 3, as its code wrote it.
    db = sqlite3.connect(state / DB_NAME)
    with db:
        db.execute(
            "UPDATE startups SET builder=(SELECT state FROM builders b"
            " WHERE b.invocation_id=startups.invocation_id)"
        )
        db.execute("DROP TABLE builders")
        db.execute("UPDATE cursors SET source=?", (where,))
        db.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    assert db.execute("SELECT count(*) FROM startups WHERE builder IS NOT NULL").fetchone() == (1,)
    db.close()
    shutil.copyfile(journals[1][0], journal / "seg2.journal")
    config = load_config(
        overrides={"journal.directory": str(journal), "state_dir": str(state), "units": [A]},
        environ={},
    )
    daemon = Daemon.from_config(config)
    daemon.source.open()
    daemon.pipeline.resume(from_boot_start=False)
    daemon._drain()
    read = daemon.pipeline.stats.entries_read
    daemon._shutdown()
    assert read == 2  # A1's summary and ready lines; nothing of stretch 1 again
    store = StateStore(state, readonly=True)
    try:
        a1 = store.startup("a1" * 16)
        assert a1 is not None
        assert (a1.outcome, a1.started_at, a1.facts["max_running_requests"]) == (
            "ready",
            1773136800.0,
            48,
        )
        assert store.counter("cursor_resets") == 0
        assert store.outcome_counts(A)["ready"] == 1
    finally:
        store.close()
    db = sqlite3.connect(state / DB_NAME)
    try:
        assert [k for (k,) in db.execute("SELECT source FROM cursors")] == [f"{where} targets={A}"]
        assert db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("4",)
    finally:
        db.close()
