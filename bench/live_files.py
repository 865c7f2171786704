"""The live part for a file source: `sentinel run` following a json-file log an SGLang-like
writer fills at a fixed rate, measured as bench/live.py measures the journal's.

The writer appends the lines bench/live.py's writer logs (one startup, then steady-state decode,
prefill and access lines at RATE lines/s, in 10 ms slices) as moby's json-file driver writes
them, each stamped with the time it is written, to `<root>/containers/<id>/<id>-json.log`, and
rotates it as moby does with `max-size`/`max-file 3` (rename to `.1`, `.1` to `.2`, the oldest
removed). The harness scrapes the sentinel's metrics every 0.5 s: the lag is the scrape's time
less the time of the last line the sentinel read (`..._last_entry_timestamp_seconds`); at the
end it waits until the sentinel has read every line written (the catch-up).

    python -m bench.live_files RATE SECONDS WORKDIR [MAX_BYTES]     (both live parts: journal, files)
    python -m bench.live_files writer RATE SECONDS COUNT_FILE LOG MAX_BYTES   (run by the harness)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .live import (
    _free_port,
    lag_stats,
    measure_live,
    sample_lag,
    stop,
    wait_read,
    wait_up,
    write_paced,
)
from .measure import proc_cpu_seconds

CID = "f" * 64
MAX_FILE = 3


def _stamp(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + (
        f".{ns % 1_000_000_000:09d}Z"
    )


def _rotate(log: Path) -> None:
    """moby's rotation with max-file 3: the oldest removed, the others renamed up by one."""
    oldest = log.with_name(f"{log.name}.{MAX_FILE - 1}")
    oldest.unlink(missing_ok=True)
    for n in range(MAX_FILE - 2, 0, -1):
        src = log.with_name(f"{log.name}.{n}")
        if src.exists():
            src.rename(log.with_name(f"{log.name}.{n + 1}"))
    log.rename(log.with_name(f"{log.name}.1"))


def writer(rate: int, seconds: float, count_file: Path, log: Path, max_bytes: int) -> None:
    """bench/live.py's lines as json-file records stamped now; rotate past `max_bytes`."""
    out = open(log, "ab")  # noqa: SIM115 (reopened at each rotation)
    rotations = 0

    def write(texts: list[str]) -> None:
        nonlocal out, rotations
        stamp = _stamp(time.time_ns())
        out.write(
            b"".join(
                json.dumps(
                    {"log": text + "\n", "stream": "stderr", "time": stamp}, separators=(",", ":")
                ).encode()
                + b"\n"
                for text in texts
            )
        )
        out.flush()
        if max_bytes and out.tell() >= max_bytes:
            out.close()
            _rotate(log)
            rotations += 1
            out = open(log, "ab")  # noqa: SIM115

    written, started = write_paced(rate, seconds, write)
    out.close()
    count_file.write_text(f"{written} {time.monotonic() - started:.3f} {rotations}\n")


def measure_live_files(
    rate: int, seconds: float, workdir: Path, max_bytes: int = 10 << 20
) -> dict[str, Any]:
    """Run the writer and a `sentinel run` following its json-file log; lag and CPU."""
    root = workdir / "live-docker"
    cdir = root / "containers" / CID
    cdir.mkdir(parents=True, exist_ok=True)
    (cdir / "config.v2.json").write_text(json.dumps({"ID": CID, "Name": "/sglang-live"}))
    log = cdir / f"{CID}-json.log"
    log.touch()  # the file is there from the container's start on
    (workdir / "live-empty-journal").mkdir(exist_ok=True)
    port = _free_port()
    err = (workdir / "live-files-sentinel.stderr").open("wb")
    sentinel = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("sentinel")),
            "run",
            "--journal-dir",
            str(workdir / "live-empty-journal"),
            "--state-dir",
            str(workdir / "live-files-state"),
            "--container",
            "sglang-live",
            "--docker-root",
            str(root),
            "--listen",
            f"127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=err,
    )
    writer_proc: subprocess.Popen[bytes] | None = None
    try:
        wait_up(sentinel, port, err.name)
        count_file = workdir / "live-files-writer.count"
        count_file.unlink(missing_ok=True)
        cpu0 = proc_cpu_seconds(sentinel.pid) or 0.0
        t0 = time.time()
        argv = [sys.executable, "-m", "bench.live_files", "writer", str(rate), str(seconds)]
        writer_proc = subprocess.Popen([*argv, str(count_file), str(log), str(max_bytes)])
        samples = sample_lag(writer_proc, port, t0, seconds, rate)
        t_writer_done = time.time()
        cpu_during = (proc_cpu_seconds(sentinel.pid) or 0.0) - cpu0
        written_text = count_file.read_text().split() if count_file.exists() else ["0"] * 3
        written = int(written_text[0])
        read = wait_read(port, written)
        catch_up = time.time() - t_writer_done
        wall = t_writer_done - t0
        return {
            "rate_per_s": rate,
            "seconds": seconds,
            "max_bytes": max_bytes,
            "rotations": int(written_text[2]),
            "lines_written": written,
            "writer_seconds": float(written_text[1]),
            "entries_read_by_sentinel": int(read),
            "all_read": int(read) == written,
            **lag_stats(samples),
            "catch_up_after_writer_s": round(catch_up, 3),
            "sentinel_cpu_s": round(cpu_during, 2),
            "sentinel_cpu_percent": round(100 * cpu_during / wall, 1) if wall else None,
            "samples": samples,
        }
    finally:
        for proc in (writer_proc, sentinel):
            stop(proc)
        err.close()


def main(argv: list[str]) -> int:
    if len(argv) == 6 and argv[0] == "writer":
        writer(int(argv[1]), float(argv[2]), Path(argv[3]), Path(argv[4]), int(argv[5]))
        return 0
    rate, seconds, workdir = int(argv[0]), float(argv[1]), Path(argv[2])
    max_bytes = int(argv[3]) if len(argv) > 3 else 10 << 20
    workdir.mkdir(parents=True, exist_ok=True)
    result = {"files": measure_live_files(rate, seconds, workdir, max_bytes)}
    if os.geteuid() == 0:
        result["journal"] = measure_live(rate, seconds, workdir)
    for part in result.values():
        part.pop("samples", None)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
