"""The metrics collector on a fresh registry, fed hand-made views (no daemon, no journal)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from records import POLICY, record
from sentinelproc import scrape_in_process

from sglang_sentinel import __version__
from sglang_sentinel.compare import Snapshot, UnitStatus, compare
from sglang_sentinel.daemon.metrics import SentinelCollector
from sglang_sentinel.model import Stats

UNIT = "sglang-qwen.service"


def scrape(
    *views: UnitStatus,
    pinned: set[str] | None = None,
    reader: str = "python",
    file_reader: str = "python",
) -> dict[tuple[str, tuple], float]:  # type: ignore[type-arg]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        SentinelCollector(
            lambda: Snapshot(
                units=views,
                pinned=frozenset(pinned or ()),
                policy=POLICY,
                stats=Stats(entries_read=7),
                rule_hits={"capacity_summary": 2},
            ),
            clock=lambda: 1_700_000_200.0,
            reader=reader,
            file_reader=file_reader,
        )
    )
    return samples(generate_latest(registry).decode())


def samples(text: str) -> dict[tuple[str, tuple], float]:  # type: ignore[type-arg]
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_facts_findings_and_baseline_of_one_unit() -> None:
    baseline = record(invocation="a" * 32, max_running_requests=48, available_gpu_mem_gb=1.5)
    current = record(max_running_requests=26, available_gpu_mem_gb=1.0)
    view = UnitStatus(
        unit=UNIT,
        comparison=compare(current, baseline, "pinned", POLICY),
        starting=None,
        history=(),
        pinned=True,
        outcome_counts={"ready": 2},
    )
    m = scrape(view, pinned={UNIT})
    u = (("unit", UNIT),)
    assert m[("sglang_sentinel_max_running_requests", u)] == 26
    assert m[("sglang_sentinel_baseline_max_running_requests", u)] == 48
    # SGLang's "GB" is GiB; exported in bytes.
    assert m[("sglang_sentinel_available_gpu_memory_bytes", u)] == 1024**3
    key = (
        "sglang_sentinel_regression",
        (("check", "max_running_requests_drop"), ("severity", "critical"), ("unit", UNIT)),
    )
    assert m[key] == 1
    assert m[("sglang_sentinel_baseline_pinned", u)] == 1
    assert m[("sglang_sentinel_journal_entries_read_total", ())] == 7
    assert m[("sglang_sentinel_rule_matches_total", (("rule", "capacity_summary"),))] == 2


def test_a_unit_without_a_decided_startup_has_no_fact_series() -> None:
    starting = compare(record(outcome="starting"), None, None, POLICY)
    m = scrape(UnitStatus(unit=UNIT, comparison=None, starting=starting, history=(), pinned=False))
    assert not [k for k in m if k[0] == "sglang_sentinel_max_running_requests"]
    assert m[("sglang_sentinel_startup_in_progress", (("unit", UNIT),))] == 1


@pytest.mark.parametrize("reader", ["c", "python"])
@pytest.mark.parametrize("file_reader", ["c", "python"])
def test_build_info_names_the_version_and_both_readers(reader: str, file_reader: str) -> None:
    m = scrape(reader=reader, file_reader=file_reader)
    build = [k for k in m if k[0] == "sglang_sentinel_build_info"]
    labels = (("file_reader", file_reader), ("reader", reader), ("version", __version__))
    assert build == [("sglang_sentinel_build_info", labels)]


def test_the_daemons_build_info_names_the_readers_it_runs(
    seed_journal_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SENTINEL_READER=python keeps to python-systemd's reader and the Python file reader, and
    the metric says so."""
    from sglang_sentinel.sources import file_reader_path, reader_path

    def build_info() -> list[tuple[str, tuple]]:  # type: ignore[type-arg]
        text = scrape_in_process(seed_journal_dir, tmp_path / f"s-{reader_path()}")
        return [k for k in samples(text) if k[0] == "sglang_sentinel_build_info"]

    # "c" where the extensions are built (.ci/run builds them; e2e's fallback step proves an
    # install without them)
    runs = (("file_reader", file_reader_path()), ("reader", reader_path()))
    assert build_info() == [("sglang_sentinel_build_info", (*runs, ("version", __version__)))]
    monkeypatch.setenv("SENTINEL_READER", "python")
    pure = (("file_reader", "python"), ("reader", "python"), ("version", __version__))
    assert build_info() == [("sglang_sentinel_build_info", pure)]
