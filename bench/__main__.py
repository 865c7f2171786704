"""`make bench`: sentinel scan against the journal-read floor, journalctl | grep and mtail.

    python -m bench            # full: 1M entries, 5 interleaved runs each, 60 s live at 20k/s
    python -m bench --smoke    # CI: 20k entries, one run, no live part (well under a minute)

Every measured command runs as its own subprocess (see measure.py), on three cached journals of
different shapes (generate.py: "single", "mixed", and "longcmd": the mixed interleaving with a
long, compressed _CMDLINE on every SGLang line), interleaved a, b, c, d per journal per round
so that drift on a shared machine hits all of them alike; the tables show medians. The package's
bytecode is compiled first, as an install has it. Results go to
bench/results/latest.json (full) or smoke.json: the single-shape journal at the top level, every
journal under "journals".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import generate
from .measure import Run, run_pipeline, run_steps

REPO = Path(__file__).resolve().parent.parent
# The running venv's bin/ (.venv, or one of make test-pythons' venvs).
BIN = Path(sys.executable).parent
RESULTS = Path(__file__).resolve().parent / "results"
MTAIL_PROGS = Path(__file__).resolve().parent / "mtail"
FLOOR = Path(__file__).resolve().parent / "floor.py"

SHAPES = ("single", "mixed", "longcmd")
METHODS = {
    "a": "floor: Reader._next()/_get('MESSAGE'), one match",
    "b": "journalctl -u -o cat | grep -E",
    "c": "journalctl -u -o cat > file; mtail --one_shot",
    "d": "sentinel scan (default rules, fresh state)",
}
# Issue 23's targets, on every journal: judged on the median of the per-round CPU ratios (each
# round's runs ran back to back, so a ratio shares its round's load; CPU time shrugs off the
# other jobs of a shared machine better than wall time).
TARGETS = {
    "d_over_a_max": 1.6,
    "d_over_b_max": 0.75,
    "c_over_d_min": 4.0,
    "rss_growth_max_mb": 10.0,
    "live_lag_max_s": 1.0,
}


def startup_pattern() -> str:
    """The startup rules' required literals as one ERE: what `grep` looks for in part b."""
    sys.path.insert(0, str(REPO))
    from sglang_sentinel.rules import default_rules_dir, load_rules

    rules = load_rules([default_rules_dir()])
    literals = sorted({r.contains for r in rules.rules if r.scope == "startup"})
    return "|".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", lit) for lit in literals)


def commands(journal: Path, unit: str, work: Path, pattern: str) -> dict[str, Any]:
    jctl = ["journalctl", "--no-pager", "-D", str(journal), "-u", unit, "-o", "cat"]
    return {
        "a": lambda: run_pipeline([[str(BIN / "python"), str(FLOOR), str(journal), unit]]),
        "b": lambda: _to_file(work / "grep.out", [jctl, ["grep", "-E", pattern]]),
        "c": lambda: run_steps(
            [
                (jctl, work / "unit.txt"),
                (
                    [
                        "mtail",
                        "--one_shot",
                        "--one_shot_format",
                        "json",
                        "--progs",
                        str(MTAIL_PROGS),
                        "--logs",
                        str(work / "unit.txt"),
                        "--logtostderr",
                        "--port",
                        "0",
                    ],
                    work / "mtail.json",
                ),
            ]
        ),
        "d": lambda: _scan(journal, unit, work),
    }


def _to_file(path: Path, pipeline: list[list[str]]) -> Run:
    # Never /dev/null: GNU grep stops at the first match when its output is /dev/null.
    with path.open("wb") as f:
        return run_pipeline(pipeline, stdout=f)


def _scan(journal: Path, unit: str, work: Path) -> Run:
    state = work / "scan-state"
    shutil.rmtree(state, ignore_errors=True)
    with (work / "scan.out").open("wb") as f:
        run = run_pipeline(
            [
                [
                    str(BIN / "sentinel"),
                    "scan",
                    "--journal-dir",
                    str(journal),
                    "--state-dir",
                    str(state),
                    "--unit",
                    unit,
                ]
            ],
            stdout=f,
        )
    return run


def _summary(runs: list[Run], entries: int) -> dict[str, Any]:
    wall = statistics.median(r.wall_s for r in runs)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(statistics.median(r.cpu_s for r in runs), 3),
        "maxrss_mb": round(statistics.median(r.maxrss_kb for r in runs) / 1024, 1),
        "anon_peak_mb": round(statistics.median(r.anon_peak_kb for r in runs) / 1024, 1),
        "entries_per_s": round(entries / wall),
        "runs_wall_s": [round(r.wall_s, 3) for r in runs],
        "returncodes": sorted({r.returncode for r in runs}),
    }


