"""Scrapes hammered during a backlog replay only ever see committed state.

A daemon (in process, driven slice by slice as its loop drives it) replays a journal of several
startups of two units with a few thousand batch lines, while threads scrape /metrics and the
status page. Every commit that saves a startup first fails once after writing its rows (the
injected disk error of test_state_faults.py, raised as the transaction ends) and waits there
until a scrape has started, so a scrape runs while rows that will be rolled back sit in the
loop's connection. A hook records what each successful commit published, with the time it
became visible; every unit-labelled series of every scrape must equal a published state that
was current at some moment of that scrape.

The same harness run with a collector that reads the loop's SQLite connection (what the daemon
did before its snapshot) must find a violation: that is what makes this test able to fail.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal, write_export
from prometheus_client import generate_latest

import sglang_sentinel.daemon.loop as daemon_module
from sglang_sentinel.compare import Snapshot
from sglang_sentinel.config import load_config
from sglang_sentinel.daemon import Daemon
from sglang_sentinel.model import RuntimeView, StartupRecord

UNITS = ("sglang-scrape-a.service", "sglang-scrape-b.service")
STARTUPS_PER_UNIT = 3
BATCH_LINES = 400  # per startup: 2 x 3 x 400 = 2400 batch lines, about 2.5k entries in all
Signature = tuple[str, ...]


def _decode_line(when: datetime, n: int, gen: float) -> str:
    stamp = when.strftime("%Y-%m-%d %H:%M:%S")
    return (
        f"[{stamp} TP0] Decode batch, #running-req: {1 + n % 7}, #token: {900 + n}, "
        f"token usage: 0.{n % 100:02d}, cuda graph: True, gen throughput (token/s): {gen:.2f}, "
        f"#queue-req: {n % 3}"
    )


def backlog(tmp_path: Path) -> Path:
    """Two units, three ready startups each, each followed by batch lines; in time order."""
    entries: list[dict[str, Any]] = []
    for u, unit in enumerate(UNITS):
        for k in range(STARTUPS_PER_UNIT):
            start = datetime(2026, 3, 1 + 2 * k, 10, 0, u, tzinfo=timezone.utc)
            s = StartupScript(unit=unit, start=start, boot_at="2026-01-01 00:00:00")
            s.started(start)
            day = start.strftime("%Y-%m-%d")
            mrr = 40 + 10 * k + u
            s.line(
                f"[{day} 10:00:50 TP0] max_total_num_tokens={1000 * mrr}, chunked_prefill_size=8192,"
                f" max_prefill_tokens=16384, max_running_requests={mrr}, context_len=4096,"
                " available_gpu_mem=10.00 GB",
                when=start + timedelta(seconds=50),
            )
            ready = start + timedelta(seconds=55)
            s.line(f"[{day} 10:00:55] The server is fired up and ready to roll!", when=ready)
            for n in range(BATCH_LINES):
                when = ready + timedelta(seconds=1 + n, microseconds=u)
                s.line(_decode_line(when, n, 1000.0 * u + 100 * k + n / 4), when=when)
            entries.extend(s.entries())
    entries.sort(key=lambda e: int(e["__REALTIME_TIMESTAMP"]))
    return build_journal(write_export(entries, tmp_path / "backlog.export"), tmp_path / "j")


def signature(page: str) -> Signature:
    """Every series about a unit: what the published state decides (process counters are not)."""
    return tuple(sorted(line for line in page.splitlines() if 'unit="' in line))


@dataclass
class Published:
    """A state a commit published: visible from `since` (at the latest by `until`)."""

    since: float
    until: float
    signature: Signature


@dataclass
class Scrape:
    start: float
    end: float
    signature: Signature


@dataclass
class Harness:
    """What the loop published and what the scrapers saw, with the injected failures."""

    published: list[Published] = field(default_factory=list)
    scrapes: list[Scrape] = field(default_factory=list)
    pages: int = 0
    errors: list[BaseException] = field(default_factory=list)
    rolled_back: int = 0
    scraped_in_doomed: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)
    last_scrape_start: float = 0.0

    def violations(self) -> list[Scrape]:
        """Scrapes that match no published state current at some moment of the scrape."""
        bad = []
        for s in self.scrapes:
            ok = False
            for i, p in enumerate(self.published):
                if p.signature != s.signature or p.since > s.end:
                    continue
                after = self.published[i + 1] if i + 1 < len(self.published) else None
                if after is None or after.until >= s.start:
                    ok = True
                    break
            if not ok:
                bad.append(s)
        return bad


class RecordingDaemon(Daemon):
    """Records each published state (on the loop thread, right after publishing)."""

    harness: Harness

    def publish(self) -> None:
        since = time.monotonic()
        super().publish()
        page = generate_latest(self.registry).decode()
        self.harness.published.append(Published(since, time.monotonic(), signature(page)))


class _Rows:
    """A statement's result, fetched while the connection was held."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._rows = cursor.fetchall()
        self.rowcount = cursor.rowcount

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class _OneStatementAtATime:
    """The loop's connection, shared with the scrapers one statement at a time: a sqlite3
    connection used by two threads at once fails at random ("API misuse"), which is not the bug
    shown here. A scrape still runs between the statements of a transaction the loop has open."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.lock = threading.RLock()

    @property
    def in_transaction(self) -> bool:
        with self.lock:
            return self._db.in_transaction

    def execute(self, sql: str, parameters: Any = ()) -> _Rows:
        with self.lock:
            return _Rows(self._db.execute(sql, parameters))

    def close(self) -> None:
        with self.lock:
            self._db.close()


class LoopConnectionDaemon(RecordingDaemon):
    """The bug the snapshot fixes: each scrape builds its views on the loop's SQLite connection,
    which sees the rows of a transaction still open (and later rolled back)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store._db = _OneStatementAtATime(self.store._db)  # type: ignore[assignment]
        self._views_lock = threading.Lock()

    def snapshot(self) -> Snapshot:
        with self._views_lock:  # one scrape at a time builds views
            Daemon.publish(self)
            return Daemon.snapshot(self)


