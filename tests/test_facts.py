"""The registry of facts (facts.py) against what reads it: the rule pack and `rules check`, the JSON
contract, the collector, the report, the status page and the docs table."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, get_args

import pytest
from journaltools import StartupScript, build_journal
from prometheus_client.parser import text_string_to_metric_families
from sentinelproc import scrape_in_process

from sglang_sentinel import facts as registry
from sglang_sentinel.cli import main
from sglang_sentinel.compare import CHECKS
from sglang_sentinel.evidence import render_evidence
from sglang_sentinel.fact_ranges import sane_facts
from sglang_sentinel.facts import BY_NAME, FACT_TYPES, FACTS, STARTUP_FACTS, Fact
from sglang_sentinel.outputs.page import KEY_FACTS
from sglang_sentinel.rules import RuleSet, check_rules, default_rules_dir, load_rules
from sglang_sentinel.rules.ruleset import SCOPES, Rule

ROOT = Path(__file__).resolve().parent.parent
UNIT = "sglang-facts-test.service"


@pytest.fixture(scope="module")
def pack() -> RuleSet:
    return load_rules([default_rules_dir()])


def _produced(pack: RuleSet) -> dict[str, str]:
    return {spec.name: spec.type for rule in pack.rules for spec in rule.facts}


# --- the registry itself -------------------------------------------------------------------------


def test_names_are_unique_and_types_are_the_rule_file_types() -> None:
    assert len(BY_NAME) == len(FACTS)
    assert {"int", "float", "gb", "bool", "str", "list"} == FACT_TYPES
    assert {f.type for f in FACTS} <= FACT_TYPES
    # A rule's scope is startup or runtime; control facts come from startup-scope rules.
    assert set(get_args(registry.Scope)) == SCOPES | {"control"}


def test_every_numeric_fact_has_a_sane_range() -> None:
    """A numeric fact without a range would let an `inf` or a 400-digit value through."""
    unranged = [
        f.name
        for f in FACTS
        if f.type in ("int", "float", "gb") and f.scope != "control" and f.range is None
    ]
    assert unranged == []
    assert all(f.range is None for f in FACTS if f.type in ("str", "list", "bool"))


def test_units_metrics_and_labels_are_consistent() -> None:
    assert all(f.unit == "GB" for f in FACTS if f.type == "gb")
    assert all(f.scale == (2**30 if f.type == "gb" else 1.0) for f in FACTS)
    metrics = [f for f in FACTS if f.metric is not None]
    assert all(f.scope != "control" and f.type != "str" for f in metrics)
    names = [f.metric.name for f in metrics if f.metric]
    assert len(set(names)) == len(names)
    ranks = [f.metric.rank for f in metrics if f.metric]
    assert len(set(ranks)) == len(ranks)
    for view in ("report", "page"):
        shown: list[Fact] = [f for f in FACTS if getattr(f, view) is not None]
        assert all(f.scope == "startup" for f in shown), view
        view_ranks = [getattr(f, view).rank for f in shown]
        assert sorted(view_ranks) == list(range(len(shown))), view
    assert all(f.page.check in CHECKS for f in FACTS if f.page and f.page.check)
    assert [k.key for k in KEY_FACTS] == [f.name for f in registry.page_facts()]
    assert {f.name for f in FACTS if f.derived} == {"startup_seconds"}


# --- rules check ---------------------------------------------------------------------------------


def test_every_fact_the_pack_produces_is_in_the_registry_with_its_type(pack: RuleSet) -> None:
    produced = _produced(pack)
    assert {name: BY_NAME[name].type for name in produced} == produced
    # and the other way: every fact a rule is meant to produce is produced by the pack
    from_rules = {f.name for f in FACTS if not f.derived and not f.from_settings}
    assert from_rules - set(produced) == set()


_RULE = """\
version: 1
rules:
  - id: mystery
    contains: 'mystery='
    regex: 'mystery=(?P<{group}>\\d+)'
    facts: {{{fact}: {kind}}}
    samples:
      match: [{{line: 'mystery=3', facts: {{{fact}: {value}}}}}]