def check_outputs(work: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """The compared tools must have found the same facts (else the timing compares nothing)."""
    latest = manifest["startups"][-1]
    facts: dict[str, Any] = {}
    mtail = json.loads((work / "mtail.json").read_text())

    def gauge(name: str) -> float | None:
        series = mtail.get(name)
        return series[0]["LabelValues"][0]["Value"]["Value"] if series else None

    facts["mtail_max_running_requests"] = gauge("sglang_max_running_requests")
    facts["mtail_kv_cache_tokens"] = gauge("sglang_kv_cache_tokens")
    facts["expected_max_running_requests"] = latest["max_running_requests"]
    facts["expected_kv_cache_tokens"] = latest["kv_cache_tokens"]
    scan = (work / "scan.out").read_text()
    mrr = re.findall(r"max_running_requests=(\d+)", scan)
    facts["sentinel_max_running_requests"] = [int(x) for x in mrr]
    facts["grep_lines"] = sum(1 for _ in (work / "grep.out").open("rb"))
    facts["agree"] = (
        facts["mtail_max_running_requests"] == latest["max_running_requests"]
        and facts["mtail_kv_cache_tokens"] == latest["kv_cache_tokens"]
        and facts["sentinel_max_running_requests"]
        == [s["max_running_requests"] for s in manifest["startups"]]
    )
    return facts


def environment(load_at_start: tuple[float, float, float]) -> dict[str, Any]:
    def version(argv: list[str]) -> str:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            return (out.stdout or out.stderr).splitlines()[0].strip()
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "unknown"

    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "systemd": version(["journalctl", "--version"]),
        "mtail": version(["mtail", "--version"]),
        "grep": version(["grep", "--version"]),
        "loadavg_at_start": load_at_start,
    }


def compile_package() -> None:
    """Compile the package's bytecode, as an install has it (pip compiles at install time):
    under PYTHONDONTWRITEBYTECODE every measured start would compile it again (~0.07 s)."""
    subprocess.run(
        [str(BIN / "python"), "-m", "compileall", "-q", str(REPO / "sglang_sentinel")], check=True
    )


