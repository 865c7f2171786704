"""How close to the journal-read floor can any exact scan get? libsystemd's own cost, measured.

    python -m bench.lowerbound            # both 1M-entry bench journals, 5 interleaved rounds
    python -m bench.lowerbound --smoke    # CI: the 20k-entry journals, one round

`make bench` compares `sentinel scan` (d) with the floor (a): `Reader._next()` and
`_get('MESSAGE')` in a Python loop with one `_SYSTEMD_UNIT` match. Issue #13 asked for d <= 1.5 a.
This module measures what an exact scan cannot avoid, in Python (bench/floor.py --invocation) and
with a C program (readfloor.c, built here with the system compiler against libsystemd, as
systemd-python is) that reads the same entries with no Python at all:

- `message` (C): sd_journal_next and MESSAGE of every unit entry, what any reader of the lines
  pays;
- `invocation` (C), `a_invocation` (Python): and each entry's _SYSTEMD_INVOCATION_ID, compared
  with the previous one's. The scan needs it to put each line in its startup exactly: a late line
  of the previous invocation, or one without an id, can sit anywhere, and libsystemd has no
  cheaper public way to see it. A match on the invocation id walks the entries as `next` does;
  the entry's xor_hash (which would show a change of any field) is public only inside its cursor,
  whose formatting costs about half as much again in C (`cursor`), before hashing each MESSAGE to
  take it out;
- `python`: the interpreter starting and importing systemd.journal (what the floor pays too), and
  `imports`: importing `sglang_sentinel.cli` instead, before any line.

The bound for an exact scan is `invocation + python` (C) or `a_invocation` (Python): no import of
its own, and every other per-line step (rules, tracking, decode statistics) costing nothing. The
report shows what is left per unit line for those steps at 1.5 a. CPU time of each child process
(os.wait4), medians.
Results: bench/results/lowerbound.json (full) or lowerbound-smoke.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import generate
from .__main__ import BIN, FLOOR, RESULTS, SHAPES, compile_package, run_header
from .measure import run_pipeline

SOURCE = Path(__file__).resolve().parent / "readfloor.c"
C_MODES = ("next", "message", "invocation", "cursor")
TARGET = 1.5  # issue #13: scan <= 1.5 x the floor


def build_reader(out: Path) -> Path:
    """Compile readfloor.c; raises RuntimeError with the compiler's words when it cannot."""
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "libsystemd"],
        capture_output=True,
        text=True,
        check=False,
    )
    if flags.returncode != 0:
        raise RuntimeError(
            f"pkg-config libsystemd: {flags.stderr.strip()} (apt-get install libsystemd-dev)"
        )
    exe = out / "readfloor"
    cc = subprocess.run(
        [
            "cc",
            "-O2",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-o",
            str(exe),
            str(SOURCE),
            *flags.stdout.split(),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if cc.returncode != 0:
        raise RuntimeError(f"cc readfloor.c failed:\n{cc.stderr}")
    return exe


def _commands(exe: Path, journal: Path, unit: str, work: Path) -> dict[str, list[str]]:
    cmds = {
        "a": [str(BIN / "python"), str(FLOOR), str(journal), unit],
        "a_invocation": [str(BIN / "python"), str(FLOOR), str(journal), unit, "--invocation"],
        "python": [str(BIN / "python"), "-c", "import systemd.journal"],
        "imports": [str(BIN / "python"), "-c", "import sglang_sentinel.cli"],
        "d": [
            str(BIN / "sentinel"),
            "scan",
            "--journal-dir",
            str(journal),
            "--state-dir",
            str(work / "scan-state"),
            "--unit",
            unit,
        ],
    }
    for mode in C_MODES:
        cmds[f"c_{mode}"] = [str(exe), str(journal), unit, mode]
    return cmds


def _run(key: str, argv: list[str], work: Path) -> tuple[float, str]:
    """CPU seconds of one run, and what it printed; a failed run is an error, not a number."""
    if key == "d":
        shutil.rmtree(work / "scan-state", ignore_errors=True)
    out_path = work / f"{key}.out"
    with out_path.open("wb") as f:
        run = run_pipeline([argv], stdout=f)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {run.returncode}")
    return run.cpu_s, out_path.read_text()


def measure(journal: Path, manifest: dict[str, Any], exe: Path, runs: int) -> dict[str, Any]:
    unit = str(manifest["unit"])
    with tempfile.TemporaryDirectory(prefix="sentinel-lowerbound-") as tmp:
        work = Path(tmp)
        cmds = _commands(exe, journal, unit, work)
        cpu: dict[str, list[float]] = {k: [] for k in cmds}
        printed: dict[str, str] = {}
        for _ in range(runs):  # interleaved: drift on a shared machine hits every command alike
            for key, argv in cmds.items():
                seconds, printed[key] = _run(key, argv, work)
                cpu[key].append(seconds)
    # The C reader reads what the floor reads, or its figures mean nothing.
    lines = int(printed["a"].split()[0])
    for key in ("a_invocation", *(f"c_{mode}" for mode in C_MODES)):
        entries = int(printed[key].split()[0])
        if entries != lines:
            raise RuntimeError(f"{key} read {entries} entries, the floor {lines}")
    changes = int(printed["c_invocation"].split()[1])
    if int(printed["a_invocation"].split()[1]) != changes:
        raise RuntimeError("the C and Python readers disagree on the invocation changes")
    med = {k: round(statistics.median(v), 3) for k, v in cpu.items()}
    floor = med["a"]
    # The least a Python scan starts with: the interpreter and systemd.journal, as the floor.
    exact_bound = med["c_invocation"] + med["python"]
    target = TARGET * floor
    return {
        "unit_lines": lines,
        "invocation_changes": changes,
        "cpu_s": med,
        "cpu_s_runs": cpu,
        "over_floor": {k: round(v / floor, 2) for k, v in med.items()},
        "target_s": round(target, 3),
        "exact_bound_s": round(exact_bound, 3),
        "exact_bound_over_floor": round(exact_bound / floor, 2),
        # CPU left, per unit line, for rules, tracking and decode statistics at the target.
        "left_per_line_us": round((target - exact_bound) / lines * 1e6, 3),
        # The same for a Python scan: its exact read alone, against the target.
        "python_left_per_line_us": round((target - med["a_invocation"]) / lines * 1e6, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.lowerbound", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--smoke", action="store_true", help="20k entries, one round")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    entries = 20_000 if args.smoke else 1_000_000
    runs = args.runs or (1 if args.smoke else 5)
    out = args.out or RESULTS / ("lowerbound-smoke.json" if args.smoke else "lowerbound.json")
    load_at_start = os.getloadavg()
    began = time.perf_counter()
    journals: dict[str, Any] = {}
    compile_package()
    with tempfile.TemporaryDirectory(prefix="sentinel-readfloor-") as tmp:
        exe = build_reader(Path(tmp))
        for shape in SHAPES:
            journal, manifest = generate.ensure(entries, shape=shape)
            journals[shape] = measure(journal, manifest, exe, runs)
    doc = {
        **run_header(args.smoke, load_at_start),
        "runs_each": runs,
        "target_over_floor": TARGET,
        "journals": journals,
        "total_seconds": round(time.perf_counter() - began, 1),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(render(doc))
    print(f"written to {out}")
    return 0


def render(doc: dict[str, Any]) -> str:
    rows = [
        ("a", "floor: Python _next() + _get('MESSAGE')"),
        ("a_invocation", "Python: + _SYSTEMD_INVOCATION_ID"),
        ("c_next", "C: sd_journal_next only"),
        ("c_message", "C: + MESSAGE"),
        ("c_invocation", "C: + _SYSTEMD_INVOCATION_ID per line"),
        ("c_cursor", "C: + cursor per line (instead)"),
        ("python", "python + import systemd.journal"),
        ("imports", "python + import sglang_sentinel.cli"),
        ("d", "sentinel scan"),
    ]
    lines = [f"median CPU of {doc['runs_each']} interleaved rounds, seconds (x floor):"]
    header = f"  {'':42}" + "".join(f"{shape:>16}" for shape in doc["journals"])
    lines.append(header)
    for key, label in rows:
        cells = "".join(
            f"{j['cpu_s'][key]:>9.3f} ({j['over_floor'][key]:>4.2f})"
            for j in doc["journals"].values()
        )
        lines.append(f"  {label:42}{cells}")
    for shape, j in doc["journals"].items():
        lines.append(
            f"{shape}: {j['unit_lines']:,} unit lines; exact bound (C invocation + python) "
            f"{j['exact_bound_s']:.3f} s = {j['exact_bound_over_floor']:.2f} x floor; "
            f"target {doc['target_over_floor']} x = {j['target_s']:.3f} s leaves "
            f"{j['left_per_line_us']:.3f} us per line for rules, tracking and decode; "
            f"in Python (its exact read {j['over_floor']['a_invocation']:.2f} x floor) "
            f"{j['python_left_per_line_us']:.3f} us"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
