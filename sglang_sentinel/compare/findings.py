"""Comparison: a startup record against its baseline, under a policy, yields findings.

Findings name what changed and carry evidence (launch.py: flags, server_args fields, free GPU
memory). Evidence, not blame: nothing here claims that a flag caused a drop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..evidence import fmt_value, invalid_fact_text, note
from ..logtemplates import unledgered_baseline
from ..model import Comparison, Evidence, Finding, Severity, StartupRecord
from ..serverargs import switch_flags, switched_off_by
from ..text import duration
from .launch import common_evidence, flag_names, is_number
from .ledger_check import ledger_diff, ledger_finding
from .policy import DROP_CHECKS, SWITCH_CHECKS, Policy
from .runtime_checks import decode_result, runtime_findings

# The checks of a list fact of the same name, each new entry (a config file name: its shape)
# named, with what the message says of them. The tracker bounds a list fact
# (startups.LIST_KEPT); a message names the first _LIST_SHOWN, the finding's `current` all.
LIST_CHECKS = {
    "moe_config_missing": 'Triton MoE kernel config missing (untuned, "sub-optimal"): ',
    "moe_config_fallback": (
        "Triton MoE kernel config of another Triton version used (none for this one, "
        '"sub-optimal"): '
    ),
    "block_gemm_config_missing": (
        'W8A8 block FP8/INT8 GEMM config missing (default kernel config, "sub-optimal"): '
    ),
}
_LIST_SHOWN = 8
# switch fact -> the fact with the reason SGLang logged for turning it off.
_REASONS = {
    "piecewise_cuda_graph": "piecewise_cuda_graph_disabled_reason",
    "overlap_schedule": "overlap_schedule_disabled_reason",
}


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
    diff = ledger_diff(record, baseline, policy)
    unledgered = unledgered_baseline(record, baseline)
    log_diff = diff.to_json() if diff is not None else None
    if record.outcome != "ready" or baseline is None or baseline is record:
        f = ledger_finding(diff, findings, policy, unledgered)
        if f:
            findings.append(f)
        return Comparison(
            record,
            baseline,
            kind if baseline else None,
            tuple(findings),
            decode=decode,
            log_diff=log_diff,
        )
    for check, (fact, label) in DROP_CHECKS.items():
        f = _drop_finding(check, fact, label, record, baseline, policy, evidence)
        if f:
            findings.append(f)
    for check, (fact, label) in SWITCH_CHECKS.items():
        f = _switch_finding(check, fact, label, record, baseline, policy, evidence)
        if f:
            findings.append(f)
    for check in LIST_CHECKS:
        f = _list_finding(check, record, baseline, policy, evidence)
        if f:
            findings.append(f)
    f = _missing_finding(record, baseline, policy)
    if f:
        findings.append(f)
    findings.extend(runtime_findings(record, baseline, policy, evidence, decode))
    f = ledger_finding(diff, findings, policy, unledgered)
    if f:
        findings.append(f)
    return Comparison(record, baseline, kind, tuple(findings), decode=decode, log_diff=log_diff)


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
    settings = policy.settings("startup_stalled")
    multiple = float(settings["baseline_multiple"])
    floor = float(settings["min_seconds"])
    took = baseline.fact("startup_seconds") if baseline is not None else None
    if is_number(took):
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
        if is_number(took)
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
    if not policy.enabled(check) or not is_number(old) or not is_number(new) or old <= 0:  # type: ignore[operator]
        return None
    assert isinstance(old, int | float) and isinstance(new, int | float)
    drop = (old - new) / old * 100
    settings = policy.settings(check)
    if drop >= float(settings["critical_drop_percent"]):
        severity: Severity = "critical"
    elif drop >= float(settings["warning_drop_percent"]):
        severity = "warning"
    else:
        return None
    if check == "max_running_requests_drop":
        evidence = evidence + _capacity_limits(record)
    return Finding(
        check=check,
        severity=severity,
        baseline=old,
        current=new,
        message=f"{label} {fmt_value(old)} → {fmt_value(new)} (−{drop:.0f} %)",
        evidence=evidence,
    )


def _capacity_limits(record: StartupRecord) -> tuple[Evidence, ...]:
    """The limits SGLang said set max_running_requests (rules/60-downgrades.yaml, the mamba
    cap), as evidence; never a claim that one caused the drop."""
    said = []
    limit, value = (
        record.fact("max_running_requests_limit"),
        record.fact("max_running_requests_limited_to"),
    )
    if limit is not None:
        said.append(f"{limit}" + (f" ({value})" if value is not None else ""))
    cap = record.fact("mamba_running_cap")
    if cap is not None:
        said.append(f"the mamba state cache ({cap})")
    if not said:
        return ()
    return (note("SGLang logged a max_running_requests limit: " + "; ".join(said)),)


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
    reason_fact = _REASONS.get(fact)
    reason = record.fact(reason_fact) if reason_fact else None
    extra: tuple[Evidence, ...] = (
        (Evidence("logged_by_sglang", field=reason_fact, new=reason),) if reason else ()
    )
    if fact == "overlap_schedule" and not reason:
        extra = (
            note(
                "no line said why: only the resolved server_args shows it (0.5.23 turns the "
                "overlap scheduler off for a mamba model's no_buffer radix cache silently)"
            ),
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
    given = flag_names(record)
    asked = [flag for flag in switch_flags(fact) if flag in given]
    if asked:
        return f"{setting}: {asked[0]} is on the command line"
    return f"{setting} not on the command line: set by SGLang"


def _list_finding(
    check: str,
    record: StartupRecord,
    baseline: StartupRecord,
    policy: Policy,
    evidence: tuple[Evidence, ...],
) -> Finding | None:
    """Entries of a list fact (the check's name: config files) new against the baseline."""
    now = record.fact(check)
    before = baseline.fact(check)
    if not policy.enabled(check) or not isinstance(now, tuple):
        return None
    old = set(before) if isinstance(before, tuple) else set()
    new = [name for name in now if name not in old]
    if not new:
        return None
    shown = ", ".join(new[:_LIST_SHOWN])
    more = f" (+{len(new) - _LIST_SHOWN} more: sentinel diff)" if len(new) > _LIST_SHOWN else ""
    return Finding(
        check=check,
        severity=policy.severity(check),
        baseline=tuple(sorted(old)),
        current=tuple(now),
        message=LIST_CHECKS[check] + shown + more,
        evidence=evidence,
    )


def _missing_finding(
    record: StartupRecord, baseline: StartupRecord, policy: Policy
) -> Finding | None:
    if not policy.enabled("fact_missing"):
        return None
    watched: Sequence[str] = policy.settings("fact_missing")["facts"]
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
