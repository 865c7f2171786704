"""Batch-line values live in memory; batch lines alone store the record with the cursor without
re-deriving or comparing it, and their decode samples still count exactly once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from journaltools import StartupScript, build_journal, write_export

import sglang_sentinel.daemon.loop as daemon_module
from sglang_sentinel.compare import Policy, evaluate
from sglang_sentinel.config import Config, load_config
from sglang_sentinel.config.schema import JournalConfig
from sglang_sentinel.daemon import Daemon
from sglang_sentinel.model import Comparison, StartupRecord
from sglang_sentinel.pipeline import Pipeline, load_rules_and_policy
from sglang_sentinel.sources import JournalSource
from sglang_sentinel.state import DB_NAME, StateStore
from sglang_sentinel.state.codec import record_to_json

UNIT = "sglang-qwen.service"
DAY = "2026-03-01"


def decode(n: int, running: int | str = 4) -> str:
    return (
        f"[{DAY} 10:{1 + n // 60:02d}:{n % 60:02d} TP0] Decode batch, #running-req: {running}, "
        f"#token: 900, token usage: 0.05, cuda graph: True, gen throughput (token/s): "
        f"{100 + n}.50, #queue-req: 1"
    )


def startup(batch_lines: int) -> StartupScript:
    s = StartupScript(start=f"{DAY} 10:00:00", boot_at="2026-01-01 00:00:00")
    s.started(f"{DAY} 10:00:00")
    s.line(
        f"[{DAY} 10:00:50 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=48, context_len=4096, "
        "available_gpu_mem=10.00 GB"
    )
    s.line(f"[{DAY} 10:00:55] The server is fired up and ready to roll!")
    for n in range(batch_lines):
        s.line(decode(n))
    return s


class Counting:
    """The comparison stage, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, store: StateStore, record: StartupRecord, policy: Policy) -> Comparison:
        self.calls += 1
        return evaluate(store, record, policy)


def pipeline_for(journal: Path, state: Path, **kwargs: object) -> Pipeline:
    config = Config(units=(UNIT,), journal=JournalConfig(directory=journal))
    rules, policy = load_rules_and_policy(config)
    source = JournalSource([UNIT], directory=journal)
    source.open()
    p = Pipeline(source, rules, policy, StateStore(state), source_key="test", **kwargs)  # type: ignore[arg-type]
    p.resume(from_boot_start=False)
    return p


def close(p: Pipeline) -> None:
    p.source.close()
    p.store.close()


def stored_row(state: Path, inv: str) -> tuple[dict[str, object], dict[str, object]]:
    db = sqlite3.connect(state / DB_NAME)
    try:
        record, builder = db.execute(
            "SELECT record, state FROM startups JOIN builders USING (invocation_id)"
            " WHERE invocation_id=?",
            (inv,),
        ).fetchone()
    finally:
        db.close()
    return json.loads(record), json.loads(builder)


def test_batch_lines_store_the_record_without_comparing_it(tmp_path: Path) -> None:
    s = startup(50)
    journal = build_journal(write_export(s.entries(), tmp_path / "x.export"), tmp_path / "j")
    counting = Counting()
    p = pipeline_for(journal, tmp_path / "s", evaluator=counting)
    p.process(limit=3)  # Started, the summary line, ready
    assert [c.record.outcome for c in p.commit()] == ["ready"]
    assert counting.calls == 1
    p.process()
    assert p.tracker.dirty() == [] and p.tracker.touched() == [s.invocation_id]
    assert p.commit() == [] and p.last_saved == 1
    assert counting.calls == 1  # the facts did not change: nothing to compare again
    stored = p.store.startup(s.invocation_id)
    assert stored is not None
    assert stored.rule_hits["decode_batch"] == 50
    assert stored.decode["counts"]["decode_lines"] == 50
    # What was stored is the record a full snapshot makes.
    full = p.tracker.current(UNIT)
    assert full is not None and record_to_json(stored) == record_to_json(full)
    close(p)


