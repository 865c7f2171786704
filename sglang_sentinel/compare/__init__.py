"""Compare: a startup record against its baseline, under a policy -> findings; the read side.

policy.py          Policy, load_policy  the checks (CHECKS), their settings, loaded and validated
findings.py        compare              drop, switch, MoE, missing, failed, invalid, stalled
runtime_checks.py  decode_settings      decode throughput, CUDA graph off, slow phases
decode_stats.py    describe             decode samples compared bucket by bucket (a rank test)
launch.py          common_evidence      what differs at launch: flags, server_args, free memory
status.py          evaluate, collect_status  a unit's latest decided startup compared, and the one
                                        under way judged now: what check, report and the page read
"""

from .decode_stats import describe, phase_durations
from .findings import compare, stall_after
from .launch import common_evidence
from .policy import CHECKS, Policy, load_policy, policy_problems, reached_tiers
from .runtime_checks import decode_settings
from .status import HISTORY, UnitStatus, collect_status, evaluate

__all__ = [
    "CHECKS",
    "HISTORY",
    "Policy",
    "UnitStatus",
    "collect_status",
    "common_evidence",
    "compare",
    "decode_settings",
    "describe",
    "evaluate",
    "load_policy",
    "phase_durations",
    "policy_problems",
    "reached_tiers",
    "stall_after",
]
