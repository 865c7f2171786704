"""StateStore on its own: round trips, pins, lookups, transactions and schema guards."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from records import record

from sglang_sentinel.errors import StateError, UsageError
from sglang_sentinel.state import DB_NAME, StateStore
from sglang_sentinel.state.store import SCHEMA_VERSION


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


def test_a_record_survives_the_round_trip(store: StateStore) -> None:
    r = record(
        max_running_requests=48,
        available_gpu_mem_gb=20.64,
        piecewise_cuda_graph=True,
        moe_config_missing=("a.json",),
        model_path="/models/m",
        server_args={"tp_size": 4, "cuda_graph_config": {"decode": {"backend": "full"}}},
        flags=("--tp-size 4",),
    )
    with store.transaction():
        store.save_startup(r, None)
    assert store.startup(r.invocation_id) == r


def test_a_failed_transaction_leaves_nothing(store: StateStore) -> None:
    r = record()
    with pytest.raises(RuntimeError), store.transaction():
        store.save_startup(r, None)
        raise RuntimeError("disk full, say")
    assert store.startup(r.invocation_id) is None


def test_pin_and_unpin(store: StateStore) -> None:
    r = record()
    with store.transaction():
        store.save_startup(r, None)
    store.pin(r.unit, r.invocation_id)  # its own transaction, as the CLI calls it
    assert store.baseline_id(r.unit) == r.invocation_id
    assert set(store.baselines()) == {r.unit}
    assert store.unpin(r.unit) is True
    assert store.unpin(r.unit) is False
    assert store.baseline_id(r.unit) is None


def test_find_startup_by_prefix(store: StateStore) -> None:
    a, b = record(invocation="abcdef01" * 4), record(invocation="abcdef02" * 4)
    with store.transaction():
        store.save_startup(a, None)
        store.save_startup(b, None)
    assert store.find_startup("abcdef02").invocation_id == b.invocation_id
    for ref, problem in (
        ("abcdef0", "ambiguous"),
        ("abc", "at least 6 hex digits"),
        ("zzzzzzzz", "at least 6 hex digits"),
        ("123456", "no startup with invocation id starting"),
    ):
        with pytest.raises(UsageError, match=problem):
            store.find_startup(ref)


def test_a_newer_schema_is_refused_not_damaged(tmp_path: Path) -> None:
    StateStore(tmp_path).close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    db.commit()
    db.close()
    with pytest.raises(StateError, match="newer than this sentinel understands"):
        StateStore(tmp_path)
    db = sqlite3.connect(tmp_path / DB_NAME)
    (version,) = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    db.close()
    assert int(version) == SCHEMA_VERSION + 1


def version_2_state(path: Path) -> None:
    """A state as schema 2 left it: a record and its row in the comparisons table."""
    store = StateStore(path)
    with store.transaction():
        store.save_startup(record(invocation="c" * 32, max_running_requests=48), None)
    store.close()
    db = sqlite3.connect(path / DB_NAME)
    db.executescript(
        "CREATE TABLE comparisons (invocation_id TEXT PRIMARY KEY REFERENCES startups"
        " (invocation_id), baseline_id TEXT, baseline_kind TEXT, findings TEXT NOT NULL);"
        f"INSERT INTO comparisons VALUES ('{'c' * 32}', NULL, NULL, '[]');"
        "UPDATE meta SET value='2' WHERE key='schema_version';"
        "DROP TABLE builders;"
    )
    db.close()


def schema_of(path: Path) -> tuple[str, list[str]]:
    db = sqlite3.connect(path / DB_NAME)
    try:
        (version,) = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        tables = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    finally:
        db.close()
    return version, sorted(tables)


def test_a_version_2_state_reads_as_it_is_and_upgrades_when_written(tmp_path: Path) -> None:
    """Schema 3 drops the comparisons table, 4 adds builders: a read-only command reads a
    version 2 state without touching it; the first writer upgrades it and keeps every record."""
    assert SCHEMA_VERSION == 4
    version_2_state(tmp_path)
    ro = StateStore(tmp_path, readonly=True)
    got = ro.startup("c" * 32)
    assert got is not None and got.facts["max_running_requests"] == 48
    ro.close()
    common = ["baselines", "counters", "cursors", "meta", "pruned", "pruned_horizon", "startups"]
    assert schema_of(tmp_path) == ("2", sorted([*common, "comparisons"]))
    StateStore(tmp_path).close()
    assert schema_of(tmp_path) == ("4", sorted([*common, "builders"]))
    again = StateStore(tmp_path, readonly=True)
    got = again.startup("c" * 32)
    assert got is not None and got.facts["max_running_requests"] == 48
    again.close()
