"""Measure a following `sentinel run`: idle CPU, and journal-to-commit latency vs. a bare Reader.

Run as root (it starts a standalone journald, like the live tests):

    .venv/bin/python bench/measure_daemon.py [--idle-seconds 60] [--samples 300] [--json-out F]

(i) Idle CPU. Two startups of the seed fixture are written and processed first, so the daemon has
state to report; then nothing is logged for `--idle-seconds` and the daemon's utime+stime from
/proc/PID/stat before and after give its share of one core. (A silent `sleep infinity` in another
unit holds a journald stdout stream open: a namespaced journald exits after ~30 s idle.)

(ii) Latency. The stand-in (tests/support/standin_sglang.py) runs in the unit's cgroup, prints a startup,
then `--samples` `Decode batch` lines `--interval-ms` apart, each with a unique gen throughput
(the marker) and records `time.time()` right before each write. Two observers see the same writes:

- the sentinel. Polling /metrics would add the poll's own delay, so the bench takes the time the
  sentinel *commits* the entry instead, using what the daemon already stores, with no debug hook:
  `Pipeline.commit()` -> `StateStore.save_startup()` writes the record (whose `runtime` holds the
  marker as `gen_throughput`) and `updated_at = time.time()` inside the transaction that also
  saves the cursor. A separate process polls SQLite (read-only, WAL, every ~1 ms) and
  records each new (gen_throughput, updated_at) pair. One commit covers a whole wake-up's batch
  and the record shows only its last marker, so marker m counts as committed by the first commit
  whose gen_throughput is >= m (see committed_at). `updated_at` is taken a fraction of a
  millisecond before COMMIT (the comparison and the cursor are saved after it), which flatters
  the sentinel by that much; the poll interval does not enter the number, and a commit the
  poller missed can only make markers look later.
- a bare python-systemd Reader in its own process: `Reader(path=DIR)`, `add_match(_SYSTEMD_UNIT=)`,
  `seek_tail()` + `get_previous()`, then `wait()` / `_next()` / `_get("MESSAGE")`, recording
  `time.time()` when each marker is read. That is the floor any journal follower can reach.

All times are CLOCK_REALTIME of the same host. Report: median, p90, p99, max per observer and the
difference of the medians and p99s (sentinel - bare).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "support"
sys.path.insert(0, str(TESTS))

import journaltools  # noqa: E402  (tests/support/ is not a package)

# A unit name unique to this run: its cgroup and invocation-id symlink are host-wide.
UNIT = journaltools.unique_unit("sglang-bench")
MARKER = re.compile(rb"gen throughput \(token/s\): (\d+\.\d+)")
DECODE_BASE = 10_000.0


def wait_until(check: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)
    return result


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` in seconds (/proc/PID/stat fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(values_s: Sequence[float]) -> dict[str, float | int]:
    ms = [v * 1000 for v in values_s]
    return {
        "n": len(ms),
        "median_ms": round(statistics.median(ms), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "max_ms": round(max(ms), 3),
        "min_ms": round(min(ms), 3),
    }


# -- observer processes (this script re-run with a mode flag) -------------------------------------


def bare_reader(journal_dir: str, unit: str, out: str) -> int:
    """Follow the journal like the simplest possible follower; print marker receive times."""
    from systemd import journal

    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    reader = journal.Reader(path=journal_dir)
    reader.add_match(_SYSTEMD_UNIT=unit)
    reader.seek_tail()
    reader.get_previous()
    with open(out, "w", encoding="ascii") as f:
        f.write("ready\n")
        f.flush()
        while not stop:
            reader.wait(0.5)
            while reader._next():
                t = time.time()
                m = MARKER.search(reader._get("MESSAGE"))
                if m:
                    f.write(f"{m.group(1).decode()}\t{t!r}\n")
                    f.flush()
    return 0


def commit_poller(db: str, out: str) -> int:
    """Record every committed (gen_throughput, updated_at) of the bench unit's startups."""
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    last: dict[str, float] = {}
    with open(out, "w", encoding="ascii") as f:
        f.write("ready\n")
        f.flush()
        while not stop:
            rows = conn.execute(
                "SELECT invocation_id, json_extract(record, '$.runtime.gen_throughput'), updated_at"
                " FROM startups WHERE unit=?",
                (UNIT,),
            ).fetchall()
            for inv, value, updated in rows:
                if value is not None and last.get(inv) != updated:
                    last[inv] = updated
                    f.write(f"{float(value):.2f}\t{updated!r}\n")
                    f.flush()
            time.sleep(0.001)
    return 0


