"""Checks on what a startup did after ready and how long it took: decode throughput at like
load, decode steps without CUDA graph, the CUDA-graph ceiling, and slow startups.

Called by findings.compare(); each returns findings with evidence, never a verdict on cause.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..evidence import note
from ..model import Evidence, Finding, Severity, StartupRecord
from .decode_stats import DecodeSettings, bucket_evidence, compare_decode, describe, phase_durations


class _Policy(Protocol):
    def settings(self, check: str) -> Mapping[str, Any]: ...

    def enabled(self, check: str) -> bool: ...

    def severity(self, check: str) -> Severity: ...


def decode_settings(policy: _Policy) -> DecodeSettings:
    s = policy.settings("decode_throughput_drop")
    return DecodeSettings(
        min_samples=int(s["min_samples"]), warmup_seconds=float(s["warmup_seconds"])
    )


def decode_result(
    record: StartupRecord, baseline: StartupRecord | None, policy: _Policy
) -> dict[str, Any]:
    """The `runtime.decode` block of a startup against its baseline."""
    return compare_decode(
        record.decode,
        baseline.decode if baseline is not None else None,
        decode_settings(policy),
        final=record.ended_at is not None,
    )


def runtime_findings(
    record: StartupRecord,
    baseline: StartupRecord,
    policy: _Policy,
    evidence: tuple[Evidence, ...],
    decode: Mapping[str, Any],
) -> list[Finding]:
    """The findings of the runtime checks; `decode` is `decode_result(record, baseline, policy)`."""
    out: list[Finding] = []
    if policy.enabled("decode_throughput_drop"):
        out.extend(_one(_decode_drop(decode, policy, evidence)))
    if policy.enabled("decode_without_cuda_graph"):
        out.extend(_one(_graph_off(record, decode, policy, evidence)))
    if policy.enabled("cuda_graph_ceiling"):
        out.extend(_one(_ceiling(record, baseline, policy, evidence)))
    if policy.enabled("startup_slow"):
        out.extend(_one(_slow(record, baseline, policy, evidence)))
    return out


def _one(f: Finding | None) -> list[Finding]:
    return [f] if f is not None else []


def _decode_drop(
    result: Mapping[str, Any], policy: _Policy, evidence: tuple[Evidence, ...]
) -> Finding | None:
    ratio = result["ratio"]
    if result["verdict"] != "regressed" or ratio is None:
        return None
    s = policy.settings("decode_throughput_drop")
    drop = (1 - ratio) * 100
    if drop >= float(s["critical_drop_percent"]):
        severity: Severity = "critical"
    elif drop >= float(s["warning_drop_percent"]):
        severity = "warning"
    else:
        return None
    detail = [note(describe(result)), note(f"z={result.get('z')}, p={result.get('p_value')}")]
    spec = result.get("speculative")
    if spec:
        detail.append(
            note(
                f"speculative: accept len ×{spec['accept_len_ratio']}, "
                f"step rate ×{spec['step_rate_ratio']} (accept len down = acceptance loss, "
                "step rate down = kernel loss)"
            )
        )
    return Finding(
        check="decode_throughput_drop",
        severity=severity,
        baseline=result.get("baseline_tps"),
        current=result.get("current_tps"),
        message=f"decode throughput at like load fell {drop:.0f} % (ratio {ratio:.2f})",
        evidence=(*detail, *map(note, bucket_evidence(result)), *evidence),
    )


def _graph_off(
    record: StartupRecord,
    result: Mapping[str, Any],
    policy: _Policy,
    evidence: tuple[Evidence, ...],
) -> Finding | None:
    now, before = result["graph_off_share"], result["baseline_graph_off_share"]
    if now is None or before is None:
        return None
    limit = float(policy.settings("decode_without_cuda_graph")["increase_percent"])
    if (now - before) * 100 < limit:
        return None
    lines = record.decode.get("counts", {})
    return Finding(
        check="decode_without_cuda_graph",
        severity=policy.severity("decode_without_cuda_graph"),
        baseline=before,
        current=now,
        message=(
            f"{now * 100:.0f} % of decode lines ran without CUDA graph "
            f"(baseline {before * 100:.0f} %)"
        ),
        evidence=(
            note(
                f"{lines.get('graph_off_lines', 0)} of {lines.get('decode_lines', 0)} decode "
                "lines had `cuda graph: False`"
            ),
            *_ceiling_evidence(record),
            *evidence,
        ),
    )


def _ceiling_evidence(record: StartupRecord) -> list[Evidence]:
    mrr, cap = record.fact("max_running_requests"), record.fact("cuda_graph_max_bs")
    if isinstance(mrr, int) and isinstance(cap, int):
        return [note(f"max_running_requests={mrr}, largest captured CUDA-graph batch={cap}")]
    return []


def _above_ceiling(record: StartupRecord) -> bool:
    mrr, cap = record.fact("max_running_requests"), record.fact("cuda_graph_max_bs")
    return isinstance(mrr, int) and isinstance(cap, int) and mrr > cap


def _ceiling(
    record: StartupRecord, baseline: StartupRecord, policy: _Policy, evidence: tuple[Evidence, ...]
) -> Finding | None:
    if not _above_ceiling(record) or _above_ceiling(baseline):
        return None
    if record.fact("cuda_graph_max_bs") is None or baseline.fact("cuda_graph_max_bs") is None:
        return None
    mrr, cap = record.fact("max_running_requests"), record.fact("cuda_graph_max_bs")
    return Finding(
        check="cuda_graph_ceiling",
        severity=policy.severity("cuda_graph_ceiling"),
        baseline=baseline.fact("cuda_graph_max_bs"),
        current=cap,
        message=(
            f"max_running_requests {mrr} exceeds the largest captured CUDA-graph batch {cap}: "
            "batches above it decode without a graph"
        ),
        evidence=(
            note(
                f"baseline: max_running_requests={baseline.fact('max_running_requests')}, "
                f"cuda_graph_max_bs={baseline.fact('cuda_graph_max_bs')}"
            ),
            *evidence,
        ),
    )


def _slow(
    record: StartupRecord, baseline: StartupRecord, policy: _Policy, evidence: tuple[Evidence, ...]
) -> Finding | None:
    now, before = record.fact("startup_seconds"), baseline.fact("startup_seconds")
    if not isinstance(now, int | float) or not isinstance(before, int | float):
        return None
    s = policy.settings("startup_slow")
    pct = float(s["slower_percent"])
    secs = float(s["slower_seconds"])
    if now - before < secs or now < before * (1 + pct / 100):
        return None
    phases_now = phase_durations(record.decode.get("phases", {}), record.started_at)
    phases_before = phase_durations(baseline.decode.get("phases", {}), baseline.started_at)
    lines = [
        Evidence("phase_duration", field=name, old=phases_before.get(name), new=phases_now[name])
        for name in ("weight_load", "kv_allocation", "graph_capture", "time_to_ready")
        if name in phases_now
    ]
    return Finding(
        check="startup_slow",
        severity=policy.severity("startup_slow"),
        baseline=before,
        current=now,
        message=f"startup took {now:.0f} s, {now - before:.0f} s longer than the baseline ({before:.0f} s)",
        evidence=(*lines, *evidence),
    )
