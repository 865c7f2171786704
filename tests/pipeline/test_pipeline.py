"""Resuming from the journal cursor: exact resume, vacuumed cursor, replay age cap."""

from __future__ import annotations

import time
from pathlib import Path

from journaltools import build_journal, ready_startup, write_export

from sglang_sentinel.config import Config
from sglang_sentinel.config.schema import JournalConfig
from sglang_sentinel.pipeline import Pipeline, load_rules_and_policy
from sglang_sentinel.sources import JournalSource, journal_cursor_time
from sglang_sentinel.state import StateStore

UNIT = "sglang-qwen.service"


def pipeline_for(journal: Path, state: Path) -> Pipeline:
    config = Config(units=(UNIT,), journal=JournalConfig(directory=journal))
    rules, policy = load_rules_and_policy(config)
    source = JournalSource([UNIT], directory=journal)
    source.open()
    return Pipeline(source, rules, policy, StateStore(state), source_key="test")


def drain(p: Pipeline) -> None:
    while p.process(limit=1000):
        p.commit()
    p.commit()


def test_resume_after_a_vacuumed_cursor_counts_a_reset_and_loses_nothing(tmp_path: Path) -> None:
    old = ready_startup("2026-03-01 10:00:00", 48)
    new = ready_startup("2026-03-02 10:00:00", 26)
    journal = tmp_path / "j"
    build_journal(write_export(old.entries(), tmp_path / "old.export"), journal, "old")
    build_journal(write_export(new.entries(), tmp_path / "new.export"), journal, "new")
    state = tmp_path / "s"
    # First run reads only the old startup, then stops.
    first = pipeline_for(journal, state)
    first.resume(from_boot_start=False)
    first.process(limit=len(old.entries()))
    first.commit()
    first.source.close()
    # Vacuum: the file holding the cursor's entry is deleted before the restart.
    (journal / "old.journal").unlink()
    second = pipeline_for(journal, state)
    second.resume(from_boot_start=False)
    assert second.stats.cursor_resets == 1
    drain(second)
    records = second.store.startups([UNIT])
    assert [r.facts["max_running_requests"] for r in records] == [48, 26]
    assert second.store.counter("cursor_resets") == 1


def test_resume_from_an_intact_cursor_reads_only_what_is_new(tmp_path: Path) -> None:
    a, b = ready_startup("2026-03-01 10:00:00", 48), ready_startup("2026-03-02 10:00:00", 26)
    journal = build_journal(
        write_export(a.entries() + b.entries(), tmp_path / "x.export"), tmp_path / "j"
    )
    state = tmp_path / "s"
    first = pipeline_for(journal, state)
    first.resume(from_boot_start=False)
    first.process(limit=len(a.entries()))
    first.commit()
    first.source.close()
    second = pipeline_for(journal, state)
    second.resume(from_boot_start=False)
    drain(second)
    assert second.stats.entries_read == len(b.entries())
    assert second.stats.cursor_resets == 0
    assert len(second.store.startups([UNIT])) == 2


def test_max_replay_age_skips_old_history(tmp_path: Path) -> None:
    recent_day = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 3600))
    old = ready_startup("2026-03-01 10:00:00", 48)
    recent = ready_startup(f"{recent_day} 10:00:00", 26)
    entries = old.entries() + recent.entries()
    journal = build_journal(write_export(entries, tmp_path / "x.export"), tmp_path / "j")
    p = pipeline_for(journal, tmp_path / "s")
    p.resume(from_boot_start=False, max_age_seconds=3 * 86400)
    drain(p)
    assert [r.facts["max_running_requests"] for r in p.store.startups([UNIT])] == [26]


def test_cursor_time_reads_the_realtime_field() -> None:
    cursor = "s=fa4a;i=2;b=5d1b;m=b54e60140;t=64c9e1f018140;x=c759"
    assert journal_cursor_time(cursor) == 0x64C9E1F018140 / 1e6
    assert journal_cursor_time("garbage") == 0.0
