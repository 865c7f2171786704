"""The check table: every check a comparison makes, written once.

Each row names the check, the alert it raises (the same name in the Prometheus rules, in a
direct Alertmanager push and as the runbook's anchor) and its default settings. A policy file
(the bundled rules/policy.yaml, or the one `rules.policy` names) and the config's inline
`policy:` merge over these defaults, so a file that names a check without a setting changes
nothing; the settings a policy may give a check are its defaults' keys and `enabled`. A check
whose defaults carry `critical_drop_percent` escalates with the size of the drop, from warning
to critical; any other has the one severity its settings say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

from ..model import Severity

RUNBOOK_URL: Final = "https://github.com/sglang-sentinel/sglang-sentinel/blob/main/docs/runbook.md"
# The alert of a finding whose check has no row (a check added without a rule yet).
FALLBACK_ALERT_NAME: Final = "SGLangStartupRegression"
ESCALATION_TIERS: tuple[Severity, ...] = ("warning", "critical")


@dataclass(frozen=True, slots=True)
class Check:
    id: str
    alert: str  # alertname in deploy/prometheus's rules and in a direct push; runbook anchor
    defaults: Mapping[str, Any]  # what a policy merges over; its keys (+ enabled) may be set

    @property
    def keys(self) -> frozenset[str]:
        return frozenset({*self.defaults, "enabled"})

    @property
    def escalates(self) -> bool:
        return "critical_drop_percent" in self.defaults

    @property
    def runbook_url(self) -> str:
        return f"{RUNBOOK_URL}#{self.alert.lower()}"


def _check(check_id: str, alert: str, **defaults: Any) -> Check:
    return Check(check_id, alert, MappingProxyType(defaults))


# In the order a comparison reports them (and /metrics lists them).
TABLE: tuple[Check, ...] = (
    # Effective capacity (TP0 summary line) fell by at least this share of the baseline.
    _check(
        "max_running_requests_drop",
        "SGLangCapacityDropped",
        warning_drop_percent=5,
        critical_drop_percent=20,
    ),
    # KV cache pool size (#tokens) fell by at least this share.
    _check(
        "kv_cache_tokens_drop",
        "SGLangKVCacheShrunk",
        warning_drop_percent=10,
        critical_drop_percent=50,
    ),
    _check("piecewise_cuda_graph_disabled", "SGLangPiecewiseCudaGraphDisabled", severity="warning"),
    _check("cuda_graph_disabled", "SGLangCudaGraphDisabled", severity="critical"),
    # The overlap scheduler on in the baseline, off now: a line said so, or only the resolved
    # server_args (`disable_overlap_schedule=True`; 0.5.23 turns it off for mamba silently).
    _check("overlap_schedule_disabled", "SGLangOverlapScheduleDisabled", severity="warning"),
    # Triton MoE configs missing now that were not missing in the baseline.
    _check("moe_config_missing", "SGLangMoEConfigMissing", severity="warning"),
    # Triton MoE configs of another Triton version used now (this version's file missing)
    # that the baseline did not need.
    _check("moe_config_fallback", "SGLangMoEConfigFallback", severity="warning"),
    # W8A8 block FP8/INT8 GEMM shapes run with the default kernel config now (no tuned file)
    # that the baseline had tuned.
    _check("block_gemm_config_missing", "SGLangBlockGemmConfigMissing", severity="warning"),
    _check("startup_failed", "SGLangStartupFailed", severity="critical"),
    # The memory profile left a negative KV pool (`... is larger than the profiled value -N`):
    # the start cannot hold a request. Judged whatever the outcome, as soon as the line is read.
    _check("kv_pool_negative", "SGLangKVPoolNegative", severity="critical"),
    # A ready startup lacks a fact its baseline had: a rule no longer matches (SGLang upgrade?).
    _check(
        "fact_missing",
        "SGLangSentinelRulesStale",
        severity="warning",
        facts=(
            "max_running_requests",
            "max_total_num_tokens",
            "kv_cache_tokens",
            "available_gpu_mem_gb",
            "load_avail_mem_gb",
            "weight_mem_gb",
            "cuda_graph",
            "piecewise_cuda_graph",
            "context_len",
        ),
    ),
    # Decode throughput at like load (compare/decode_stats.py), on the `regressed` verdict only,
    # by how far the ratio fell; samples within warmup_seconds of ready are skipped, a verdict
    # needs min_samples clean samples at like load.
    _check(
        "decode_throughput_drop",
        "SGLangDecodeThroughputDropped",
        warning_drop_percent=10,
        critical_drop_percent=25,
        warmup_seconds=300,
        min_samples=30,
    ),
    # Share of decode lines with `cuda graph: False` rose by at least this many points.
    _check(
        "decode_without_cuda_graph",
        "SGLangDecodeWithoutCudaGraph",
        increase_percent=10,
        severity="warning",
    ),
    # max_running_requests now exceeds the largest captured CUDA-graph batch; the baseline's did not.
    _check("cuda_graph_ceiling", "SGLangCudaGraphCeilingExceeded", severity="warning"),
    # Time to ready grew by at least slower_percent AND slower_seconds against the baseline.
    _check(
        "startup_slow",
        "SGLangStartupSlow",
        slower_percent=50,
        slower_seconds=60,
        severity="warning",
    ),
    # A line reported a fact with an impossible value (fact_ranges.py); recorded as null.
    _check("fact_invalid", "SGLangSentinelFactInvalid", severity="warning"),
    # Neither ready nor failed after max(min_seconds, baseline_multiple x the baseline's time
    # to ready): a hang in NCCL init, weight loading or CUDA graph capture.
    _check(
        "startup_stalled",
        "SGLangStartupStalled",
        severity="warning",
        baseline_multiple=3,
        min_seconds=900,
    ),
    # A startup-window line with a downgrade word whose template the baseline never printed
    # (the downgrade ledger; compare/ledger_check.py). accepted_messages: regexes it ignores.
    _check(
        "new_downgrade_message",
        "SGLangNewDowngradeMessage",
        severity="warning",
        accepted_messages=(),
    ),
)
BY_ID: Final[Mapping[str, Check]] = MappingProxyType({c.id: c for c in TABLE})
CHECKS: tuple[str, ...] = tuple(c.id for c in TABLE)
ESCALATING_CHECKS = frozenset(c.id for c in TABLE if c.escalates)
# check -> alertname, as in the Prometheus rules, so both alert paths name an alert the same.
ALERT_NAMES: Final[Mapping[str, str]] = MappingProxyType({c.id: c.alert for c in TABLE})


def alert_name(check: str) -> str:
    row = BY_ID.get(check)
    return row.alert if row is not None else FALLBACK_ALERT_NAME


def runbook_url(check: str) -> str:
    row = BY_ID.get(check)
    return row.runbook_url if row is not None else RUNBOOK_URL