"""


@pytest.mark.parametrize(
    ("fact", "kind", "value", "problem"),
    [
        (
            "mystery_value",
            "int",
            "3",
            "fact 'mystery_value' is not a fact the sentinel knows; it would never reach a report",
        ),
        (
            "max_running_requests",
            "float",
            "3.0",
            "fact 'max_running_requests' is a int (sglang_sentinel/facts.py), not a float",
        ),
        (
            "kv_cache_tokens",
            "str",
            "'3'",
            "fact 'kv_cache_tokens' is a int (sglang_sentinel/facts.py), not a str",
        ),
        (
            "startup_seconds",
            "float",
            "3.0",
            "fact 'startup_seconds' is set by the startup tracker; a rule cannot produce it",
        ),
    ],
)
def test_rules_check_refuses_a_fact_the_registry_does_not_allow(
    tmp_path: Path, fact: str, kind: str, value: str, problem: str
) -> None:
    (tmp_path / "x.yaml").write_text(_RULE.format(group=fact, fact=fact, kind=kind, value=value))
    problems = check_rules([tmp_path])
    assert any(f"x.yaml:mystery: {problem}" in p for p in problems), problems
    assert main(["rules", "check", str(tmp_path)]) == 1


def test_the_same_rule_with_the_registry_type_passes(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(
        _RULE.format(group="kv_cache_tokens", fact="kv_cache_tokens", kind="int", value="3")
    )
    assert check_rules([tmp_path]) == []


# --- a journal of every pack sample --------------------------------------------------------------


def _produces(rule: Rule, *names: str) -> bool:
    return any(spec.name in names for spec in rule.facts)


def _sample_startup(pack: RuleSet, start: datetime) -> StartupScript:
    """A ready startup whose lines are every positive sample of the pack's startup rules, then
    the ready line, then every runtime rule's samples (batch lines come after ready)."""
    s = StartupScript(unit=UNIT, start=start, boot_at="2026-01-01 00:00:00")
    s.started(start)
    when = start
    ready = next(r for r in pack.rules if _produces(r, "ready"))
    body = [
        r
        for r in pack.rules
        if r.scope == "startup" and not _produces(r, "ready", "failure_reason")
    ]
    runtime = [r for r in pack.rules if r.scope == "runtime"]
    for rules in (body, [ready], runtime):
        for rule in rules:
            for sample in rule.samples:
                when += timedelta(seconds=1)
                s.line(sample.line, when=when)
    return s


def _failed_startup(pack: RuleSet, start: datetime) -> StartupScript:
    s = StartupScript(unit=UNIT, start=start, boot_at="2026-01-01 00:00:00")
    s.started(start)
    rule = next(r for r in pack.rules if _produces(r, "failure_reason"))
    s.line(rule.samples[0].line, when=start + timedelta(seconds=5))
    s.process_exited(1, when=start + timedelta(seconds=6))
    return s


