"""compare() and the policy, one check at a time, on hand-made records (no journal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from records import POLICY, base, checks, record

from sglang_sentinel.compare import Policy, compare, load_policy
from sglang_sentinel.errors import ConfigError


@pytest.mark.parametrize(
    ("old", "new", "severity"),
    [
        (100, 96, None),  # -4 %: below the 5 % warning line
        (100, 95, "warning"),  # exactly 5 %: the line itself counts
        (48, 39, "warning"),  # -18.75 %
        (100, 80, "critical"),  # exactly 20 %
        (48, 26, "critical"),  # the story: -46 %
        (48, 60, None),  # a rise is not a regression
    ],
)
def test_max_running_requests_drop_thresholds(old: int, new: int, severity: str | None) -> None:
    found = checks(record(max_running_requests=new), base(max_running_requests=old))
    if severity is None:
        assert "max_running_requests_drop" not in found
    else:
        f = found["max_running_requests_drop"]
        assert (f.severity, f.baseline, f.current) == (severity, old, new)
        assert f.message.startswith(f"max_running_requests {old} → {new} (−")


@pytest.fixture(params=["bundled", "user file"])
def policy(request: pytest.FixtureRequest, tmp_path: Path) -> Policy:
    """The bundled policy, and a user's `rules.policy` file (it replaces the bundled one) that
    names the KV check without a setting: both merge over the check table's defaults."""
    if request.param == "bundled":
        return POLICY
    path = tmp_path / "policy.yaml"
    path.write_text("version: 1\nchecks:\n  kv_cache_tokens_drop: {}\n")
    return load_policy(path)


def test_kv_cache_thresholds_are_their_own(policy: Policy) -> None:
    def severity(kv: int) -> str | None:
        found = checks(record(kv_cache_tokens=kv), base(kv_cache_tokens=1000), policy)
        return found["kv_cache_tokens_drop"].severity if "kv_cache_tokens_drop" in found else None

    # 10 % warning, 50 % critical: not max_running_requests_drop's 5 % and 20 %.
    assert [severity(kv) for kv in (910, 900, 750, 510, 500)] == [
        None,
        "warning",
        "warning",
        "warning",
        "critical",
    ]


def test_a_policy_file_keeps_the_default_severities(policy: Policy) -> None:
    """cuda_graph_disabled is critical and piecewise warning whichever file is read."""
    found = checks(
        record(cuda_graph=False, piecewise_cuda_graph=False),
        base(cuda_graph=True, piecewise_cuda_graph=True),
        policy,
    )
    assert found["cuda_graph_disabled"].severity == "critical"
    assert found["piecewise_cuda_graph_disabled"].severity == "warning"
    assert policy.tiers("startup_failed") == ("critical",)


def test_a_drop_needs_both_values() -> None:
    """No value on one side is fact_missing's business, never a 100 % drop."""
    found = checks(record(max_running_requests=None), base(max_running_requests=48))
    assert "max_running_requests_drop" not in found
    assert found["fact_missing"].message == (
        "not seen in this startup although the baseline had them: max_running_requests "
        "(a rule may no longer match this SGLang version)"
    )


def test_switches_fire_only_on_on_to_off() -> None:
    on_off = checks(
        record(piecewise_cuda_graph=False, cuda_graph=False),
        base(piecewise_cuda_graph=True, cuda_graph=True),
    )
    assert on_off["piecewise_cuda_graph_disabled"].severity == "warning"
    assert on_off["cuda_graph_disabled"].severity == "critical"
    for old, new in ((False, False), (True, True), (False, True), (None, False)):
        found = checks(record(cuda_graph=new), base(cuda_graph=old))
        assert "cuda_graph_disabled" not in found, (old, new)


def test_switch_names_the_setting_and_whether_the_command_line_asked() -> None:
    args = {"disable_cuda_graph": True}
    by_sglang = checks(
        record(cuda_graph=False, server_args=args, flags=("--model-path /m",)),
        base(cuda_graph=True),
    )["cuda_graph_disabled"]
    assert "disable_cuda_graph=True not on the command line: set by SGLang" in by_sglang.message
    asked = checks(
        record(cuda_graph=False, server_args=args, flags=("--disable-cuda-graph",)),
        base(cuda_graph=True),
    )["cuda_graph_disabled"]
    assert "--disable-cuda-graph is on the command line" in asked.message
    unseen = checks(record(cuda_graph=False, server_args=args), base(cuda_graph=True))
    assert "command line not seen" in unseen["cuda_graph_disabled"].message


def test_moe_configs_only_new_ones_count() -> None:
    same = checks(record(moe_config_missing=("a.json",)), base(moe_config_missing=("a.json",)))
    assert "moe_config_missing" not in same
    new = checks(
        record(moe_config_missing=("a.json", "b.json")), base(moe_config_missing=("a.json",))
    )
    assert new["moe_config_missing"].message.endswith('(untuned, "sub-optimal"): b.json')


def test_failed_starting_and_first_startups() -> None:
    failed = checks(record("failed", failure_reason="CUDA out of memory"), base())
    assert failed["startup_failed"].severity == "critical"
    assert "CUDA out of memory" in failed["startup_failed"].message
    assert checks(record("starting", max_running_requests=1), base(max_running_requests=48)) == {}
    first = compare(record(max_running_requests=1), None, None, POLICY)
    assert (first.findings, first.baseline_kind) == ((), None)


def test_policy_overrides_disable_and_retune(tmp_path: Path) -> None:
    off = load_policy(overrides={"checks": {"max_running_requests_drop": {"enabled": False}}})
    assert checks(record(max_running_requests=1), base(max_running_requests=48), off) == {}
    strict = load_policy(overrides={"max_running_requests_drop": {"warning_drop_percent": 1}})
    found = checks(record(max_running_requests=98), base(max_running_requests=100), strict)
    assert found["max_running_requests_drop"].severity == "warning"
    loud = load_policy(overrides={"piecewise_cuda_graph_disabled": {"severity": "critical"}})
    found = checks(record(piecewise_cuda_graph=False), base(piecewise_cuda_graph=True), loud)
    assert found["piecewise_cuda_graph_disabled"].severity == "critical"


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"no_such_check": {}}, "policy.checks.no_such_check: unknown check"),
        ({"cuda_graph_disabled": {"severity": "loud"}}, "must be one of info, warning, critical"),
        ({"kv_cache_tokens_drop": {"warning_drop_percent": 150}}, "a number from 0 to 100"),
        ({"kv_cache_tokens_drop": {"colour": 1}}, "unknown setting"),
        ({"fact_missing": {"facts": "max_running_requests"}}, "must be a list of fact names"),
    ],
)
def test_policy_mistakes_are_named(overrides: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_policy(overrides={"checks": overrides})
    assert any(problem in p for p in caught.value.problems), caught.value.problems
