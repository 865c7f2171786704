"""Part e: `sentinel run` following a live journald that an SGLang-like writer fills at a fixed rate.

The writer runs as the unit (tests/support/journaltools.LiveJournald.run_in_unit: its cgroup, a journald
stdout stream, an invocation id), logs one complete startup and then steady-state batch and access
lines at RATE lines/s. The namespace's journald.conf turns rate limiting off (the default 10000
per 30 s would drop most of them); the harness checks that every line arrived.

    python -m bench.live writer RATE SECONDS COUNT_FILE    (run by the harness, inside the unit)
"""

from __future__ import annotations

import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import generate
from .floor import read_floor
from .measure import proc_cpu_seconds

REPO = Path(__file__).resolve().parent.parent
_JOURNALD_CONF = "[Journal]\nRateLimitIntervalSec=0\nRateLimitBurst=0\n"


def write_paced(rate: int, seconds: float, emit: Callable[[list[str]], None]) -> tuple[int, float]:
    """Emit a startup, then `rate` steady-state lines per second for `seconds`, in 10 ms slices.

    Returns the lines emitted and when (time.monotonic()) the steady state began.
    """
    version = generate.VERSIONS[1]
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    first = [generate._prefix(now, rank) + body for rank, body in generate.startup_lines(version)]
    emit(first)
    written = len(first)
    steady = generate.SteadyState(version.name, random.Random(7))
    started = time.monotonic()
    tick = 0.01  # write in 10 ms slices: smooth enough, and few syscalls
    while True:
        elapsed = time.monotonic() - started
        # Every line due by `seconds` is written, also when the machine stalled past it (a
        # stall of a second made the loop end with most of a short run's lines unwritten).
        due = int(min(elapsed + tick, seconds) * rate)
        ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        chunk = []
        for i in range(due - (written - len(first))):
            roll = i % 20
            if roll < 11:
                chunk.append(f"[{ts} TP0] {steady.decode()[0]}")
            elif roll < 15:
                chunk.append(f"[{ts} TP0] {steady.prefill()}")
            else:
                chunk.append(f"[{ts}] {steady.access()}")
        if chunk:
            emit(chunk)
            written += len(chunk)
        if elapsed >= seconds:
            break
        time.sleep(max(0.0, started + elapsed + tick - time.monotonic()))
    return written, started


