"""The fixed cost every `sentinel` command pays: CPU of a revision's start and of this tree's.

    python -m bench.startup REV            # median of 5 runs each, REV's package vs this tree
    python -m bench.startup REV --big      # also the scan of the 1M-entry journal
    python -m bench.startup REV --source   # without compiled bytecode (as a source checkout runs
                                           # under PYTHONDONTWRITEBYTECODE): compiling included

Each command runs in a fresh interpreter with PYTHONPATH on the package's tree; its CPU (user +
system, its waited-for children included) comes from `os.wait4`. Each tree's bytecode is
compiled first (its __pycache__, ignored by git), as an installed package has it, so neither is
charged for compiling (with --source, bytecode there is removed and never written). The commands: importing the CLI, `scan --help`, `check` on a state
scanned from the 100k benchmark journal, and `scan` of that journal into a fresh state directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import generate

REPO = Path(__file__).resolve().parent.parent
UNIT = "sglang-bench.service"


def export_tree(rev: str, into: Path) -> Path:
    """REV's package, unpacked under `into` (nothing of the checkout changes)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "sglang_sentinel"], capture_output=True, check=True
    ).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def cpu_seconds(argv: Sequence[str], env: dict[str, str]) -> float:
    """CPU (user + system) of one run of `argv`; its output is dropped, a failure raises."""
    # Run from / : `python -c` puts the working directory first on sys.path (a checkout's
    # package would shadow PYTHONPATH's).
    proc = subprocess.Popen(
        argv, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # `check` exits 1 on findings
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {err.decode()[-500:]}")
    return usage.ru_utime + usage.ru_stime


def prepare(tree: Path, source: bool) -> dict[str, str]:
    """The environment that runs `tree`'s package, its bytecode compiled (or removed)."""
    env = {**os.environ, "PYTHONPATH": str(tree), "TZ": "UTC", "NO_COLOR": "1"}
    env.pop("SENTINEL_STATE_DIR", None)
    if source:
        for cache in (tree / "sglang_sentinel").rglob("__pycache__"):
            shutil.rmtree(cache)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(tree / "sglang_sentinel")],
            env=env,
            check=True,
        )
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("rev", help="git revision to compare this tree with, e.g. main")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--big", action="store_true", help="also scan the 1M-entry journal")
    parser.add_argument("--source", action="store_true", help="no compiled bytecode")
    args = parser.parse_args(argv)
    sentinel = str(Path(sys.executable).with_name("sentinel"))
    journals = {"100k": generate.ensure(100_000)[0]}
    if args.big:
        journals["1M"] = generate.ensure(1_000_000)[0]
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        envs = {
            args.rev: prepare(export_tree(args.rev, work / "rev"), args.source),
            "tree": prepare(REPO, args.source),
        }
        # `check` reads a state the tree's own scan wrote (the formats are the same).
        state, fresh = work / "state", work / "fresh"
        scanned = ["--state-dir", str(state), "--unit", UNIT]
        subprocess.run(
            [sentinel, "scan", "--journal-dir", str(journals["100k"]), *scanned],
            env=envs["tree"],
            stdout=subprocess.DEVNULL,
            check=True,
        )
        commands: dict[str, tuple[list[str], Path | None]] = {
            "import sglang_sentinel.cli": (
                [sys.executable, "-c", "import sglang_sentinel.cli"],
                None,
            ),
            "sentinel scan --help": ([sentinel, "scan", "--help"], None),
            "sentinel check": ([sentinel, "check", *scanned], None),
        }
        for size, journal in journals.items():
            scan = [
                "scan",
                "--journal-dir",
                str(journal),
                "--state-dir",
                str(fresh),
                "--unit",
                UNIT,
            ]
            commands[f"sentinel scan ({size})"] = ([sentinel, *scan], fresh)
        print(f"{'median CPU of ' + str(args.runs):<28}" + "".join(f"{n:>14}" for n in envs))
        for label, (command, wipe) in commands.items():
            samples: dict[str, list[float]] = {name: [] for name in envs}
            for _ in range(args.runs):  # the two trees in turn: a load change hits both alike
                for name, env in envs.items():
                    if wipe is not None:
                        shutil.rmtree(wipe, ignore_errors=True)
                    samples[name].append(cpu_seconds(command, env))
            medians = [statistics.median(samples[name]) for name in envs]
            print(f"{label:<28}" + "".join(f"{v:>13.3f}s" for v in medians), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
