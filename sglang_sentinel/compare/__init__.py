"""Compare: a startup record against its baseline, under a policy -> findings; the read side.

checks.py          TABLE, CHECKS        the check table: id, alert, runbook anchor, default settings
policy.py          Policy, load_policy  policy files and inline settings over the table, validated
findings.py        compare              drop, switch, MoE, missing, failed, invalid, stalled
runtime_checks.py  decode_settings      decode throughput, CUDA graph off, slow phases
decode_stats.py    describe             decode samples compared bucket by bucket (a rank test)
launch.py          common_evidence      what differs at launch: flags, server_args, free memory
status.py          unit_status, evaluate  the read model: each unit's latest decided startup compared,
                                        the one under way judged now, and its verdict; what check,
                                        report, scan, the page and /metrics read;
                   Snapshot             what one scrape of /metrics reads, taken at once
"""

from .checks import ALERT_NAMES, CHECKS, TABLE, Check, alert_name, runbook_url
from .decode_stats import describe, phase_durations
from .findings import compare, stall_after
from .launch import common_evidence
from .ledger_check import LEDGER_CHECK, accepted_patterns, alerting
from .policy import Policy, load_policy, policy_problems, reached_tiers
from .runtime_checks import decode_settings
from .status import (
    HISTORY,
    VERDICTS,
    Evaluate,
    Snapshot,
    UnitStatus,
    Verdict,
    evaluate,
    unit_status,
    verdict_of,
)

__all__ = [
    "ALERT_NAMES",
    "CHECKS",
    "HISTORY",
    "LEDGER_CHECK",
    "TABLE",
    "VERDICTS",
    "Check",
    "Evaluate",
    "Policy",
    "Snapshot",
    "UnitStatus",
    "Verdict",
    "accepted_patterns",
    "alert_name",
    "alerting",
    "common_evidence",
    "compare",
    "decode_settings",
    "describe",
    "evaluate",
    "load_policy",
    "phase_durations",
    "policy_problems",
    "reached_tiers",
    "runbook_url",
    "stall_after",
    "unit_status",
    "verdict_of",
]
