"""The policy: which checks run and at what thresholds, loaded from YAML and validated.

The checks and their defaults are the check table (checks.py); a policy file (the bundled
rules/policy.yaml, or the one `rules.policy` names) and the config's inline `policy:` set a
check's severity, thresholds and whether it runs, over those defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..model import SEVERITIES, SEVERITY_ORDER, Severity
from ..rules import default_policy_path
from ..serverargs import SWITCHES
from ..yamlfile import FileTooLarge, YamlError, load_yaml, read_text
from .checks import BY_ID, CHECKS, ESCALATING_CHECKS, ESCALATION_TIERS
from .ledger_check import ledger_problems

DROP_CHECKS = {
    "max_running_requests_drop": ("max_running_requests", "max_running_requests"),
    "kv_cache_tokens_drop": ("kv_cache_tokens", "KV cache tokens"),
}
# check -> (fact, label): the fact is the switch's canonical name in serverargs.diff's table.
SWITCH_CHECKS = {
    f"{name}_disabled": (name, SWITCHES[name])
    for name in ("piecewise_cuda_graph", "cuda_graph", "overlap_schedule")
}


@dataclass(frozen=True, slots=True)
class Policy:
    """Validated check settings as the policy file and the config gave them: check id -> its
    settings; `settings` merges them over the check table's defaults (checks.py)."""

    checks: Mapping[str, Mapping[str, Any]]

    def settings(self, check: str) -> Mapping[str, Any]:
        """`check`'s settings: the table's defaults, with what the policy set over them."""
        row = BY_ID.get(check)
        return {**(row.defaults if row is not None else {}), **self.checks.get(check, {})}

    def enabled(self, check: str) -> bool:
        return bool(self.settings(check).get("enabled", True))

    def severity(self, check: str) -> Severity:
        value = self.settings(check).get("severity", "warning")
        return "critical" if value == "critical" else "info" if value == "info" else "warning"

    def tiers(self, check: str) -> tuple[Severity, ...]:
        """The severities a finding of `check` can have, lowest first; drop checks escalate."""
        if check in ESCALATING_CHECKS:
            return ESCALATION_TIERS
        return (self.severity(check),)


def reached_tiers(check: str, severity: Severity) -> tuple[Severity, ...]:
    """The severity tiers a finding has reached: one alert (and one series) per tier.

    A drop check that escalates keeps its warning alert and adds the critical one, so the
    alert a person already acknowledged is never resolved by getting worse (Alertmanager's
    identity of an alert is its whole label set, severity included).
    """
    if check in ESCALATING_CHECKS:
        rank = SEVERITY_ORDER[severity]
        return tuple(t for t in ESCALATION_TIERS if SEVERITY_ORDER[t] <= rank) or (severity,)
    return (severity,)