def test_runtime_values_are_in_memory_only_and_empty_after_a_restart(tmp_path: Path) -> None:
    s = startup(40)
    entries = s.entries()
    journal = tmp_path / "j"
    build_journal(write_export(entries[:-20], tmp_path / "a.export"), journal, "a")
    state = tmp_path / "s"
    first = pipeline_for(journal, state)
    first.process()
    first.commit()
    assert first.runtime[s.invocation_id].facts["gen_throughput"] == 119.5
    record, builder = stored_row(state, s.invocation_id)
    assert "runtime" not in record and "runtime" not in builder
    close(first)
    build_journal(write_export(entries[-20:], tmp_path / "b.export"), journal, "b")
    # A restart: the decode samples are back, the latest batch-line values are not.
    second = pipeline_for(journal, state)
    assert second.runtime == {}
    (view,) = second.tracker.runtime_views().values()
    assert view.invocation_id == s.invocation_id and dict(view.facts) == {}
    second.process()
    second.commit()
    assert second.runtime[s.invocation_id].facts["gen_throughput"] == 139.5
    stored = second.store.startup(s.invocation_id)
    assert stored is not None and stored.decode["counts"]["decode_lines"] == 40  # exactly once
    close(second)


def test_batch_only_progress_waits_for_the_checkpoint_unless_caught_up(tmp_path: Path) -> None:
    s = startup(30)
    journal = build_journal(write_export(s.entries(), tmp_path / "x.export"), tmp_path / "j")
    now = [100.0]
    p = pipeline_for(journal, tmp_path / "s", checkpoint_interval=60.0, clock=lambda: now[0])
    p.process(limit=3)
    p.commit()
    cursor = p.store.cursor("test")
    p.process()
    now[0] += 1
    assert p.commit() == [] and p.last_saved == 0  # like a cursor move: within the interval
    assert p.store.cursor("test") == cursor and p.runtime[s.invocation_id].facts == {}
    p.commit(caught_up=True)  # at the end of the journal the values are published at once
    assert p.last_saved == 1 and p.store.cursor("test") != cursor
    assert p.runtime[s.invocation_id].facts["gen_throughput"] == 129.5
    close(p)


def test_an_impossible_batch_value_is_null_and_no_finding(tmp_path: Path) -> None:
    """A running-req beyond any server's is dropped from the gauges; it is not a fact of the
    startup, so it no longer becomes a fact_invalid note on the startup's record."""
    s = startup(2)
    s.line(decode(3, running="99999999999999"))
    journal = build_journal(write_export(s.entries(), tmp_path / "x.export"), tmp_path / "j")
    p = pipeline_for(journal, tmp_path / "s")
    p.process()
    (comparison,) = p.commit()
    facts = p.runtime[s.invocation_id].facts
    assert facts["running_requests"] is None and facts["gen_throughput"] == 103.5
    assert comparison.record.notes == () and comparison.findings == ()
    close(p)


def test_a_batch_heavy_backlog_commits_once_per_startup_change_not_per_slice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon replays 1000 batch lines in slices of at most 100: it commits after each slice
    that changed the startup (its first 3 entries: started, summary, ready) and once when caught
    up, never for a slice of batch lines alone (the old way committed, re-derived and compared
    the startup every slice). How many entries a slice reads is the machine's business (the
    0.25 s deadline cuts it on a busy one): the expected commits are taken from the slices read."""
    s = startup(1000)
    journal = build_journal(write_export(s.entries(), tmp_path / "x.export"), tmp_path / "j")
    monkeypatch.setattr(daemon_module, "BATCH", 100)
    config = load_config(
        overrides={"journal.directory": str(journal), "state_dir": str(tmp_path / "s")},
        environ={},
    )
    daemon = Daemon.from_config(config)
    daemon.pipeline.checkpoint_interval = 1e9  # a cursor move alone never commits
    commits: list[int] = []
    slices: list[tuple[int, int]] = []  # (entries read before, after) each slice
    transaction, process = daemon.store.transaction, daemon.pipeline.process

    def counted() -> Any:
        commits.append(daemon.stats.entries_read)
        return transaction()

    def sliced(*args: Any, **kwargs: Any) -> int:
        before = daemon.stats.entries_read
        n = process(*args, **kwargs)
        if n:
            slices.append((before, before + n))
        return n

    daemon.source.open()
    try:
        daemon.pipeline.resume(from_boot_start=False)
        # Counted from here: the commits of the backlog (resume has transactions of its own).
        daemon.store.transaction = counted  # type: ignore[method-assign]
        daemon.pipeline.process = sliced  # type: ignore[method-assign]
        daemon._drain()
    finally:
        daemon.source.close()
        daemon.store.close()
    total = len(s.entries())
    assert daemon.stats.entries_read == total
    assert all(b - a <= 100 for a, b in slices) and len(slices) >= total // 100 + 1
    changed = [end for start, end in slices if start < 3]  # the slices holding entries 1-3
    assert commits == [*changed, total]
    assert daemon.views()[0].runtime["gen_throughput"] == 1099.5
