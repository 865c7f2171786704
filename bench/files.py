"""`make bench` part: `sentinel scan` of container log files against the greps it replaces.

    python -m bench.files            # 1M lines, 3 interleaved rounds
    python -m bench.files --smoke    # 20k lines, one round

The logs hold the service lines of bench/generate.py's "single" journal (the same startups,
decode, prefill and access lines; a line past 16 KiB in pieces as Docker's copier and containerd
split it, though generate.py's server_args lines, ~10 KB, come whole), written twice: as moby's json-file driver writes them
(`<root>/containers/<id>/<id>-json.log`, one file across the restarts) and as the kubelet
keeps CRI logs (`<root>/<ns>_<pod>_<uid>/<container>/<N>.log`, one file per start). Each round
runs, one after the other as separate processes:

    scan_json       sentinel scan --container (the C line reader when it is built)
    scan_json_py    the same with SENTINEL_READER=python (every line cut apart in Python)
    jq_grep         jq -r .log FILE | grep -E PATTERN
    scan_cri        sentinel scan --pod
    cut_grep        cut -d' ' -f4- FILES | grep -E PATTERN
    sed_grep        sed 's/^[^ ]* [^ ]* [^ ]* //' FILES | grep -E PATTERN

The pattern is the startup rules' required literals (bench/__main__.py's part b), so grep
finds the lines the rules would look at and parses nothing. Figures are medians of wall and CPU
(os.wait4, summed over a pipeline's processes); the two scans of the json-file log must print
the same report. Then (not in --smoke) the live part: `sentinel run` following a json-file log
written and rotated at --live-rate lines/s, and, as root, the journal's live part at the same
rate (bench/live_files.py, bench/live.py), so that the two lags are measured alike.
Results: bench/results/files.json (smoke: files-smoke.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import generate
from .__main__ import startup_pattern
from .measure import Run, run_pipeline

RESULTS = Path(__file__).resolve().parent / "results"
CID = "b" * 64
POD_DIR = "llm_sglang-0_0c7e4b9a-1f2d-4e6a-9b8c-3d5e7f9a1b2c"
PIECE = 16 * 1024
# generate.py's "single" shape: 75 % of its entries are the SGLang unit's, all but 5 a start
# of them service lines.
SERVICE_SHARE = 0.75


def _time(us: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(us // 1_000_000)) + (
        f".{us % 1_000_000:06d}000Z"
    )


def write_logs(root: Path, lines: int, piece: int = PIECE) -> tuple[Path, list[Path], int]:
    """About `lines` service lines as a json-file log and as CRI logs under `root`, a line
    longer than `piece` in pieces; returns the json-file, the CRI files and the records
    written."""
    cdir = root / "docker" / "containers" / CID
    cdir.mkdir(parents=True)
    (cdir / "config.v2.json").write_text(json.dumps({"ID": CID, "Name": "/sglang"}))
    json_path = cdir / f"{CID}-json.log"
    pods = root / "pods" / POD_DIR / "server"
    pods.mkdir(parents=True)
    cri_paths: list[Path] = []
    cri = None
    written = 0
    entries = round(lines / SERVICE_SHARE)
    with open(json_path, "w", encoding="utf-8") as out:
        for kind, entry in generate.generate_entries(entries, shape="single"):
            if kind.startswith("other:"):
                continue
            head, _, message = entry.rpartition(b"MESSAGE=")
            if kind == "pid1":
                if message.startswith(b"Starting "):  # a new start: the kubelet's next N.log
                    if cri is not None:
                        cri.close()
                    cri_paths.append(pods / f"{len(cri_paths)}.log")
                    # One file a start, closed when the next start opens its own.
                    cri = open(cri_paths[-1], "w", encoding="utf-8")  # noqa: SIM115
                continue
            assert cri is not None
            stamp = _time(int(head.split(b"\n", 1)[0].split(b"=", 1)[1]))
            text = message.rstrip(b"\n").decode("utf-8", "replace")
            for at in range(0, max(len(text), 1), piece):
                part = text[at : at + piece]
                last = at + piece >= len(text)
                record = {"log": part + ("\n" if last else ""), "stream": "stderr", "time": stamp}
                out.write(json.dumps(record, separators=(",", ":")) + "\n")  # as moby writes it
                cri.write(f"{stamp} stderr {'F' if last else 'P'} {part}\n")
                written += 1
    if cri is not None:
        cri.close()
    return json_path, cri_paths, written


def _scan(work: Path, name: str, args: list[str], env: dict[str, str] | None = None) -> Run:
    state = work / f"state-{name}"
    shutil.rmtree(state, ignore_errors=True)
    argv = [sys.executable, "-m", "sglang_sentinel.cli", "scan", *args]
    argv += ["--journal-dir", str(work / "empty-journal"), "--state-dir", str(state), "--json"]
    with open(work / f"{name}.out", "wb") as out:
        return run_pipeline([argv], stdout=out, env=env)


def _grep(work: Path, name: str, first: list[str], pattern: str) -> Run:
    with open(work / f"{name}.out", "wb") as out:
        return run_pipeline([first, ["grep", "-E", pattern]], stdout=out)


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.files")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--live-seconds", type=float, help="the live parts' length (0: none)")
    parser.add_argument("--live-rate", type=int, default=20_000)
    opts = parser.parse_args(args)
    live_seconds = opts.live_seconds if opts.live_seconds is not None else (0 if opts.smoke else 30)
    lines, rounds = (20_000, 1) if opts.smoke else (1_000_000, 3)
    jq = shutil.which("jq")
    pattern = startup_pattern()
    python_env = {**os.environ, "SENTINEL_READER": "python"}
    with tempfile.TemporaryDirectory(prefix="bench-files-") as tmp:
        work = Path(tmp)
        json_log, cri_logs, written = write_logs(work, lines)
        (work / "empty-journal").mkdir()
        cri = [str(p) for p in cri_logs]
        commands: dict[str, Any] = {
            "scan_json": lambda: _scan(
                work, "scan_json", ["--container", "sglang", "--docker-root", str(work / "docker")]
            ),
            "scan_json_py": lambda: _scan(
                work,
                "scan_json_py",
                ["--container", "sglang", "--docker-root", str(work / "docker")],
                python_env,
            ),
            "scan_cri": lambda: _scan(
                work,
                "scan_cri",
                ["--pod", "llm/sglang-0/server", "--pod-logs", str(work / "pods")],
            ),
            "cut_grep": lambda: _grep(work, "cut_grep", ["cut", "-d", " ", "-f4-", *cri], pattern),
            "sed_grep": lambda: _grep(
                work, "sed_grep", ["sed", "s/^[^ ]* [^ ]* [^ ]* //", *cri], pattern
            ),
        }
        if jq is not None:
            commands["jq_grep"] = lambda: _grep(
                work, "jq_grep", [jq, "-r", ".log", str(json_log)], pattern
            )
        runs: dict[str, list[Run]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, command in commands.items():
                run = command()
                if run.returncode != 0:
                    print(f"bench.files: {name} exited {run.returncode}", file=sys.stderr)
                    return 1
                runs[name].append(run)
        same = (work / "scan_json.out").read_bytes() == (work / "scan_json_py.out").read_bytes()
        grep_lines = {
            name: (work / f"{name}.out").read_bytes().count(b"\n")
            for name in ("jq_grep", "cut_grep", "sed_grep")
            if name in commands
        }
        result: dict[str, Any] = {
            "lines": written,
            "json_file_bytes": json_log.stat().st_size,
            "cri_files": len(cri_logs),
            "cri_bytes": sum(p.stat().st_size for p in cri_logs),
            "rounds": rounds,
            "load_average": os.getloadavg(),
            "wall_s": {
                k: round(statistics.median(r.wall_s for r in v), 3) for k, v in runs.items()
            },
            "cpu_s": {k: round(statistics.median(r.cpu_s for r in v), 3) for k, v in runs.items()},
            "scans_identical_c_and_python": same,
            "grep_lines": grep_lines,
        }
        if live_seconds > 0:
            from .live import measure_live
            from .live_files import measure_live_files

            live = {"files": measure_live_files(opts.live_rate, live_seconds, work)}
            if os.geteuid() == 0:
                live["journal"] = measure_live(opts.live_rate, live_seconds, work)
            for part in live.values():
                part.pop("samples", None)
            result["live"] = live
    wall, cpu = result["wall_s"], result["cpu_s"]
    ratios = {}
    for scan, grep in (
        ("scan_json", "jq_grep"),
        ("scan_cri", "cut_grep"),
        ("scan_cri", "sed_grep"),
    ):
        if grep in wall:
            ratios[f"{scan}_over_{grep}"] = {
                "wall": round(wall[scan] / wall[grep], 2),
                "cpu": round(cpu[scan] / cpu[grep], 2),
            }
    ratios["scan_json_py_over_scan_json"] = {
        "wall": round(wall["scan_json_py"] / wall["scan_json"], 2),
        "cpu": round(cpu["scan_json_py"] / cpu["scan_json"], 2),
    }
    result["ratios"] = ratios
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("files-smoke.json" if opts.smoke else "files.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