def run_header(smoke: bool, load_at_start: tuple[float, float, float]) -> dict[str, Any]:
    """When, which mode, on what: the head of every results file."""
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mode": "smoke" if smoke else "full",
        "environment": environment(load_at_start),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="20k entries, one run, no live part")
    ap.add_argument("--entries", type=int)
    ap.add_argument("--runs", type=int)
    ap.add_argument("--live-seconds", type=float)
    ap.add_argument("--live-rate", type=int, default=20_000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    entries = args.entries or (20_000 if args.smoke else 1_000_000)
    runs = args.runs or (1 if args.smoke else 5)
    live_seconds = args.live_seconds if args.live_seconds is not None else (0 if args.smoke else 60)
    out = args.out or RESULTS / ("smoke.json" if args.smoke else "latest.json")
    small = max(1000, entries // 10)
    began = time.perf_counter()
    load_at_start = os.getloadavg()

    compile_package()
    print(f"journals: {entries} entries (and {small} for the RSS comparison) ...", flush=True)
    built = {shape: generate.ensure(entries, shape=shape) for shape in SHAPES}
    built_small = {shape: generate.ensure(small, shape=shape) for shape in SHAPES}
    pattern = startup_pattern()
    results: dict[str, dict[str, list[Run]]] = {shape: {k: [] for k in METHODS} for shape in SHAPES}
    small_scans: dict[str, list[Run]] = {shape: [] for shape in SHAPES}
    checks: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="sentinel-bench-") as tmp:
        work = Path(tmp)
        cmds = {}
        small_scan = {}
        for shape in SHAPES:
            (work / shape / "small").mkdir(parents=True)
            journal, manifest = built[shape]
            cmds[shape] = commands(journal, str(manifest["unit"]), work / shape, pattern)
            small_journal, small_manifest = built_small[shape]
            small_scan[shape] = commands(
                small_journal, str(small_manifest["unit"]), work / shape / "small", pattern
            )["d"]
        for i in range(runs):
            for shape in SHAPES:
                for key in METHODS:
                    run = cmds[shape][key]()
                    results[shape][key].append(run)
                    print(
                        f"  run {i + 1}/{runs} {shape:6} {key}: {run.wall_s:7.2f} s wall",
                        flush=True,
                    )
                small_scans[shape].append(small_scan[shape]())
        for shape in SHAPES:
            checks[shape] = check_outputs(work / shape, built[shape][1])
        live: dict[str, Any] = {"skipped": "smoke run"} if live_seconds <= 0 else {}
        if live_seconds > 0:
            from .live import measure_live

            print(f"live: {args.live_rate} lines/s for {live_seconds:.0f} s ...", flush=True)
            live = measure_live(args.live_rate, live_seconds, work)

    journals = {
        shape: _journal_doc(
            built[shape][1], built_small[shape][1], results[shape], small_scans[shape]
        )
        for shape in SHAPES
    }
    for shape in SHAPES:
        journals[shape]["checks"] = checks[shape]
        journals[shape]["verdict"] = _verdict(journals[shape], live)
    single = journals["single"]
    doc = {
        **run_header(args.smoke, load_at_start),
        **single,
        "journals": journals,
        "runs_each": runs,
        "methods": METHODS,
        "live": live,
        "targets": TARGETS,
        "grep_pattern": pattern,
        "total_seconds": round(time.perf_counter() - began, 1),
    }
    doc["environment"]["loadavg_at_end"] = os.getloadavg()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    for shape in SHAPES:
        print_table(doc, shape)
    print_live(doc)
    print(f"total {doc['total_seconds']} s")
    print(f"wrote {out.relative_to(REPO) if out.is_relative_to(REPO) else out}")
    status = 0
    for shape in SHAPES:
        failed = [k for k, v in journals[shape]["verdict"].items() if v is False]
        if not journals[shape]["checks"]["agree"]:
            print(f"ERROR: the tools disagree on the facts of the {shape} journal", file=sys.stderr)
            status = 1
        if failed:
            print(f"{shape}: targets missed: {', '.join(failed)}")
    return status


def _journal_doc(
    manifest: dict[str, Any],
    small_manifest: dict[str, Any],
    runs: dict[str, list[Run]],
    small_scans: list[Run],
) -> dict[str, Any]:
    summary = {k: _summary(v, int(manifest["unit_entries"])) for k, v in runs.items()}
    small_summary = _summary(small_scans, int(small_manifest["unit_entries"]))
    a, b, c, d = (summary[k]["wall_s"] for k in "abcd")
    ratios = {"d/a": round(d / a, 2), "d/b": round(d / b, 2), "d/c": round(d / c, 2)}
    # CPU time (user + system of every process of a method) shrugs off a loaded machine better
    # than wall time; b and c run two processes, so their CPU is the sum of both.
    ca, cb, cc, cd = (summary[k]["cpu_s"] for k in "abcd")
    ratios["cpu d/a"] = round(cd / ca, 2)
    ratios["cpu d/b"] = round(cd / cb, 2)
    ratios["cpu d/c"] = round(cd / cc, 2)
    # Per round: each round's four runs ran back to back, so their ratios share its load.
    rounds = list(zip(*(runs[k] for k in "abcd"), strict=True))
    ratios["d/a_rounds"] = [round(rd.wall_s / ra.wall_s, 2) for ra, _, _, rd in rounds]
    ratios["d/b_rounds"] = [round(rd.wall_s / rb.wall_s, 2) for _, rb, _, rd in rounds]
    ratios["c/d_rounds"] = [round(rc.wall_s / rd.wall_s, 2) for _, _, rc, rd in rounds]
    ratios["cpu d/a_rounds"] = [round(rd.cpu_s / ra.cpu_s, 2) for ra, _, _, rd in rounds]
    ratios["cpu d/b_rounds"] = [round(rd.cpu_s / rb.cpu_s, 2) for _, rb, _, rd in rounds]
    ratios["cpu c/d_rounds"] = [round(rc.cpu_s / rd.cpu_s, 2) for _, _, rc, rd in rounds]
    for key in ("cpu d/a", "cpu d/b", "cpu c/d"):
        ratios[key + " paired"] = round(statistics.median(ratios[key + "_rounds"]), 2)
    rss = {
        "scan_small_entries": small_manifest["entries"],
        "scan_large_entries": manifest["entries"],
        "maxrss_small_mb": small_summary["maxrss_mb"],
        "maxrss_large_mb": summary["d"]["maxrss_mb"],
        "maxrss_growth_mb": round(summary["d"]["maxrss_mb"] - small_summary["maxrss_mb"], 1),
        "anon_small_mb": small_summary["anon_peak_mb"],
        "anon_large_mb": summary["d"]["anon_peak_mb"],
        "anon_growth_mb": round(summary["d"]["anon_peak_mb"] - small_summary["anon_peak_mb"], 1),
        "floor_maxrss_mb": summary["a"]["maxrss_mb"],
    }
    return {
        "journal": {
            k: manifest.get(k)
            for k in (
                "shape",
                "entries",
                "unit_entries",
                "other_entries",
                "files",
                "bytes",
                "kinds",
            )
        },
        "results": summary,
        "ratios": ratios,
        "rss": rss,
    }


def _verdict(journal: dict[str, Any], live: dict[str, Any]) -> dict[str, bool | None]:
    ratios, rss = journal["ratios"], journal["rss"]
    return {
        "d_at_most_1.6x_a": ratios["cpu d/a paired"] <= TARGETS["d_over_a_max"],
        "d_at_most_0.75x_b": ratios["cpu d/b paired"] <= TARGETS["d_over_b_max"],
        "d_4x_faster_than_c": ratios["cpu c/d paired"] >= TARGETS["c_over_d_min"],
        "rss_growth_under_10mb": rss["anon_growth_mb"] < TARGETS["rss_growth_max_mb"],
        "live_lag_under_1s": (
            live.get("lag_max_s") is not None and live["lag_max_s"] < TARGETS["live_lag_max_s"]
        )
        if "skipped" not in live
        else None,
        "outputs_agree": journal["checks"]["agree"],
    }


def print_table(doc: dict[str, Any], shape: str) -> None:
    journal = doc["journals"][shape]
    res = journal["results"]
    j = journal["journal"]
    print()
    print(
        f"{shape}: {j['entries']} entries ({j['unit_entries']} of the unit) in {len(j['files'])} "
        f"files, {j['bytes'] / 2**20:.0f} MiB; median of {doc['runs_each']} interleaved run(s)"
    )
    header = f"{'':4}{'method':50} {'entries/s':>10} {'wall s':>8} {'CPU s':>8} {'maxRSS MB':>10} {'anon MB':>8}"
    print(header)
    print("-" * len(header))
    for key, name in doc["methods"].items():
        r = res[key]
        print(
            f"{key:4}{name:50} {r['entries_per_s']:>10,} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} "
            f"{r['maxrss_mb']:>10.1f} {r['anon_peak_mb']:>8.1f}"
        )
    r = journal["ratios"]
    rss = journal["rss"]
    print(
        f"ratios (wall): d/a {r['d/a']}  d/b {r['d/b']}  d/c {r['d/c']}  (c is {1 / r['d/c']:.1f}x d)"
    )
    print(f"  per round: d/a {r['d/a_rounds']}  d/b {r['d/b_rounds']}  c/d {r['c/d_rounds']}")
    print(f"  CPU time: d/a {r['cpu d/a']}  d/b {r['cpu d/b']}  c/d {round(1 / r['cpu d/c'], 2)}")
    print(
        f"  CPU, median of the rounds' ratios (the targets'): d/a {r['cpu d/a paired']}  "
        f"d/b {r['cpu d/b paired']}  c/d {r['cpu c/d paired']}"
    )
    print(
        f"scan RSS {rss['scan_small_entries']:,} -> {rss['scan_large_entries']:,} entries: maxRSS "
        f"{rss['maxrss_small_mb']} -> {rss['maxrss_large_mb']} MB, anon {rss['anon_small_mb']} -> "
        f"{rss['anon_large_mb']} MB (+{rss['anon_growth_mb']} MB)"
    )
    print(
        "targets: "
        + ", ".join(
            f"{k}={'yes' if v else ('n/a' if v is None else 'NO')}"
            for k, v in journal["verdict"].items()
        )
    )


def print_live(doc: dict[str, Any]) -> None:
    live = doc["live"]
    if "skipped" in live:
        print(f"e   live: skipped ({live['skipped']})")
    else:
        print(
            f"e   live sentinel run at {live['rate_per_s']:,}/s for {live['seconds']:.0f} s: lag p50 "
            f"{live['lag_p50_s']} s, p95 {live['lag_p95_s']} s, max {live['lag_max_s']} s; CPU "
            f"{live['sentinel_cpu_s']} s ({live['sentinel_cpu_percent']} %); "
            f"{live['entries_in_journal']:,}/{live['lines_written']:,} lines arrived"
        )
    env = doc["environment"]
    print(f"load average at start {env['loadavg_at_start']}, at end {env['loadavg_at_end']}")


if __name__ == "__main__":
    sys.exit(main())
