"""Prometheus alert rules and the example Prometheus/Alertmanager configs in deploy/.

Runs the real promtool and amtool; checks that every alert is unit-tested, names only metrics
and check ids from docs/architecture.md, and links to a section of docs/runbook.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
RULES = PROMETHEUS_DIR / "sglang-sentinel-alerts.yml"
RULE_TESTS = PROMETHEUS_DIR / "sglang-sentinel-alerts.test.yml"
FLEET_RULES = PROMETHEUS_DIR / "sglang-sentinel-fleet.yml"
FLEET_RULE_TESTS = PROMETHEUS_DIR / "sglang-sentinel-fleet.test.yml"
# (rules, their promtool tests): the per-host rules and the fleet (peer) rules.
RULE_FILES = [(RULES, RULE_TESTS), (FLEET_RULES, FLEET_RULE_TESTS)]
rule_files = pytest.mark.parametrize(
    ("rules", "rule_tests"), RULE_FILES, ids=[r.name for r, _ in RULE_FILES]
)
PROMETHEUS_EXAMPLE = PROMETHEUS_DIR / "prometheus.example.yml"
ALERTMANAGER_EXAMPLE = REPO / "deploy" / "alertmanager" / "alertmanager.example.yml"
ARCHITECTURE = REPO / "docs" / "architecture.md"
RUNBOOK = REPO / "docs" / "runbook.md"
RUNBOOK_URL = "https://github.com/sglang-sentinel/sglang-sentinel/blob/main/docs/runbook.md#"


def tool(name: str, package: str) -> str:
    """Path to a CLI tool; skip without it locally, fail without it in CI."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is missing in CI; apt-get install {package}")
        pytest.skip(f"{name} not installed (apt-get install {package}; CI=1 makes this fail)")
    return path


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, cwd=REPO)


def alert_rules(rules: Path = RULES) -> list[dict[str, Any]]:
    groups = yaml.safe_load(rules.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def alert_rule_tests(rule_tests: Path = RULE_TESTS) -> list[dict[str, Any]]:
    tests = yaml.safe_load(rule_tests.read_text())["tests"]
    return [case for test in tests for case in test.get("alert_rule_test", [])]


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


@rule_files
def test_promtool_check_rules_passes_with_lint_fatal(rules: Path, rule_tests: Path) -> None:
    result = run(tool("promtool", "prometheus"), "check", "rules", "--lint-fatal", str(rules))
    assert result.returncode == 0, result.stdout + result.stderr


@rule_files
def test_promtool_unit_tests_pass(rules: Path, rule_tests: Path) -> None:
    result = run(tool("promtool", "prometheus"), "test", "rules", str(rule_tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@rule_files
def test_every_alert_has_a_firing_and_a_quiet_unit_test(rules: Path, rule_tests: Path) -> None:
    """Each alert appears in a test with exact expected alerts and in one with none."""
    names = {rule["alert"] for rule in alert_rules(rules)}
    cases = alert_rule_tests(rule_tests)
    firing = {case["alertname"] for case in cases if case.get("exp_alerts")}
    quiet = {case["alertname"] for case in cases if not case.get("exp_alerts")}
    assert sorted(names - firing) == [], "alerts without a firing test"
    assert sorted(names - quiet) == [], "alerts without a not-firing test"
    assert sorted({case["alertname"] for case in cases} - names) == [], "tests of unknown alerts"
    for case in cases:
        for alert in case.get("exp_alerts") or []:
            assert set(alert["exp_annotations"]) == {"summary", "description", "runbook_url"}
            assert "severity" in alert["exp_labels"]


@rule_files
def test_alerts_follow_the_naming_and_annotation_conventions(rules: Path, rule_tests: Path) -> None:
    for rule in alert_rules(rules):
        name = rule["alert"]
        assert re.fullmatch(r"SGLang(?:[A-Z][A-Za-z0-9]*)+", name), name
        assert rule["labels"]["severity"], name
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}, name
        assert rule["annotations"]["runbook_url"] == RUNBOOK_URL + name.lower(), name


@rule_files
def test_runbook_has_a_section_for_every_alert_anchor(rules: Path, rule_tests: Path) -> None:
    headings = re.findall(r"^#{2,3} (.+)$", RUNBOOK.read_text(), flags=re.MULTILINE)
    anchors = {github_anchor(heading) for heading in headings}
    missing = [
        rule["alert"]
        for rule in alert_rules(rules)
        if rule["annotations"]["runbook_url"].removeprefix(RUNBOOK_URL) not in anchors
    ]
    assert missing == []


@rule_files
def test_rules_use_only_metric_names_and_check_ids_from_the_architecture(
    rules: Path, rule_tests: Path
) -> None:
    """A typo in a metric name would make an alert silently never fire."""
    architecture = ARCHITECTURE.read_text()
    documented = set(re.findall(r"`(sglang_sentinel_[a-z_]+)`", architecture))
    # The table abbreviates baselines as "(+ `_baseline_`)": sglang_sentinel_X has a
    # sglang_sentinel_baseline_X twin.
    documented |= {
        name.replace("sglang_sentinel_", "sglang_sentinel_baseline_") for name in documented
    }
    check_ids = set(
        re.findall(r"`([a-z_]+)`", architecture.split("## Check ids")[1].split("##")[0])
    )
    text = rules.read_text()
    # Names of recorded series (level:metric:operations) are not exported metrics.
    used = set(re.findall(r"(?<![:\w])sglang_sentinel_[a-z0-9_]+(?![:\w])", text))
    assert sorted(used - documented) == []
    used_checks = set(re.findall(r'check="([a-z_]+)"', text))
    assert used_checks <= check_ids
    if rules == RULES:
        assert used_checks == check_ids


def test_prometheus_example_config_is_valid_and_loads_the_rules() -> None:
    result = run(tool("promtool", "prometheus"), "check", "config", str(PROMETHEUS_EXAMPLE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 2 rule files found" in result.stdout
    config = yaml.safe_load(PROMETHEUS_EXAMPLE.read_text())
    assert [job["job_name"] for job in config["scrape_configs"]] == ["sglang-sentinel"]


def test_alertmanager_example_config_is_valid() -> None:
    result = run(
        tool("amtool", "prometheus-alertmanager"), "check-config", str(ALERTMANAGER_EXAMPLE)
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (
            ["alertname=SGLangStartupFailed", "severity=critical", "unit=sglang-qwen.service"],
            "sglang-pager",
        ),
        (
            ["alertname=SGLangCapacityDropped", "severity=warning", "unit=sglang-qwen.service"],
            "sglang-chat",
        ),
        (
            ["alertname=SGLangNoBaselinePinned", "severity=info", "unit=sglang-qwen.service"],
            "sglang-chat",
        ),
        (
            ["alertname=SGLangSentinelDown", "severity=warning", "instance=gpu1:19110"],
            "sglang-chat",
        ),
        (["alertname=NodeDown", "severity=critical"], "default"),
    ],
)
def test_alertmanager_example_routes_by_severity(labels: list[str], receiver: str) -> None:
    result = run(
        tool("amtool", "prometheus-alertmanager"),
        "config",
        "routes",
        "test",
        f"--config.file={ALERTMANAGER_EXAMPLE}",
        f"--verify.receivers={receiver}",
        *labels,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.split() == [receiver]
