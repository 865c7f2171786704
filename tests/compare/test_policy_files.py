"""Policy files and inline `policy:` are validated up front: every problem named, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from sglang_sentinel.cli import main
from sglang_sentinel.compare import load_policy
from sglang_sentinel.errors import ConfigError


def problems_of(path: Path, overrides: dict[str, object] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as err:
        load_policy(path, overrides)
    return err.value.problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("checks: {cuda_graph_disabled: info}\n", "policy.checks.cuda_graph_disabled: must be a mapping of settings"),
        ("- cuda_graph_disabled\n- startup_failed\n", "policy: must be a mapping with a `checks:` key, got list"),
        ("checks: [a, b]\n", "policy.checks: must be a mapping, got list"),
        ("checks: {no_such_check: {severity: info}}\n", "policy.checks.no_such_check: unknown check"),
        ("checks: {cuda_graph_disabled: {severity: loud}}\n", "policy.checks.cuda_graph_disabled.severity: must be one of info, warning, critical"),
        ("checks: {max_running_requests_drop: {warning_drop_percent: 30, critical_drop_percent: 20}}\n", "policy.checks.max_running_requests_drop: warning_drop_percent (30) is above critical_drop_percent (20)"),
        ("checks: {kv_cache_tokens_drop: {warning_drop_percent: 60}}\n", "warning_drop_percent (60) is above critical_drop_percent (50)"),
        ("checks: {startup_stalled: {min_seconds: -1}}\n", "policy.checks.startup_stalled.min_seconds: must be a positive number"),
        ("version: 2\nchecks: {}\n", "policy.version: must be 1; got 2"),
        ("version: 1\nchecks: {}\nchekcs: {}\n", "policy.chekcs: unknown key"),
    ],
)  # fmt: skip
def test_bad_policy_file_is_named(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    problems = problems_of(path)
    assert any(p.startswith(f"{path}: ") and expected in p for p in problems), problems


def test_non_utf8_policy_is_a_named_error(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes(b"checks:\n  cuda_graph_disabled: {severity: \xff\xfe}\n")
    assert problems_of(path) == [f"{path}: not UTF-8 text (byte 42); save it as UTF-8"]


def test_all_problems_at_once(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("checks: {a: {}, cuda_graph_disabled: info, fact_missing: {enabled: 1}}\n")
    assert len(problems_of(path)) == 3


def test_valid_policies_load() -> None:
    policy = load_policy(None, {"cuda_graph_disabled": {"severity": "info"}})
    assert policy.severity("cuda_graph_disabled") == "info"
    policy = load_policy(None, {"checks": {"startup_stalled": {"min_seconds": 60}}})
    assert policy.checks["startup_stalled"]["min_seconds"] == 60
    assert policy.severity("startup_failed") == "critical"  # the shipped file still applies


def test_inline_policy_errors_are_blamed_on_the_config_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("policy:\n  checks:\n    cuda_graph_disabled: info\n    nope: {}\n")
    code = main(["check", "--config", str(config), "--state-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{config}: policy.checks.cuda_graph_disabled: must be a mapping of settings" in err
    assert f"{config}: policy.checks.nope: unknown check" in err
    assert "rules/policy.yaml" not in err


def test_policy_file_from_config_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "mypolicy.yaml"
    policy.write_text("- not a mapping\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"rules:\n  policy: {policy}\n")
    code = main(["check", "--config", str(config), "--state-dir", str(tmp_path)])
    assert code == 2
    assert f"{policy}: policy: must be a mapping" in capsys.readouterr().err