def inject_failures(daemon: Daemon, harness: Harness) -> None:
    """The first transaction that stores each (startup, outcome) fails at its end, after a
    scrape has started while its rows are written but not committed."""
    store = daemon.store
    save_startup, save_cursor = store.save_startup, store.save_cursor
    seen: set[tuple[str, str]] = set()
    doomed = [False]

    def failing_save_startup(
        record: StartupRecord, builder: str | None, owner: str | None = None
    ) -> bool | None:
        new = save_startup(record, builder, owner)
        key = (record.invocation_id, record.outcome)
        if key not in seen:
            seen.add(key)
            doomed[0] = True
        return new

    def failing_save_cursor(source: str, cursor: str) -> None:
        save_cursor(source, cursor)
        if doomed[0]:
            doomed[0] = False
            written = time.monotonic()
            with harness.cond:
                if harness.cond.wait_for(lambda: harness.last_scrape_start > written, timeout=10):
                    harness.scraped_in_doomed += 1
            harness.rolled_back += 1
            raise sqlite3.OperationalError("disk I/O error (injected)")

    store.save_startup = failing_save_startup  # type: ignore[method-assign]
    store.save_cursor = failing_save_cursor  # type: ignore[method-assign]


def hammer(
    harness: Harness, fn: Callable[[], str], stop: threading.Event, record: bool
) -> threading.Thread:
    def run() -> None:
        while not stop.is_set():
            start = time.monotonic()
            with harness.cond:
                harness.last_scrape_start = max(harness.last_scrape_start, start)
            try:
                page = fn()
            except BaseException as exc:  # reported to the test
                harness.errors.append(exc)
                return
            end = time.monotonic()
            with harness.cond:
                if record:
                    harness.scrapes.append(Scrape(start, end, signature(page)))
                else:
                    harness.pages += 1
                harness.cond.notify_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def replay(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    daemon_class: type[RecordingDaemon],
    checkpoint: float,
) -> tuple[Harness, RecordingDaemon]:
    """Replay the backlog in slices while 2 threads scrape /metrics and 1 the status page."""
    journal = backlog(tmp_path)
    monkeypatch.setattr(daemon_module, "BATCH", 150)  # many slices, so many commits
    monkeypatch.setattr(daemon_module, "RETRY_FIRST_S", 0.001)
    config = load_config(
        overrides={
            "journal.directory": str(journal),
            "state_dir": str(tmp_path / "state"),
            "units": list(UNITS),
            "checkpoint_interval_seconds": checkpoint,
        },
        environ={},
    )
    harness = Harness()
    daemon = daemon_class.from_config(config)
    daemon.harness = harness
    harness.published.append(Published(0.0, 0.0, ()))  # before the first publish: nothing
    daemon.source.open()
    stop = threading.Event()
    threads = []
    try:
        daemon.pipeline.resume(from_boot_start=False)
        daemon.publish()
        inject_failures(daemon, harness)

        def metrics() -> str:
            return generate_latest(daemon.registry).decode()

        threads = [hammer(harness, metrics, stop, record=True) for _ in range(2)]
        threads.append(hammer(harness, daemon.status_page, stop, record=False))
        deadline = time.monotonic() + 120
        read = -1
        while time.monotonic() < deadline:
            daemon._drain()
            pipeline = daemon.pipeline
            idle = not pipeline.tracker.dirty() and not pipeline.tracker.touched()
            if daemon._retry_at is None and idle and daemon.stats.entries_read == read:
                break
            read = daemon.stats.entries_read
            if daemon._retry_at is not None:
                time.sleep(max(0.0, daemon._retry_at - time.monotonic()))
        else:
            pytest.fail("the backlog was not replayed within 120 s")
        # One more scrape of each kind after the end, so the final state is seen too.
        with harness.cond:
            end = time.monotonic()
            harness.cond.wait_for(lambda: harness.last_scrape_start > end, timeout=10)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        daemon.source.close()
        daemon.store.close()
    return harness, daemon


