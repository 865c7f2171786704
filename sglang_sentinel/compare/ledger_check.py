"""The `new_downgrade_message` check: downgrade templates a startup printed and its baseline
did not (ledger.py), as one finding.

Called by compare.compare() after the other checks, so a template whose line a rule named and
another finding already judged (the PCG line and `piecewise_cuda_graph_disabled`) is shown,
and said to be judged, but never alerts a second time: a finding whose new templates are all
judged so has severity info.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ..evidence import note
from ..facts import FACTS
from ..logtemplates import LogDiff, LogLine, log_diff
from ..model import Finding, Severity, StartupRecord

LEDGER_CHECK = "new_downgrade_message"
LEDGER_KEYS: Mapping[str, set[str]] = {
    LEDGER_CHECK: {"severity", "enabled", "accepted_messages"},
}
_SHOWN = 3  # examples quoted in the finding's message; all of them are in its evidence
# check -> the facts its finding judges: the check's own name when it is a fact, and the facts
# whose status-page row the check flags (facts.py).
# The capacity drop's evidence names the limit SGLang logged (compare._capacity_limits).
_ALSO_JUDGED: Mapping[str, frozenset[str]] = {
    "max_running_requests_drop": frozenset(
        {"max_running_requests_limit", "max_running_requests_limited_to", "mamba_running_cap"}
    ),
    "overlap_schedule_disabled": frozenset(
        {"overlap_schedule", "overlap_schedule_disabled_reason"}
    ),
}
_JUDGES: Mapping[str, frozenset[str]] = {
    check: frozenset(
        {check}
        | {f.name for f in FACTS if f.page and f.page.check == check}
        | _ALSO_JUDGED.get(check, frozenset())
    )
    for check in {f.page.check for f in FACTS if f.page and f.page.check} | set(_ALSO_JUDGED)
}


class _Policy(Protocol):
    @property
    def checks(self) -> Mapping[str, Mapping[str, Any]]: ...

    def enabled(self, check: str) -> bool: ...

    def severity(self, check: str) -> Severity: ...


def accepted_patterns(policy: _Policy) -> tuple[re.Pattern[str], ...]:
    """`policy.checks.new_downgrade_message.accepted_messages`, compiled (validated on load)."""
    raw = policy.checks.get(LEDGER_CHECK, {}).get("accepted_messages", ())
    return tuple(re.compile(str(p)) for p in raw)


def ledger_problems(check: str, key: str, value: Any) -> str | None:
    """What is wrong with one setting of the check, None when nothing (compare's validation)."""
    if check != LEDGER_CHECK or key != "accepted_messages":
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "must be a list of regular expressions (matched against a template or its example)"
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as exc:
            return f"{pattern!r} is not a regular expression: {exc}"
    return None


def ledger_diff(
    record: StartupRecord, baseline: StartupRecord | None, policy: _Policy
) -> LogDiff | None:
    """The startup's log diff against its baseline (None: nothing to compare)."""
    if record.outcome == "starting":
        return None
    return log_diff(record, baseline, accepted_patterns(policy))


def judged_by(line: LogLine, findings: Sequence[Finding]) -> str | None:
    """The check of another finding that already judged the fact this line's rule named."""
    facts = set(line.facts)
    for f in findings:
        if facts & _JUDGES.get(f.check, frozenset({f.check})):
            return f.check
    return None


def alerting(finding: Finding) -> bool:
    """False for a ledger finding of severity info: shown everywhere, alerted nowhere (neither
    a regression series nor a direct push), since its lines are judged or merely noted."""
    return not (finding.check == LEDGER_CHECK and finding.severity == "info")


def _info(message: str) -> Finding:
    """A ledger finding that only informs: nothing new to judge, and what was not compared."""
    return Finding(
        check=LEDGER_CHECK, severity="info", baseline=None, current=(), message=message, evidence=()
    )


def ledger_finding(
    diff: LogDiff | None,
    findings: Sequence[Finding],
    policy: _Policy,
    unledgered: str | None = None,
) -> Finding | None:
    """One finding for the new downgrade templates, or None; `unledgered` is why the baseline
    has no ledger to compare with (logtemplates.unledgered_baseline), said as an info finding."""
    if not policy.enabled(LEDGER_CHECK):
        return None
    if diff is None:
        if unledgered is None:
            return None
        # No false alarm, and no silent "none" either: nothing was compared, and why.
        return _info(f"downgrade messages not compared with the baseline: {unledgered}")
    new = diff.new_downgrades
    if not new:
        if not diff.dropped:
            return None
        # Nothing new among the kept, but lines past the bound were never compared: say so
        # (info, no alert: a startup that noisy is so at every start), never a silent "none".
        return _info(
            "no downgrade message the baseline never printed among those kept, " + diff.not_kept()
        )
    judged = [judged_by(line, findings) for line in new]
    evidence = []
    for line, check in zip(new, judged, strict=True):
        where = f"on {line.ranks} ranks" if line.ranks > 1 else "on 1 rank"
        also = f"; already judged by {check}" if check else ""
        evidence.append(note(f"new in this startup's log ({where}{also}): {line.example}"))
    severity: Severity = "info" if all(judged) else policy.severity(LEDGER_CHECK)
    shown = "; ".join(line.example for line in new[:_SHOWN])
    more = f" (+{len(new) - _SHOWN} more)" if len(new) > _SHOWN else ""
    count = len(new)
    dropped = f", {diff.not_kept()}" if diff.dropped else ""
    # Said once: a new release rewords messages, so some new templates are old ones reworded.
    upgrade = " (the SGLang version changed)" if diff.version_changed else ""
    if diff.version_changed:
        evidence.insert(0, note(diff.version_changed))
    return Finding(
        check=LEDGER_CHECK,
        severity=severity,
        baseline=None,
        current=tuple(line.template for line in new),
        message=(
            f"{count} downgrade message{'s' if count > 1 else ''} the baseline never "
            f"printed{upgrade}: {shown}{more}{dropped}"
        ),
        evidence=tuple(evidence),
    )


__all__ = [
    "LEDGER_CHECK",
    "LEDGER_KEYS",
    "accepted_patterns",
    "alerting",
    "judged_by",
    "ledger_diff",
    "ledger_finding",
    "ledger_problems",
]
