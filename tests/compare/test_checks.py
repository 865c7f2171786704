"""The check table (compare/checks.py) is the one catalogue of checks: the bundled policy file,
the alert rules and the runbook say what it says."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from sglang_sentinel.compare import ALERT_NAMES, CHECKS, TABLE, Policy, load_policy
from sglang_sentinel.rules import default_policy_path

REPO = Path(__file__).resolve().parents[2]


def test_the_bundled_policy_file_writes_out_the_table_defaults() -> None:
    """rules/policy.yaml is the file a user copies: it names every check with its defaults."""
    doc = yaml.safe_load(default_policy_path().read_text())
    written = {
        check: {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()}
        for check, settings in doc["checks"].items()
    }
    assert written == {c.id: dict(c.defaults) for c in TABLE}
    assert list(written) == list(CHECKS)


def test_an_empty_policy_file_is_the_table(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nchecks: {}\n")
    empty, bundled = load_policy(path), load_policy()

    def settings(policy: Policy) -> dict[str, dict[str, object]]:
        return {
            c: {k: tuple(v) if isinstance(v, list) else v for k, v in policy.settings(c).items()}
            for c in CHECKS
        }

    assert settings(empty) == settings(bundled)
    assert [empty.tiers(c) for c in CHECKS] == [bundled.tiers(c) for c in CHECKS]


def test_every_alert_has_a_runbook_section() -> None:
    runbook = (REPO / "docs" / "runbook.md").read_text()
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", line[3:].strip().lower()).replace(" ", "-")
        for line in runbook.splitlines()
        if line.startswith("## ")
    }
    assert sorted(set(a.lower() for a in ALERT_NAMES.values()) - anchors) == []