# -- the measurement ----------------------------------------------------------------------------


def committed_at(path: Path, markers: Sequence[str]) -> dict[str, float]:
    """marker -> time of the first observed commit that includes it.

    One commit covers every entry before its cursor: a whole wake-up's batch. The record shows
    only the batch's last marker, so marker m counts as committed by the first commit whose
    gen_throughput is >= m (the markers increase). A commit the poller missed can only make a
    marker look later, never earlier.
    """
    commits = sorted(
        (t, float(v)) for v, t in (line.split("\t") for line in path.read_text().splitlines()[1:])
    )
    out: dict[str, float] = {}
    for m in markers:
        t = next((t for t, v in commits if v >= float(m) and v >= DECODE_BASE), None)
        if t is not None:
            out[m] = float(t)
    return out


def read_pairs(path: Path) -> dict[str, float]:
    """marker -> first time seen, from a `value<TAB>time` file."""
    out: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if "\t" in line:
            value, t = line.split("\t")
            out.setdefault(f"{float(value):.2f}", float(t))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--interval-ms", type=float, default=30.0)
    parser.add_argument("--json-out", type=Path)
    parser.add_argument(
        "--bare-reader", nargs=3, metavar=("DIR", "UNIT", "OUT"), help=argparse.SUPPRESS
    )
    parser.add_argument("--commit-poller", nargs=2, metavar=("DB", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_reader:
        return bare_reader(*args.bare_reader)
    if args.commit_poller:
        return commit_poller(*args.commit_poller)
    if os.geteuid() != 0:
        print("measure_daemon: needs root (standalone journald, cgroups)", file=sys.stderr)
        return 2

    import standin_sglang

    work = Path(f"/tmp/sentinel-bench-{os.getpid()}")
    work.mkdir()
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, **kw)
        procs.append(p)
        return p

    try:
        with journaltools.live_journald() as jd:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            state = work / "state"
            err = (work / "sentinel.stderr").open("wb")
            env = {
                k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "WATCHDOG_"))
            }
            env.pop("SENTINEL_STATE_DIR", None)
            daemon = spawn(
                [
                    sys.executable,
                    "-m",
                    "sglang_sentinel.cli",
                    "run",
                    "--journal-dir",
                    str(jd.journal_dir),
                    "--state-dir",
                    str(state),
                    "--listen",
                    f"127.0.0.1:{port}",
                    "--unit",
                    UNIT,
                ],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )
            wait_until(
                lambda: b"sentinel_started" in (work / "sentinel.stderr").read_bytes(), 30, "start"
            )
            db = state / "sentinel.sqlite3"

            def ready_count() -> int:
                c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
                try:
                    return int(
                        c.execute("SELECT count(*) FROM startups WHERE outcome='ready'").fetchone()[
                            0
                        ]
                    )
                finally:
                    c.close()

            for n in (1, 2):
                standin_sglang.run(jd, n, secrets.token_hex(16), unit=UNIT, delay_ms=2)
            wait_until(lambda: ready_count() == 2, 30, "two ready startups")

            # (i) idle CPU. A journald namespace instance exits after ~30 s without clients; a
            # connected stdout stream that never writes keeps it up without logging anything.
            keepalive = jd.run_in_unit(
                journaltools.unique_unit("sentinel-bench-keepalive"), ["sleep", "infinity"]
            )
            procs.append(keepalive)
            t0, c0 = time.monotonic(), cpu_seconds(daemon.pid)
            time.sleep(args.idle_seconds)  # the measurement window itself
            t1, c1 = time.monotonic(), cpu_seconds(daemon.pid)
            if jd._proc is None or jd._proc.poll() is not None:
                raise RuntimeError("journald exited during the idle window")
            idle = {
                "seconds": round(t1 - t0, 2),
                "cpu_seconds": round(c1 - c0, 3),
                "percent_of_one_core": round(100 * (c1 - c0) / (t1 - t0), 3),
            }

            # (ii) latency, both observers on the same writes
            bare_out, commit_out, writes = (
                work / "bare.tsv",
                work / "commit.tsv",
                work / "writes.tsv",
            )
            me = [sys.executable, str(Path(__file__).resolve())]
            bare = spawn([*me, "--bare-reader", str(jd.journal_dir), UNIT, str(bare_out)])
            poller = spawn([*me, "--commit-poller", str(db), str(commit_out)])
            for path in (bare_out, commit_out):
                wait_until(
                    lambda p=path: p.exists() and p.read_text().startswith("ready"), 10, path.name
                )
            inv = secrets.token_hex(16)
            writer = jd.run_in_unit(
                UNIT,
                [
                    sys.executable,
                    str(TESTS / "standin_sglang.py"),
                    "--startup",
                    "1",
                    "--delay-ms",
                    "2",
                    "--decode",
                    str(args.samples),
                    "--decode-base",
                    str(DECODE_BASE),
                    "--decode-interval-ms",
                    str(args.interval_ms),
                    "--write-times",
                    str(writes),
                ],
                invocation_id=inv,
            )
            procs.append(writer)
            if writer.wait(timeout=120) != 0:
                raise RuntimeError("writer failed")
            last = f"{DECODE_BASE + args.samples - 1:.2f}"
            wait_until(lambda: last in read_pairs(bare_out), 30, "bare reader: last marker")
            wait_until(lambda: last in read_pairs(commit_out), 30, "sentinel: last marker")
            for p in (bare, poller):
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=10)
            sent = {}
            for line in writes.read_text().splitlines():
                i, t = line.split("\t")
                sent[f"{DECODE_BASE + int(i):.2f}"] = float(t)
            seen_bare, seen_commit = read_pairs(bare_out), committed_at(commit_out, list(sent))
            commits = len(commit_out.read_text().splitlines()) - 1
            both = [k for k in sent if k in seen_bare and k in seen_commit]
            lat_bare = [seen_bare[k] - sent[k] for k in both]
            lat_sentinel = [seen_commit[k] - sent[k] for k in both]
            sb, ss = summary(lat_bare), summary(lat_sentinel)
            paired = [seen_commit[k] - seen_bare[k] for k in both]
            result = {
                "idle": idle,
                "latency": {
                    "writes": len(sent),
                    "paired_samples": len(both),
                    "missed_by_bare_reader": sum(1 for k in sent if k not in seen_bare),
                    "missed_by_commit_poller": sum(1 for k in sent if k not in seen_commit),
                    "sentinel_commits_observed": commits,
                    "interval_ms": args.interval_ms,
                    "bare_reader": sb,
                    "sentinel_commit": ss,
                    "difference_median_ms": round(
                        float(ss["median_ms"]) - float(sb["median_ms"]), 3
                    ),
                    "difference_p99_ms": round(float(ss["p99_ms"]) - float(sb["p99_ms"]), 3),
                    # Per write: sentinel commit time minus bare receive time (same wake-up).
                    "paired_difference": summary(paired),
                },
                "host": {"cpus": os.cpu_count(), "loadavg": os.getloadavg()},
            }
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=10)
            err.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)

    print(json.dumps(result, indent=2))
    lat = result["latency"]
    print(f"\nidle sentinel: {idle['percent_of_one_core']} % of one core over {idle['seconds']} s")
    print(f"latency, {lat['paired_samples']} writes {args.interval_ms:g} ms apart (ms):")
    print(f"  {'observer':<18}{'median':>9}{'p90':>9}{'p99':>9}{'max':>9}")
    for name, s in (("bare Reader", sb), ("sentinel commit", ss)):
        print(f"  {name:<18}{s['median_ms']:>9}{s['p90_ms']:>9}{s['p99_ms']:>9}{s['max_ms']:>9}")
    print(
        f"  {'difference':<18}{lat['difference_median_ms']:>9}{'':>9}{lat['difference_p99_ms']:>9}"
    )
    pd = lat["paired_difference"]
    print(f"  per-write sentinel - bare: median {pd['median_ms']}, p99 {pd['p99_ms']}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