def writer(rate: int, seconds: float, count_file: Path) -> None:
    """Log a startup, then `rate` steady-state lines per second for `seconds`; record the count."""
    out = sys.stdout.buffer
    flush = False  # the startup stays buffered until the first steady slice, as it always did

    def emit(texts: list[str]) -> None:
        nonlocal flush
        out.write(("\n".join(texts) + "\n").encode())
        if flush:
            out.flush()
        flush = True

    written, started = write_paced(rate, seconds, emit)
    out.flush()
    count_file.write_text(f"{written} {time.monotonic() - started:.3f}\n")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> dict[str, float]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    wanted = (
        "sglang_sentinel_journal_last_entry_timestamp_seconds",
        "sglang_sentinel_journal_entries_read_total",
        "sglang_sentinel_processing_lag_seconds",
    )
    out: dict[str, float] = {}
    for line in body.splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            out[name] = float(value)
    return out


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wait_up(sentinel: subprocess.Popen[bytes], port: int, err_name: str) -> None:
    """Until the sentinel's metrics answer (20 s at most, or until it exits)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            _scrape(port)
            break
        except OSError:
            if sentinel.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sentinel run did not come up; see {err_name}") from None
            time.sleep(0.05)


def sample_lag(
    writer_proc: subprocess.Popen[bytes], port: int, t0: float, seconds: float, rate: int
) -> list[dict[str, Any]]:
    """A scrape every 0.5 s while the writer runs: lag, backlog and entries read."""
    samples: list[dict[str, Any]] = []
    while writer_proc.poll() is None:
        time.sleep(0.5)
        now = time.time()
        m = _scrape(port)
        last = m.get("sglang_sentinel_journal_last_entry_timestamp_seconds")
        read = m.get("sglang_sentinel_journal_entries_read_total", 0.0)
        expected = min(now - t0, seconds) * rate
        samples.append(
            {
                "t": round(now - t0, 3),
                "lag_s": round(now - last, 4) if last else None,
                "backlog_entries": round(max(0.0, expected - read)),
                "read": read,
            }
        )
    return samples


def wait_read(port: int, written: int) -> float:
    """Entries read once the sentinel has read `written` of them (or after 60 s)."""
    deadline = time.monotonic() + 60
    read = 0.0
    while time.monotonic() < deadline:
        read = _scrape(port).get("sglang_sentinel_journal_entries_read_total", 0.0)
        if read >= written:
            break
        time.sleep(0.05)
    return read


def lag_stats(samples: list[dict[str, Any]]) -> dict[str, float | None]:
    """p50, p95 and max of the lag while the writer ran at full rate.

    The samples of the first 2 s are left out (the first second is the startup burst), unless
    there are no others.
    """
    lags = [s["lag_s"] for s in samples if s["lag_s"] is not None]
    steady = [s["lag_s"] for s in samples if s["lag_s"] is not None and s["t"] >= 2.0]
    return {
        "lag_p50_s": _percentile(steady or lags, 0.5),
        "lag_p95_s": _percentile(steady or lags, 0.95),
        "lag_max_s": max(steady or lags) if lags else None,
    }


def stop(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL after 15 s."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measure_live(rate: int, seconds: float, workdir: Path) -> dict[str, Any]:
    """Run the writer and a following `sentinel run`; lag and CPU of the sentinel."""
    if os.geteuid() != 0:
        return {"skipped": "needs root (a standalone journald in its own namespace)"}
    sys.path.insert(0, str(REPO / "tests" / "support"))
    import journaltools

    # A unit name unique to this run: its cgroup and invocation-id symlink are host-wide.
    live_unit = journaltools.unique_unit("sglang-live")
    namespace = f"sentinel-bench-{journaltools.RUN_ID}"
    conf = Path(f"/etc/systemd/journald@{namespace}.conf")
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(_JOURNALD_CONF)
    daemon = journaltools.LiveJournald(namespace)
    sentinel: subprocess.Popen[bytes] | None = None
    try:
        daemon.start()
        port = _free_port()
        state = workdir / "live-state"
        err = (workdir / "live-sentinel.stderr").open("wb")
        sentinel = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("sentinel")),
                "run",
                "--journal-dir",
                str(daemon.journal_dir),
                "--state-dir",
                str(state),
                "--unit",
                live_unit,
                "--listen",
                f"127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        wait_up(sentinel, port, err.name)
        count_file = workdir / "live-writer.count"
        count_file.unlink(missing_ok=True)
        cpu0 = proc_cpu_seconds(sentinel.pid) or 0.0
        jcpu0 = proc_cpu_seconds(daemon.pid) or 0.0
        t0 = time.time()
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        writer_proc = daemon.run_in_unit(
            live_unit,
            [
                sys.executable,
                "-m",
                "bench.live",
                "writer",
                str(rate),
                str(seconds),
                str(count_file),
            ],
            invocation_id=secrets.token_hex(16),
            env=env,
        )
        samples = sample_lag(writer_proc, port, t0, seconds, rate)
        t_writer_done = time.time()
        cpu_during = (proc_cpu_seconds(sentinel.pid) or 0.0) - cpu0
        journald_cpu = (proc_cpu_seconds(daemon.pid) or 0.0) - jcpu0
        written_text = count_file.read_text().split() if count_file.exists() else ["0", "0"]
        written = int(written_text[0])
        # Catch-up: from the writer's end until the sentinel has read every line written.
        read = wait_read(port, written)
        catch_up = time.time() - t_writer_done
        # And every line arrived (journald's rate limit is off; nothing may be dropped).
        in_journal = read_floor(str(daemon.journal_dir), live_unit)
        wall = t_writer_done - t0
        return {
            "rate_per_s": rate,
            "seconds": seconds,
            "lines_written": written,
            "writer_seconds": float(written_text[1]),
            "entries_in_journal": in_journal,
            "all_arrived": in_journal == written,
            "entries_read_by_sentinel": int(read),
            **lag_stats(samples),
            "catch_up_after_writer_s": round(catch_up, 3),
            "sentinel_cpu_s": round(cpu_during, 2),
            "sentinel_cpu_percent": round(100 * cpu_during / wall, 1) if wall else None,
            "journald_cpu_s": round(journald_cpu, 2),
            "samples": samples,
        }
    finally:
        stop(sentinel)
        daemon.stop()
        conf.unlink(missing_ok=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "writer":
        writer(int(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4]))
    else:
        print(
            json.dumps(
                measure_live(int(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])), indent=1
            )
        )