@pytest.mark.parametrize("checkpoint", [0.001, 5.0])
def test_every_scrape_is_a_state_some_commit_published(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checkpoint: float
) -> None:
    harness, daemon = replay(tmp_path, monkeypatch, RecordingDaemon, checkpoint)
    assert harness.errors == []
    # The first transaction to store each startup as starting and as ready was rolled back
    # (one transaction may hold several), each with a scrape running while its rows were there.
    assert harness.rolled_back >= STARTUPS_PER_UNIT
    assert harness.scraped_in_doomed == harness.rolled_back
    assert len(harness.scrapes) >= harness.rolled_back and harness.pages > 0
    assert harness.violations() == []
    # The replay ended where the journal ends: the last published state shows each unit's
    # last startup and its last batch line.
    final = "\n".join(harness.published[-1].signature)
    last_gen = {
        u: 1000.0 * i + 100 * (STARTUPS_PER_UNIT - 1) + (BATCH_LINES - 1) / 4
        for i, u in enumerate(UNITS)
    }
    for unit, gen in last_gen.items():
        assert (
            f'sglang_sentinel_generation_throughput_tokens_per_second{{unit="{unit}"}} {gen}'
            in final
        )
        assert f'sglang_sentinel_startups_total{{outcome="ready",unit="{unit}"}} 3.0' in final
    runtime = daemon.pipeline.runtime
    assert all(isinstance(v, RuntimeView) for v in runtime.values())
    # Scrapes saw the replay move: more than the first and the last state.
    assert len({s.signature for s in harness.scrapes}) > 2


def test_a_collector_on_the_loop_connection_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above fails for a collector that reads the loop's SQLite connection: its
    scrapes during a transaction later rolled back show rows no commit published then."""
    harness, _ = replay(tmp_path, monkeypatch, LoopConnectionDaemon, 0.001)
    assert harness.scraped_in_doomed == harness.rolled_back > 0
    assert harness.violations() != []
