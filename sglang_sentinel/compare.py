"""Comparison: a startup record against its baseline, under a policy, yields findings.

Findings name what changed and carry evidence (flags, server_args fields, free GPU memory).
Evidence, not blame: nothing here claims that a flag caused a drop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .errors import ConfigError
from .evidence import fmt_value, invalid_fact_text, note
from .model import (
    SEVERITIES,
    SEVERITY_ORDER,
    Comparison,
    Evidence,
    FactValue,
    Finding,
    Origin,
    Severity,
    StartupRecord,
)
from .rules.files import default_policy_path
from .runtime_checks import RUNTIME_CHECKS, RUNTIME_KEYS, decode_result, runtime_findings
from .serverargs.diff import (
    SWITCHES,
    diff_server_args,
    setting_flags,
    switch_flags,
    switched_off_by,
)
from .text import duration
from .yamlfile import YamlError, load_yaml

CHECKS = (
    "max_running_requests_drop",
    "kv_cache_tokens_drop",
    "piecewise_cuda_graph_disabled",
    "cuda_graph_disabled",
    "moe_config_missing",
    "startup_failed",
    "kv_pool_negative",
    "fact_missing",
    *RUNTIME_CHECKS,
    "fact_invalid",
    "startup_stalled",
)
_DROP_CHECKS = {
    "max_running_requests_drop": ("max_running_requests", "max_running_requests"),
    "kv_cache_tokens_drop": ("kv_cache_tokens", "KV cache tokens"),
}
# check -> (fact, label): the fact is the switch's canonical name in serverargs.diff's table.
_SWITCH_CHECKS = {
    f"{name}_disabled": (name, SWITCHES[name]) for name in ("piecewise_cuda_graph", "cuda_graph")
}
_KEYS = {
    "max_running_requests_drop": {"warning_drop_percent", "critical_drop_percent", "enabled"},
    "kv_cache_tokens_drop": {"warning_drop_percent", "critical_drop_percent", "enabled"},
    "fact_missing": {"severity", "facts", "enabled"},
    **RUNTIME_KEYS,
    "startup_stalled": {"severity", "enabled", "baseline_multiple", "min_seconds"},
}
# Checks whose severity grows with the size of the drop, and the tiers they pass through.
ESCALATING_CHECKS = frozenset(k for k, keys in _KEYS.items() if "critical_drop_percent" in keys)
ESCALATION_TIERS: tuple[Severity, ...] = ("warning", "critical")
# startup_stalled defaults (rules/policy.yaml sets them too): 3x the baseline, at least 15 min.
STALL_BASELINE_MULTIPLE = 3.0
STALL_MIN_SECONDS = 900.0


@dataclass(frozen=True, slots=True)
class Policy:
    """Validated check settings: check id -> its settings mapping."""

    checks: Mapping[str, Mapping[str, Any]]

    def enabled(self, check: str) -> bool:
        return bool(self.checks.get(check, {}).get("enabled", True))

    def severity(self, check: str) -> Severity:
        value = self.checks.get(check, {}).get("severity", "warning")
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
        data = load_yaml(path.read_bytes().decode("utf-8"))
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
    for check in _DROP_CHECKS:
        settings = checks.get(check, {})
        warning = settings.get("warning_drop_percent", 5 if check.startswith("max") else 10)
        critical = settings.get("critical_drop_percent", 20 if check.startswith("max") else 50)
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
        allowed = _KEYS.get(check, {"severity", "enabled"})
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
    return problems


# -- the comparison -----------------------------------------------------------------------------


def compare(
    record: StartupRecord,
    baseline: StartupRecord | None,
    kind: Literal["pinned", "previous"] | None,
    policy: Policy,
    now: float | None = None,
) -> Comparison:
    """Compare `record` with `baseline`; a startup still starting yields no findings yet, except
    `startup_stalled` when `now` (unix seconds) is past its policy time."""
    findings: list[Finding] = []
    if record.outcome == "starting" and now is not None:
        stalled = _stall_finding(record, baseline, policy, now)
        if stalled is not None:
            findings.append(stalled)
    evidence = tuple(common_evidence(record, baseline)) if baseline is not None else ()
    if record.outcome == "failed" and policy.enabled("startup_failed"):
        findings.append(
            Finding(
                check="startup_failed",
                severity=policy.severity("startup_failed"),
                baseline=baseline.outcome if baseline else None,
                current="failed",
                message=f"startup failed: {record.failure_reason or 'no reason logged'}",
                evidence=evidence,
            )
        )
    f = _negative_pool_finding(record, policy)
    if f:
        findings.append(f)
    decode = decode_result(record, baseline if baseline is not record else None, policy)
    # Only the fact_invalid notes: a record carries other notes too (clock_skew).
    invalid = tuple(n for n in record.notes if n.kind == "fact_invalid")
    if invalid and record.outcome != "starting" and policy.enabled("fact_invalid"):
        findings.append(
            Finding(
                check="fact_invalid",
                severity=policy.severity("fact_invalid"),
                baseline=None,
                current=tuple(str(n.field) for n in invalid),
                message="facts reported with impossible values, recorded as null: "
                + "; ".join(invalid_fact_text(n) for n in invalid),
                evidence=invalid,
            )
        )
    if record.outcome != "ready" or baseline is None or baseline is record:
        return Comparison(
            record, baseline, kind if baseline else None, tuple(findings), decode=decode
        )
    for check, (fact, label) in _DROP_CHECKS.items():
        f = _drop_finding(check, fact, label, record, baseline, policy, evidence)
        if f:
            findings.append(f)
    for check, (fact, label) in _SWITCH_CHECKS.items():
        f = _switch_finding(check, fact, label, record, baseline, policy, evidence)
        if f:
            findings.append(f)
    f = _moe_finding(record, baseline, policy, evidence)
    if f:
        findings.append(f)
    f = _missing_finding(record, baseline, policy)
    if f:
        findings.append(f)
    findings.extend(runtime_findings(record, baseline, policy, evidence, decode))
    return Comparison(record, baseline, kind, tuple(findings), decode=decode)


def _negative_pool_finding(record: StartupRecord, policy: Policy) -> Finding | None:
    """A negative profiled KV pool: the weights leave no memory for one, whatever the outcome
    (a sign that comes before the failure, or a start that limps on without a pool)."""
    profiled = record.fact("profiled_max_total_tokens")
    if (
        not isinstance(profiled, int)
        or isinstance(profiled, bool)
        or profiled >= 0
        or not policy.enabled("kv_pool_negative")
    ):
        return None
    return Finding(
        check="kv_pool_negative",
        severity=policy.severity("kv_pool_negative"),
        baseline=None,
        current=profiled,
        message=(
            f"the memory profile left a KV pool of {profiled} tokens: the weights (and any "
            "draft model's) take more than --mem-fraction-static allows, so the start cannot "
            "hold a request; lower the weights' share (quantization, more GPUs) or raise "
            "--mem-fraction-static"
        ),
        evidence=(note(f"SGLang logged: the profiled value {profiled} (max_total_tokens)"),),
    )


def stall_after(baseline: StartupRecord | None, policy: Policy) -> float:
    """Seconds after its start at which a startup still starting is stalled."""
    settings = policy.checks.get("startup_stalled", {})
    multiple = float(settings.get("baseline_multiple", STALL_BASELINE_MULTIPLE))
    floor = float(settings.get("min_seconds", STALL_MIN_SECONDS))
    took = baseline.fact("startup_seconds") if baseline is not None else None
    if _is_number(took):
        assert isinstance(took, int | float)
        return max(floor, multiple * float(took))
    return floor


def _stall_finding(
    record: StartupRecord, baseline: StartupRecord | None, policy: Policy, now: float
) -> Finding | None:
    if not policy.enabled("startup_stalled"):
        return None
    limit = stall_after(baseline, policy)
    elapsed = now - record.started_at
    if elapsed < limit:
        return None
    took = baseline.fact("startup_seconds") if baseline is not None else None
    base = (
        f"the baseline was ready in {duration(float(took))}"  # type: ignore[arg-type]
        if _is_number(took)
        else "no baseline time"
    )
    return Finding(
        check="startup_stalled",
        severity=policy.severity("startup_stalled"),
        baseline=took,
        current=round(elapsed, 3),
        message=f"still starting after {duration(elapsed)} (limit {duration(limit)}; {base}): "
        "neither ready nor failed",
    )


def _drop_finding(
    check: str,
    fact: str,
    label: str,
    record: StartupRecord,
    baseline: StartupRecord,
    policy: Policy,
    evidence: tuple[Evidence, ...],
) -> Finding | None:
    old, new = baseline.fact(fact), record.fact(fact)
    if not policy.enabled(check) or not _is_number(old) or not _is_number(new) or old <= 0:  # type: ignore[operator]
        return None
    assert isinstance(old, int | float) and isinstance(new, int | float)
    drop = (old - new) / old * 100
    settings = policy.checks.get(check, {})
    if drop >= float(settings.get("critical_drop_percent", 20)):
        severity: Severity = "critical"
    elif drop >= float(settings.get("warning_drop_percent", 5)):
        severity = "warning"
    else:
        return None
    return Finding(
        check=check,
        severity=severity,
        baseline=old,
        current=new,
        message=f"{label} {fmt_value(old)} → {fmt_value(new)} (−{drop:.0f} %)",
        evidence=evidence,
    )


def _switch_finding(
    check: str,
    fact: str,
    label: str,
    record: StartupRecord,
    baseline: StartupRecord,
    policy: Policy,
    evidence: tuple[Evidence, ...],
) -> Finding | None:
    if (
        not policy.enabled(check)
        or baseline.fact(fact) is not True
        or record.fact(fact) is not False
    ):
        return None
    message = f"{label} on → off"
    detail = _self_set_detail(fact, record)
    if detail:
        message += f"; {detail}"
    reason = (
        record.fact("piecewise_cuda_graph_disabled_reason")
        if fact == "piecewise_cuda_graph"
        else None
    )
    extra = (
        (Evidence("logged_by_sglang", field="piecewise_cuda_graph_disabled_reason", new=reason),)
        if reason
        else ()
    )
    return Finding(
        check=check,
        severity=policy.severity(check),
        baseline=True,
        current=False,
        message=message,
        evidence=extra + evidence,
    )


def _self_set_detail(fact: str, record: StartupRecord) -> str | None:
    """Name the server_args setting that turned `fact` off and whether the command line asked."""
    off = switched_off_by(record.server_args, fact)
    if off is None:
        return None
    name, value = off
    setting = f"{name}={value!r}"
    if not record.launch_flags:
        return f"{setting} in server_args (command line not seen)"
    given = _flag_names(record)
    asked = [flag for flag in switch_flags(fact) if flag in given]
    if asked:
        return f"{setting}: {asked[0]} is on the command line"
    return f"{setting} not on the command line: set by SGLang"


def _moe_finding(
    record: StartupRecord, baseline: StartupRecord, policy: Policy, evidence: tuple[Evidence, ...]
) -> Finding | None:
    now = record.fact("moe_config_missing")
    before = baseline.fact("moe_config_missing")
    if not policy.enabled("moe_config_missing") or not isinstance(now, tuple):
        return None
    old = set(before) if isinstance(before, tuple) else set()
    new = [name for name in now if name not in old]
    if not new:
        return None
    return Finding(
        check="moe_config_missing",
        severity=policy.severity("moe_config_missing"),
        baseline=tuple(sorted(old)),
        current=tuple(now),
        message='Triton MoE kernel config missing (untuned, "sub-optimal"): ' + ", ".join(new),
        evidence=evidence,
    )


def _missing_finding(
    record: StartupRecord, baseline: StartupRecord, policy: Policy
) -> Finding | None:
    if not policy.enabled("fact_missing"):
        return None
    watched: Sequence[str] = policy.checks.get("fact_missing", {}).get("facts", ())
    missing = [f for f in watched if baseline.fact(f) is not None and record.fact(f) is None]
    if not missing:
        return None
    return Finding(
        check="fact_missing",
        severity=policy.severity("fact_missing"),
        baseline=tuple(missing),
        current=None,
        message="not seen in this startup although the baseline had them: "
        + ", ".join(missing)
        + " (a rule may no longer match this SGLang version)",
        evidence=(),
    )


def _flag_names(record: StartupRecord) -> set[str]:
    """The flags on the record's command line (`--tp-size 4` -> `--tp-size`)."""
    return {f.split(" ", 1)[0] for f in record.launch_flags}