@pytest.fixture(scope="module")
def sample_journal(pack: RuleSet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("facts-journal")
    day = datetime(2026, 3, 9, 10, 0, 0, tzinfo=timezone.utc)
    scripts = [
        _failed_startup(pack, day),
        _sample_startup(pack, day + timedelta(hours=1)),
        _sample_startup(pack, day + timedelta(hours=2)),
    ]
    exports = [s.write(tmp / f"{i}.export") for i, s in enumerate(scripts)]
    return build_journal(exports, tmp / "journal")


def _scan_json(journal: Path, state: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    argv = ["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--unit", UNIT]
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def _sample_facts(pack: RuleSet, scope: str) -> set[str]:
    """Facts that some positive sample of a `scope` rule yields with a value."""
    return {
        name
        for rule in pack.rules
        if rule.scope == scope
        for sample in rule.samples
        for name, value in sample.facts.items()
        if value is not None and value != []
    }


def test_every_fact_the_pack_produces_reaches_the_json_contract(
    pack: RuleSet, sample_journal: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _scan_json(sample_journal, tmp_path / "state", capsys)
    failed, first, second = doc["startups"]
    for startup in doc["startups"]:
        assert list(startup["facts"]) == list(STARTUP_FACTS)
    assert [first["outcome"], second["outcome"], failed["outcome"]] == ["ready", "ready", "failed"]
    produced = _produced(pack)
    startup_facts = {n for n in produced if BY_NAME[n].scope == "startup"}
    assert startup_facts <= set(second["facts"])
    seen = {name for name, value in second["facts"].items() if value is not None}
    assert (_sample_facts(pack, "startup") & startup_facts) - seen == set()
    # every registry fact a rule may produce has a sample that shows it
    assert startup_facts - seen == set()
    # control facts: where the contract carries them
    assert second["ready_at"] is not None
    assert second["server_args"] != {}
    assert failed["failure_reason"]
    assert second["notes"] == []


def _series(text: str) -> dict[tuple[str, str], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, s.labels.get("unit", ""))] = s.value
    return out


def _expected(value: Any, fact: Fact) -> float:
    if isinstance(value, list):
        return float(len(value))
    return float(value) * fact.scale


def test_every_fact_with_a_metric_is_exported_by_the_collector(
    sample_journal: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _scan_json(sample_journal, tmp_path / "scan", capsys)
    _, first, second = doc["startups"]
    series = _series(scrape_in_process(sample_journal, tmp_path / "state", [UNIT]))
    prefix = "sglang_sentinel_"
    exported = []
    for fact in FACTS:
        if fact.metric is None:
            continue
        value = series[(prefix + fact.metric.name, UNIT)]
        if fact.scope == "startup":
            # the latest decided startup, and the previous ready one as its baseline
            assert value == _expected(second["facts"][fact.name], fact), fact.name
            baseline = series[(prefix + "baseline_" + fact.metric.name, UNIT)]
            assert baseline == _expected(first["facts"][fact.name], fact), fact.name
        else:
            assert math.isfinite(value), fact.name
        exported.append(fact.name)
    assert len(exported) == 18


# --- the docs table ------------------------------------------------------------------------------


def test_the_docs_table_is_the_registry() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert registry.with_table(doc) == doc, "run `make facts-doc`"
    table = registry.markdown_table().splitlines()[3:-1]
    assert [row.split("|")[1].strip().strip("`") for row in table] == [f.name for f in FACTS]
    assert registry.main(["--check", str(ROOT / "docs" / "architecture.md")]) == 0


def test_the_docs_check_fails_on_a_stale_table(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    stale = tmp_path / "architecture.md"
    stale.write_text(doc.replace("| `kv_cache_gb` |", "| `kv_cache_bytes` |"), encoding="utf-8")
    assert registry.main(["--check", str(stale)]) == 1
    assert registry.main([str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == doc


def test_an_impossible_cpu_memory_is_recorded_as_null() -> None:
    """available_cpu_mem_gb had no range: an `inf` was kept (a bare NaN risk downstream)."""
    out, notes = sane_facts({"available_cpu_mem_gb": math.inf, "available_gpu_mem_gb": 2.5})
    assert out == {"available_cpu_mem_gb": None, "available_gpu_mem_gb": 2.5}
    assert [render_evidence(n) for n in notes] == [
        "fact_invalid: available_cpu_mem_gb=inf is not a finite number; recorded as null"
    ]


def test_every_fact_metric_is_in_the_readme_metrics_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Metrics") :]
    section = section[: section.index("\n## ", 1)]
    missing = [
        f.metric.name
        for f in FACTS
        if f.metric
        and f"`sglang_sentinel_{f.metric.name}" not in section
        and f"`…_{f.metric.name}`" not in section
    ]
    assert missing == []
