"""The metrics collector on a fresh registry, fed hand-made views (no daemon, no journal)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from records import POLICY, record

from sglang_sentinel.compare import UnitStatus, compare
from sglang_sentinel.daemon.metrics import SentinelCollector
from sglang_sentinel.model import Stats

UNIT = "sglang-qwen.service"


def scrape(*views: UnitStatus, pinned: set[str] | None = None) -> dict[tuple[str, tuple], float]:  # type: ignore[type-arg]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        SentinelCollector(
            views=lambda: views,
            stats=Stats(entries_read=7),
            rule_hits=lambda: {"capacity_summary": 2},
            policy=lambda: POLICY,
            baselines_pinned=lambda: pinned or set(),
            clock=lambda: 1_700_000_200.0,
        )
    )
    out = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
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
