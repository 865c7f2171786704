"""Scrapes read the snapshot published after a commit, never the loop's SQLite connection."""

from __future__ import annotations

import threading
from pathlib import Path

from daemons import opened_daemon
from prometheus_client import generate_latest

from sglang_sentinel.config import load_config
from sglang_sentinel.daemon import Daemon

MRR = 'sglang_sentinel_max_running_requests{unit="sglang-qwen.service"} 26.0'


class _NoStore:
    """Stands in for the state store while scrapes run: any use of it is a test failure."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"a scrape touched the state store ({name})")


def test_scrapes_never_touch_the_state_store(seed_journal_dir: Path, tmp_path: Path) -> None:
    config = load_config(
        overrides={"journal.directory": str(seed_journal_dir), "state_dir": str(tmp_path / "s")},
        environ={},
    )
    daemon = Daemon.from_config(config)
    daemon.source.open()
    daemon.pipeline.resume(from_boot_start=False)
    before = generate_latest(daemon.registry).decode()
    assert MRR not in before  # nothing published yet: a scrape shows nothing, not a guess
    daemon._drain()  # read, commit, publish
    store = daemon.store
    daemon.store = _NoStore()  # type: ignore[assignment]
    try:
        pages: list[str] = []
        errors: list[BaseException] = []

        def scrape() -> None:
            try:
                pages.append(generate_latest(daemon.registry).decode())
            except BaseException as exc:  # the thread reports back to the test
                errors.append(exc)

        threads = [threading.Thread(target=scrape) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(pages) == 8 and all(MRR in page for page in pages)
        assert 'sglang_sentinel_regression{check="max_running_requests_drop"' in pages[0]
    finally:
        daemon.store = store
        daemon.source.close()
        store.close()


def test_a_scrape_reads_one_snapshot_whose_counters_later_counts_leave_alone(
    seed_journal_dir: Path, tmp_path: Path
) -> None:
    """The collector is handed one snapshot a scrape: statuses, pins, policy, the counters and
    rule hits taken together, copies that what the loop counts afterwards does not change."""
    with opened_daemon(seed_journal_dir, tmp_path / "s") as daemon:
        daemon._drain()
        snap = daemon.snapshot()
        assert [u.unit for u in snap.units] == ["sglang-qwen.service"]
        assert snap.policy is daemon.policy
        entries, hits = snap.stats.entries_read, dict(snap.rule_hits)
        assert entries > 0 and hits
        daemon.stats.entries_read += 5
        daemon.stats.processing_errors["rules"] = 9
        daemon.pipeline.tracker.rule_hits["capacity_summary"] += 3
        assert snap.stats.entries_read == entries
        assert snap.stats.processing_errors == {}
        assert dict(snap.rule_hits) == hits
        page = generate_latest(daemon.registry).decode()
        assert f"sglang_sentinel_journal_entries_read_total {entries + 5}.0" in page
        assert 'sglang_sentinel_processing_errors_total{stage="rules"} 9.0' in page