def load_policy(path: Path | None = None, overrides: Mapping[str, Any] | None = None) -> Policy:
    """Load the shipped policy (or `path`), apply `overrides`, validate; ConfigError on problems.

    Every problem is reported at once and blamed on where it is: the policy file, or (for
    `overrides`, the config's inline `policy:`) the configuration.
    """
    path = path or default_policy_path()
    try:
        data = load_yaml(read_text(path))
    except FileTooLarge as exc:
        raise ConfigError([f"{path}: {exc}"]) from exc
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read policy: {exc.strerror}"]) from exc
    except UnicodeDecodeError as exc:
        raise ConfigError([f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"]) from exc
    except YamlError as exc:
        raise ConfigError([f"{path}: {problem}" for problem in exc.problems]) from exc
    problems = [f"{path}: {where}: {message}" for where, message in policy_problems(data)]
    extra = overrides or {}
    problems += [f"config: {where}: {message}" for where, message in policy_problems(extra)]
    if problems:
        raise ConfigError(problems)
    merged: dict[str, dict[str, Any]] = {}
    for source in (data or {}, extra):
        for check, settings in _checks_of(source).items():
            merged.setdefault(str(check), {}).update(settings or {})
    problems = [f"{path}: {where}: {message}" for where, message in _order_problems(merged)]
    if problems:
        raise ConfigError(problems)
    return Policy(checks=merged)


def _checks_of(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The check settings of a policy document: `{checks: {...}}`, or inline `{check: {...}}`."""
    if "checks" in doc:
        return doc["checks"] or {}
    return {k: v for k, v in doc.items() if k != "version"}


def policy_problems(doc: Any) -> list[tuple[str, str]]:
    """(where, message) for every problem of a policy document (a file's, or inline `policy:`)."""
    if doc is None:
        return []
    if not isinstance(doc, Mapping):
        return [("policy", f"must be a mapping with a `checks:` key, got {type(doc).__name__}")]
    problems: list[tuple[str, str]] = []
    if "checks" in doc:
        for key in doc:
            if key not in ("version", "checks"):
                problems.append((f"policy.{key}", "unknown key (expected `version`, `checks`)"))
    if "version" in doc and doc["version"] != 1:
        problems.append(("policy.version", f"must be 1; got {doc['version']!r}"))
    checks = _checks_of(doc)
    if not isinstance(checks, Mapping):
        return [*problems, ("policy.checks", f"must be a mapping, got {type(checks).__name__}")]
    shaped: dict[str, Mapping[str, Any]] = {}
    for check, settings in checks.items():
        if settings is None:
            settings = {}
        if not isinstance(settings, Mapping):
            problems.append(
                (
                    f"policy.checks.{check}",
                    f"must be a mapping of settings, e.g. {{severity: warning}}; got {settings!r}",
                )
            )
            continue
        shaped[str(check)] = settings
    problems += _validate_policy(shaped)
    problems += _order_problems(shaped)
    return problems


def _order_problems(checks: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    problems = []
    for check in DROP_CHECKS:
        settings = {**BY_ID[check].defaults, **checks.get(check, {})}
        warning, critical = settings["warning_drop_percent"], settings["critical_drop_percent"]
        numbers = all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (warning, critical)
        )
        if numbers and warning > critical:
            problems.append(
                (
                    f"policy.checks.{check}",
                    f"warning_drop_percent ({warning}) is above critical_drop_percent "
                    f"({critical}); a drop would be critical before it is a warning",
                )
            )
    return problems


def _validate_policy(checks: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    problems = []
    for check, settings in checks.items():
        if check not in CHECKS:
            problems.append(
                (f"policy.checks.{check}", f"unknown check (known: {', '.join(CHECKS)})")
            )
            continue
        allowed = BY_ID[check].keys
        for key, value in settings.items():
            path = f"policy.checks.{check}.{key}"
            if key not in allowed:
                problems.append((path, f"unknown setting (allowed: {', '.join(sorted(allowed))})"))
            elif key == "severity" and value not in SEVERITIES:
                problems.append((path, f"must be one of {', '.join(SEVERITIES)}; got {value!r}"))
            elif key.endswith("_percent") and (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not 0 <= value <= 100
            ):
                problems.append((path, f"must be a number from 0 to 100; got {value!r}"))
            elif key == "facts" and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)
            ):
                problems.append((path, "must be a list of fact names"))
            elif key in ("warmup_seconds", "slower_seconds", "min_samples") and (
                not isinstance(value, int | float) or isinstance(value, bool) or value < 0
            ):
                problems.append((path, f"must be a number >= 0; got {value!r}"))
            elif key in ("baseline_multiple", "min_seconds") and (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not 0 < value <= 1e7
            ):
                problems.append((path, f"must be a positive number; got {value!r}"))
            elif key == "enabled" and not isinstance(value, bool):
                problems.append((path, f"must be true or false; got {value!r}"))
            elif (wrong := ledger_problems(check, key, value)) is not None:
                problems.append((path, wrong))
    return problems