def common_evidence(record: StartupRecord, baseline: StartupRecord) -> list[Evidence]:
    """What differs between the two startups' launch: flags, server_args fields, free memory."""
    out: list[Evidence] = []
    old_flags = {f.split(" ", 1)[0]: f for f in baseline.launch_flags}
    new_flags = {f.split(" ", 1)[0]: f for f in record.launch_flags}
    added = tuple(new_flags[k] for k in new_flags if k not in old_flags)
    removed = tuple(old_flags[k] for k in old_flags if k not in new_flags)
    changed = [k for k in new_flags if k in old_flags and old_flags[k] != new_flags[k]]
    if added:
        out.append(Evidence("flags_added", new=added))
    if removed:
        out.append(Evidence("flags_removed", old=removed))
    if changed:
        out.append(
            Evidence(
                "flags_changed",
                old=tuple(old_flags[k] for k in changed),
                new=tuple(new_flags[k] for k in changed),
            )
        )
    if record.server_args and baseline.server_args:
        out.extend(_server_args_evidence(record, baseline))
    old_mem, new_mem = baseline.fact("load_avail_mem_gb"), record.fact("load_avail_mem_gb")
    if _is_number(old_mem) and _is_number(new_mem) and old_mem != new_mem:
        out.append(Evidence("memory_at_load", old=old_mem, new=new_mem))
    return out


