"""Scan output before and after a change, on every journal of the repository, byte for byte.

    python -m bench.identical REV           # this tree against git revision REV
    python -m bench.identical REV --big     # also the 1M-entry benchmark journals (slow)

The journals: every `journal.export` in the repository (demo, seed fixture, golden cases) turned
into journal files by systemd-journal-remote, and the benchmark generator's journals (both
shapes; 100k entries, and 1M with --big). For each, `sentinel scan` (text, then `--json`) runs
with REV's package and with this tree's, each on a fresh state directory, under the same
interpreter; outputs, and what each scan stored (startup rows, cursor, counters, without the
times they were written), are compared byte for byte and every difference is printed as a
unified diff. The environment is passed on: SENTINEL_READER=python checks the pure-Python
reader. Exit status 1 when any differs: a listed bug fix is the only acceptable reason.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from . import generate

REPO = Path(__file__).resolve().parent.parent
JOURNAL_REMOTE = Path("/lib/systemd/systemd-journal-remote")


def exports() -> list[Path]:
    """Every journal export the repository carries (git ls-files: vendored data only)."""
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "*journal.export"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [REPO / p for p in out]


def to_journal(export: Path, work: Path) -> Path:
    """The export as a journal directory (what `sentinel scan --journal-dir` reads)."""
    name = export.parent.relative_to(REPO).as_posix().replace("/", "_")
    directory = work / name
    directory.mkdir(parents=True)
    subprocess.run(
        [str(JOURNAL_REMOTE), f"--output={directory}/system.journal", str(export)],
        check=True,
        capture_output=True,
    )
    return directory


def units_of(directory: Path) -> list[str]:
    """The service units with lines in the journal, in name order (scan each one)."""
    out = subprocess.run(
        ["journalctl", "--no-pager", "-D", str(directory), "-F", "_SYSTEMD_UNIT"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return sorted(u for u in out if u.endswith(".service") and "sglang" in u) or [
        "sglang-qwen.service"
    ]


def scan(tree: Path, directory: Path, unit: str, state: Path, as_json: bool) -> bytes:
    """`sentinel scan` with the package of `tree` (first on the path), on a fresh state."""
    env = {**os.environ, "PYTHONPATH": str(tree), "TZ": "UTC", "NO_COLOR": "1"}
    argv = [sys.executable, "-m", "sglang_sentinel.cli", "scan", "--journal-dir", str(directory)]
    argv += ["--unit", unit, "--state-dir", str(state)]
    if as_json:
        argv.append("--json")
    # Not the repository as the working directory: `-m` puts it first on the path.
    done = subprocess.run(argv, capture_output=True, env=env, cwd=state.parent)
    tail = done.stderr[-400:] if done.returncode not in (0, 1) else b""
    out = _STALLED_FOR.sub(rb"\1<seconds since it started, at the scan's time>\2", done.stdout)
    return out + f"\n[exit {done.returncode}]\n".encode() + tail + stored(state)


# A startup still starting is judged at the time of the scan: its stall finding's "current" is
# the seconds since it started, then (the text report's rounding hides it); not the scan's output.
_STALLED_FOR = re.compile(rb'("current": )[0-9.e+]+(,\n\s*"message": "still starting after )')


def stored(state: Path) -> bytes:
    """What the scan stored: every startup row and the cursor, without the times they were
    written (the same on both sides when the scans agree)."""
    path = state / "sentinel.sqlite3"
    if not path.exists():
        return b"[no state]\n"
    db = sqlite3.connect(path)
    try:
        out = []
        for table in ("startups", "cursors", "counters", "baselines"):
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            kept = [c for c in columns if c != "updated_at"]
            if kept:
                rows = db.execute(f"SELECT {', '.join(kept)} FROM {table} ORDER BY rowid")
                out += [f"[{table}] {row!r}" for row in rows]
        return ("\n".join(out) + "\n").encode()
    finally:
        db.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.identical", description=__doc__.splitlines()[0]
    )
    ap.add_argument("rev", help="the git revision to compare with")
    ap.add_argument("--big", action="store_true", help="also the 1M-entry benchmark journals")
    args = ap.parse_args(argv)
    sizes = [100_000, 1_000_000] if args.big else [100_000]
    with tempfile.TemporaryDirectory(prefix="sentinel-identical-") as tmp:
        work = Path(tmp)
        before = work / "before"
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(before), args.rev],
            check=True,
            capture_output=True,
        )
        try:
            journals = [to_journal(e, work / "journals") for e in exports()]
            for shape in generate.SHAPES:
                for n in sizes:
                    journals.append(generate.ensure(n, shape=shape)[0])
            differing = 0
            for directory in journals:
                for unit in units_of(directory):
                    for as_json in (False, True):
                        outs: list[bytes] = []
                        for label, tree in (("before", before), ("after", REPO)):
                            state = work / "state" / f"{label}-{len(outs)}"
                            state.parent.mkdir(exist_ok=True)
                            outs.append(scan(tree, directory, unit, state, as_json))
                            subprocess.run(["rm", "-rf", str(state)], check=True)
                        what = f"{directory.name} {unit} {'--json' if as_json else 'text'}"
                        if outs[0] == outs[1]:
                            print(f"identical  {what} ({len(outs[1])} bytes)")
                            continue
                        differing += 1
                        print(f"DIFFERENT  {what}")
                        sys.stdout.writelines(
                            difflib.unified_diff(
                                outs[0].decode("utf-8", "replace").splitlines(True),
                                outs[1].decode("utf-8", "replace").splitlines(True),
                                f"{args.rev}",
                                "this tree",
                                n=1,
                            )
                        )
            print(f"{differing} output(s) differ")
            return 1 if differing else 0
        finally:
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)],
                capture_output=True,
            )


if __name__ == "__main__":
    sys.exit(main())
