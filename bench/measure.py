"""Per-run measurement of child processes: wall time, CPU time and peak RSS, each run on its own.

CPU and peak RSS come from `os.wait4` of each child (its own rusage, not a process-wide sum),
and the peak anonymous RSS from polling /proc/PID/status: the sentinel and the floor both map
journal files, and those file pages count in ru_maxrss although they are the kernel's cache, not
the process's memory. Concurrent processes (a shell pipeline) are summed.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    maxrss_kb: int  # ru_maxrss: peak resident set including mapped journal file pages
    anon_peak_kb: int  # peak RssAnon (heap, stacks): the process's own memory
    returncode: int


class _AnonPoller(threading.Thread):
    """Samples RssAnon of some PIDs every few ms; keeps each PID's peak."""

    def __init__(self, interval: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.pids: list[int] = []
        self.peak: dict[int, int] = {}
        self.interval = interval
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            for pid in list(self.pids):
                kb = rss_anon_kb(pid)
                if kb is not None and kb > self.peak.get(pid, 0):
                    self.peak[pid] = kb
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def rss_anon_kb(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _wait(proc: subprocess.Popen[Any]) -> tuple[int, float, int]:
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def run_pipeline(
    commands: Sequence[Sequence[str]],
    stdout: IO[bytes] | int | None = subprocess.DEVNULL,
    env: dict[str, str] | None = None,
) -> Run:
    """Run `cmd1 | cmd2 | ...` as separate processes; CPU and RSS are summed over them."""
    poller = _AnonPoller()
    poller.start()
    procs: list[subprocess.Popen[bytes]] = []
    started = time.perf_counter()
    prev: IO[bytes] | None = None
    for i, argv in enumerate(commands):
        last = i == len(commands) - 1
        proc = subprocess.Popen(
            list(argv),
            stdin=prev if prev is not None else subprocess.DEVNULL,
            stdout=stdout if last else subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        if prev is not None:
            prev.close()  # only the reader keeps the pipe open, so SIGPIPE works
        prev = proc.stdout
        procs.append(proc)
        poller.pids.append(proc.pid)
    results = [_wait(p) for p in procs]
    wall = time.perf_counter() - started
    poller.stop()
    return Run(
        wall_s=wall,
        cpu_s=sum(r[1] for r in results),
        maxrss_kb=sum(r[2] for r in results),
        anon_peak_kb=sum(poller.peak.values()),
        returncode=max((r[0] for r in results), key=abs),
    )


def run_steps(steps: Sequence[tuple[Sequence[str], Path | None]]) -> Run:
    """Run commands one after the other (each stdout to its file); wall and CPU add up."""
    runs = []
    for argv, out in steps:
        if out is None:
            runs.append(run_pipeline([argv]))
        else:
            with out.open("wb") as f:
                runs.append(run_pipeline([argv], stdout=f))
    return Run(
        wall_s=sum(r.wall_s for r in runs),
        cpu_s=sum(r.cpu_s for r in runs),
        maxrss_kb=max(r.maxrss_kb for r in runs),
        anon_peak_kb=max(r.anon_peak_kb for r in runs),
        returncode=max((r.returncode for r in runs), key=abs),
    )


def proc_cpu_seconds(pid: int) -> float | None:
    """utime + stime of a running process from /proc/PID/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