def _server_args_evidence(record: StartupRecord, baseline: StartupRecord) -> list[Evidence]:
    """Changed server_args fields, each marked with whether the command line asked for it.

    Fields that only appear or disappear with their default value are what a version upgrade
    does to the schema; they are counted, not listed.
    """
    out: list[Evidence] = []
    on_cmdline = _flag_names(record)
    schema_added = schema_removed = 0
    for change in diff_server_args(baseline.server_args, record.server_args):
        if change.note == "field removed" or (change.note == "field added" and not change.new):
            if change.note == "field removed":
                schema_removed += 1
            else:
                schema_added += 1
            continue
        origin: Origin
        flags = setting_flags(change.spelling or change.field)
        asked = next((f for f in flags if f in on_cmdline), None)
        if not record.launch_flags:
            origin = "command_line_not_seen"
        elif asked is not None:
            origin = "command_line"
        else:
            origin = "set_by_sglang"
        out.append(
            Evidence(
                "server_arg_changed",
                field=change.field,
                old=change.old,
                new=change.new,
                origin=origin,
                flag=asked if origin == "command_line" else None,
                detail=change.note,
            )
        )
    if schema_added or schema_removed:
        out.append(Evidence("schema_changed", old=schema_removed, new=schema_added))
    return out


def _is_number(value: FactValue) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
