"""The metric catalogue: every family is declared once (daemon/families.py), the collector builds
exactly those, README.md's and docs/architecture.md's tables are generated from them
(tools/metrics_doc.py), and no document names a series the sentinel does not export."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sglang_sentinel.compare import Snapshot
from sglang_sentinel.daemon import SentinelCollector
from sglang_sentinel.daemon.families import BY_NAME, FAMILIES, counter, gauge, info
from sglang_sentinel.model import Stats
from tools import metrics_doc

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("deploy/**/*.yml")])


def test_the_readme_and_architecture_tables_are_the_declaration_s() -> None:
    assert metrics_doc.main(["--check"]) == 0


def test_a_stale_readme_table_fails_the_check(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = (REPO / "README.md").read_text(encoding="utf-8")
    readme.write_text(text.replace("| `sglang_sentinel_journal_up` |", "| `x` |"), "utf-8")
    doc = tmp_path / "architecture.md"
    doc.write_text((REPO / "docs/architecture.md").read_text(encoding="utf-8"), "utf-8")
    assert metrics_doc.main(["--check", "--doc", str(doc), "--readme", str(readme)]) == 1
    assert metrics_doc.main(["--doc", str(doc), "--readme", str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == text


def test_the_collector_builds_exactly_the_declared_families_in_order() -> None:
    """Name, kind, help and labels of every family a scrape carries are the declaration's (the
    series that exist only once a journal entry was read come from stats that say one was)."""
    collector = SentinelCollector(lambda: Snapshot(stats=Stats(last_entry_realtime=1.0)))
    built = [
        (m.name, m.type, m.documentation, m._labelnames)  # type: ignore[attr-defined]
        for m in collector.collect()
    ]
    declared = [(f.full_name, f.kind, f.help, f.labels) for f in FAMILIES]
    assert built == declared
    assert len(BY_NAME) == len(FAMILIES) == 74  # names are unique


def test_a_family_is_built_only_as_its_declared_kind() -> None:
    assert gauge("journal_up").type == "gauge"
    assert counter("startups").type == "counter"
    assert info("build").type == "info"
    with pytest.raises(TypeError, match="startups is a counter, not a gauge"):
        gauge("startups")


def test_the_table_lists_every_series_a_golden_scrape_has() -> None:
    exported = {f.exposed_name for f in metrics_doc.families()}
    scraped = {
        line.split()[2]
        for path in REPO.glob("tests/golden/*/expected-metrics.prom")
        for line in path.read_text().splitlines()
        if line.startswith("# TYPE ")
    }
    assert {f.kind for f in metrics_doc.families()} == {"gauge", "counter", "info"}
    assert sorted(scraped - exported - {n.removesuffix("_total") for n in exported}) == []


def test_the_readme_names_every_exported_series() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert [f.exposed_name for f in FAMILIES if f"`{f.exposed_name}`" not in readme] == []


def test_no_document_names_a_series_that_is_not_exported() -> None:
    exported = {f.exposed_name for f in metrics_doc.families()}
    named = {
        (path.relative_to(REPO).as_posix(), name)
        for path in DOCUMENTS
        for name in re.findall(r"\bsglang_sentinel_[a-z0-9_]*[a-z0-9]\b", path.read_text())
    }
    assert len(named) > 50
    assert sorted((doc, name) for doc, name in named if name not in exported) == []
