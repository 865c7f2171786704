"""Decode samples survive daemon restarts and crashes exactly once.

The same journal (a baseline and a 20 % slower restart, tests/startups/test_decode_journal.py) is read in
one pass, and again in small chunks with a new Pipeline and StateStore (a daemon restart) after
every chunk, every other chunk dropped uncommitted first (a crash: its lines are read again from
the cursor). Both ways end with the same decode samples, counts and verdict: the samples and each
rank's open interval are committed in the same transaction as the cursor.
"""

from __future__ import annotations

import random
from pathlib import Path

from journaltools import build_journal
from test_decode_journal import BASE_ID, SLOW_ID, UNIT, startup

from sglang_sentinel.compare import evaluate
from sglang_sentinel.config import Config
from sglang_sentinel.config.schema import JournalConfig
from sglang_sentinel.pipeline import Pipeline, load_rules_and_policy
from sglang_sentinel.sources import JournalSource
from sglang_sentinel.state import StateStore


def pipeline_for(journal: Path, state: Path) -> Pipeline:
    config = Config(units=(UNIT,), journal=JournalConfig(directory=journal))
    rules, policy = load_rules_and_policy(config)
    source = JournalSource([UNIT], directory=journal)
    source.open()
    p = Pipeline(source, rules, policy, StateStore(state), source_key="test")
    p.resume(from_boot_start=False)
    return p


def close(p: Pipeline) -> None:
    p.source.close()
    p.store.close()


def test_restarts_and_crashes_leave_the_same_samples_and_verdict(tmp_path: Path) -> None:
    t0 = 1_780_000_000.0
    base = startup(BASE_ID, t0, speed=1.0, load_seconds=60, mrr=64, seed=1)
    slow = startup(SLOW_ID, t0 + 3 * 3600, speed=0.8, load_seconds=60, mrr=64, seed=2)
    journal = build_journal(
        [base.write(tmp_path / "base.export"), slow.write(tmp_path / "slow.export")],
        tmp_path / "journal",
    )
    total = len(base.entries()) + len(slow.entries())

    once = pipeline_for(journal, tmp_path / "once")
    while once.process(limit=1000):
        once.commit()
    once.commit()
    expected = {r.invocation_id: dict(r.decode) for r in once.store.startups([UNIT])}
    slow_once = once.store.startup(SLOW_ID)
    assert slow_once is not None
    verdict = evaluate(once.store, slow_once, once.policy).decode
    close(once)
    assert verdict["verdict"] == "regressed"

    rng = random.Random(3)
    state = tmp_path / "chunked"
    read = restarts = crashes = 0
    while True:
        p = pipeline_for(journal, state)
        n = p.process(limit=rng.randint(20, 120))
        if n == 0:
            p.commit()
            break
        if restarts % 2:
            crashes += 1  # killed before the commit: these lines come again
        else:
            p.commit()
            read += n
        restarts += 1
        close(p)
    assert read == total and crashes >= 5
    records = {r.invocation_id: dict(r.decode) for r in p.store.startups([UNIT])}
    assert records == expected
    slow_chunked = p.store.startup(SLOW_ID)
    assert slow_chunked is not None
    assert evaluate(p.store, slow_chunked, p.policy).decode == verdict
    close(p)
