"""The metric catalogue: docs/architecture.md's table is generated from the collector
(tools/metrics_doc.py), and no document names a series the sentinel does not export."""

from __future__ import annotations

import re
from pathlib import Path

from tools import metrics_doc

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([REPO / "README.md", *REPO.glob("docs/*.md"), *REPO.glob("deploy/**/*.yml")])


def test_the_architecture_table_is_the_collector_s() -> None:
    assert metrics_doc.main(["--check"]) == 0


def test_the_table_lists_every_series_a_golden_scrape_has() -> None:
    exported = {metrics_doc.exposed_name(f) for f in metrics_doc.families()}
    scraped = {
        line.split()[2]
        for path in REPO.glob("tests/golden/*/expected-metrics.prom")
        for line in path.read_text().splitlines()
        if line.startswith("# TYPE ")
    }
    assert {f.type for f in metrics_doc.families()} == {"gauge", "counter", "info"}
    assert sorted(scraped - exported - {n.removesuffix("_total") for n in exported}) == []


def test_no_document_names_a_series_that_is_not_exported() -> None:
    exported = {metrics_doc.exposed_name(f) for f in metrics_doc.families()}
    named = {
        (path.relative_to(REPO).as_posix(), name)
        for path in DOCUMENTS
        for name in re.findall(r"\bsglang_sentinel_[a-z0-9_]*[a-z0-9]\b", path.read_text())
    }
    assert len(named) > 50
    assert sorted((doc, name) for doc, name in named if name not in exported) == []
