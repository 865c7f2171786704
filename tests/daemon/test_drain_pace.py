"""The loop's pace under a busy writer: it reads (and commits) at most every DRAIN_INTERVAL_S.

A container's log file written a hundred times a second woke the loop a hundred times a second,
and each wake ended in a commit that stored the open startup's whole resumable state: 20-26 %
of a core at 20,000 lines/s (bench/live_files.py). Here the source's descriptor is always
readable, the busiest writer there is, and the loop runs for a second.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemons import opened_daemon

from sglang_sentinel.daemon import loop as daemon_module
from sglang_sentinel.daemon.loop import Daemon

RUN_S = 1.0


class CountingDaemon(Daemon):
    drains: int = 0

    def _drain(self) -> None:
        self.drains += 1
        super()._drain()


class AlwaysReadable:
    """The daemon's source with another descriptor to poll (a compiled source's methods
    cannot be patched)."""

    def __init__(self, source: Any, fd: int) -> None:
        self._source = source
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


def run_loop(daemon: CountingDaemon, seconds: float) -> float:
    """Run the loop for `seconds` with its source always readable; returns how long the loop
    took to stop after the wake-up pipe was written (as a signal handler writes it)."""
    busy_r, busy_w = os.pipe()
    os.write(busy_w, b"x")  # never read: poll() on it returns at once, every time
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    daemon.source = AlwaysReadable(daemon.source, busy_r)
    thread = threading.Thread(target=daemon._loop, args=(wake_r,), daemon=True)
    try:
        thread.start()
        time.sleep(seconds)
        daemon._stop = True
        stopped_at = time.monotonic()
        os.write(wake_w, b"\0")
        thread.join(timeout=10)
        assert not thread.is_alive(), "the loop did not stop"
        return time.monotonic() - stopped_at
    finally:
        for fd in (busy_r, busy_w, wake_r, wake_w):
            os.close(fd)


@pytest.fixture
def daemon(seed_journal_dir: Path, tmp_path: Path) -> Iterator[CountingDaemon]:
    state = tmp_path / "state"
    with opened_daemon(seed_journal_dir, state, ["sglang-qwen.service"], CountingDaemon) as d:
        assert isinstance(d, CountingDaemon)
        yield d


def test_a_source_readable_all_the_time_is_read_at_most_every_drain_interval(
    daemon: CountingDaemon,
) -> None:
    stop_took = run_loop(daemon, RUN_S)
    # The first drain catches up; then at most one per interval (a slow machine reads fewer).
    most = 1 + RUN_S / daemon_module.DRAIN_INTERVAL_S + 1
    assert 2 <= daemon.drains <= most, f"{daemon.drains} drains in {RUN_S} s"
    # The wait between two reads never delays a stop: the wake-up pipe ends it.
    assert stop_took < 1.0
    # Everything was read: the seed journal's startups are stored.
    assert daemon.store.startups(None, limit=None)
