"""Reports: comparisons rendered for a person (five-second read) or as the JSON contract."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ..compare import LEDGER_CHECK, describe, phase_durations
from ..evidence import render_evidence
from ..facts import STARTUP_FACTS, report_facts
from ..logtemplates import OTHER, LogDiff, no_ledger_reason
from ..model import SEVERITY_ORDER, Comparison, Evidence, Finding, StartupRecord
from ..state import plain
from .wording import outcome

# The facts line's facts (facts.py), and those whose absence a person should be told about on a
# ready startup.
_LINE_FACTS = report_facts()
_CORE_FACTS = tuple(f.name for f in _LINE_FACTS if f.report and f.report.core)
_MAX_EVIDENCE = 6


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return (
        datetime.fromtimestamp(ts, timezone.utc)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z")
    )


def local_time(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


# -- JSON ---------------------------------------------------------------------------------------


def startup_json(comparison: Comparison) -> dict[str, Any]:
    """One element of the public `scan --json` contract (see README)."""
    r = comparison.record
    baseline = None
    if comparison.baseline is not None:
        baseline = {
            "invocation_id": comparison.baseline.invocation_id,
            "kind": comparison.baseline_kind,
        }
    return {
        "unit": r.unit,
        "invocation_id": r.invocation_id,
        "started_at": iso(r.started_at),
        "ready_at": iso(r.ready_at),
        "outcome": r.outcome,
        "failure_reason": r.failure_reason,
        "facts": {name: plain(r.facts.get(name), finite=True) for name in STARTUP_FACTS},
        "launch_flags": list(r.launch_flags),
        "server_args": plain(r.server_args, finite=True),
        "notes": [render_evidence(n) for n in r.notes],
        "baseline": baseline,
        "runtime": runtime_json(comparison),
        "log_diff": plain(comparison.log_diff),
        "findings": [
            {
                "check": f.check,
                "severity": f.severity,
                "baseline": plain(f.baseline, finite=True),
                "current": plain(f.current, finite=True),
                "message": f.message,
                "evidence": [render_evidence(e) for e in f.evidence],
            }
            for f in comparison.findings
        ],
    }


def runtime_json(comparison: Comparison) -> dict[str, Any]:
    """What the startup did after ready: decode at like load, retractions, OOM lines, phases."""
    r = comparison.record
    counts = r.decode.get("counts", {})
    return {
        "decode": dict(comparison.decode),
        "decode_lines": counts.get("decode_lines", 0),
        "retractions": counts.get("retractions", 0),
        "out_of_memory_lines": counts.get("oom_lines", 0),
        "phases": phase_durations(r.decode.get("phases", {}), r.started_at),
    }


def scan_json(comparisons: Sequence[Comparison]) -> dict[str, Any]:
    out = ScanOutput(as_json=True)
    for c in comparisons:
        out.add(c)
    return out.json()


class ScanOutput:
    """`scan_json` or `render_report` built one comparison at a time: each is rendered when it is
    added and can then be let go (it holds two startups' records, decode samples and all, so a
    scan of a long history keeps only its output, not every compared record)."""

    def __init__(self, *, as_json: bool) -> None:
        self._as_json = as_json
        self._parts: list[tuple[tuple[float, str], Any]] = []

    def add(self, comparison: Comparison) -> None:
        r = comparison.record
        part = startup_json(comparison) if self._as_json else render_comparison(comparison)
        self._parts.append(((r.started_at, r.invocation_id), part))

    def _ordered(self) -> list[Any]:
        return [part for _, part in sorted(self._parts, key=lambda p: p[0])]

    def json(self) -> dict[str, Any]:
        return {"startups": self._ordered()}

    def text(self) -> str:
        if not self._parts:
            return "no startups found for the selected units"
        return "\n\n".join(self._ordered())


# -- human text ---------------------------------------------------------------------------------


def headline(record: StartupRecord) -> str:
    when = local_time(record.started_at)
    state = outcome(record, loud=str.upper, under_way="starting (not ready yet)")
    return f"{record.unit}  startup {record.invocation_id[:8]}  {when}  {state}"


def render_comparison(comparison: Comparison) -> str:
    r = comparison.record
    head = headline(r)
    if comparison.baseline is not None:
        kind = (
            "pinned baseline" if comparison.baseline_kind == "pinned" else "previous ready startup"
        )
        head += f"   vs {kind} {comparison.baseline.invocation_id[:8]}"
    lines = [head]
    findings = sorted(comparison.findings, key=lambda f: -SEVERITY_ORDER[f.severity])
    for f in findings:
        lines.append(f"  {f.severity.upper():<9} {f.message}")
    # The ledger's evidence is its lines, already quoted in its message.
    evidence = merged_evidence([f for f in findings if f.check != LEDGER_CHECK])
    if evidence:
        lines.append(f"  {'changed':<9} " + compact_evidence(evidence))
    if r.outcome == "ready":
        unseen = [name for name in _CORE_FACTS if r.facts.get(name) is None]
        if not findings:
            if comparison.baseline is None:
                lines.append(
                    f"  {'ok':<9} first ready startup: nothing to compare"
                    " (pin it with `sentinel baseline --pin`)"
                )
            else:
                lines.append(f"  {'ok':<9} no regression in the facts seen")
        if unseen:
            lines.append(f"  {'unseen':<9} not in the log, so not checked: " + ", ".join(unseen))
        lines.append("  " + _fact_line(r))
        if r.decode.get("counts", {}).get("decode_lines"):
            lines.append("  " + describe(comparison.decode))
    elif r.outcome == "starting" and not findings:
        # A stalled startup has its verdict (the finding); "pending" would contradict it.
        lines.append(f"  {'pending':<9} no verdict until the server is ready or fails")
    return "\n".join(lines)


def merged_evidence(findings: Sequence[Finding]) -> list[Evidence]:
    """The findings' evidence in order, each item once (by what it says)."""
    seen: set[str] = set()
    out: list[Evidence] = []
    for f in findings:
        for item in f.evidence:
            text = render_evidence(item)
            if text not in seen:
                seen.add(text)
                out.append(item)
    return out


def compact_evidence(evidence: Sequence[Evidence]) -> str:
    """One line: flags as +/-, free memory, and how many server_args SGLang changed itself."""
    flags: list[str] = []
    parts: list[str] = []
    self_set: list[str] = []
    tail: list[str] = []
    for item in evidence:
        if item.kind == "flags_added":
            flags.extend("+" + f for f in item.new)
        elif item.kind == "flags_removed":
            flags.extend("−" + f for f in item.old)
        elif item.kind == "server_arg_changed":
            if item.origin == "set_by_sglang":
                self_set.append(str(item.field))
        elif item.kind == "schema_changed":
            tail.append("schema changed (SGLang version?)")
        elif item.kind != "logged_by_sglang":
            parts.append(render_evidence(item))
    if flags:
        parts.insert(0, " ".join(flags))
    if self_set:
        shown = ", ".join(self_set[:_MAX_EVIDENCE])
        more = f" and {len(self_set) - _MAX_EVIDENCE} more" if len(self_set) > _MAX_EVIDENCE else ""
        parts.append(f"set by SGLang, not on the command line: {shown}{more}")
    parts.extend(tail)
    return "; ".join(parts) + " (details: sentinel diff)"


def _fact_line(r: StartupRecord) -> str:
    parts = []
    for fact in _LINE_FACTS:
        value = r.facts.get(fact.name)
        if fact.type == "list":  # shown as a count, and only when there is one
            value = len(value) if isinstance(value, tuple) and value else None
        if value is not None and fact.report is not None:
            parts.append(f"{fact.report.label}={value}")
    return "facts     " + " ".join(parts) if parts else "facts     none seen"


def render_report(comparisons: Sequence[Comparison]) -> str:
    out = ScanOutput(as_json=False)
    for c in comparisons:
        out.add(c)
    return out.text()


def render_startups(records: Sequence[StartupRecord], baselines: dict[str, str]) -> str:
    if not records:
        return "no startups recorded"
    rows = []
    for r in records:
        mark = " (baseline)" if baselines.get(r.unit) == r.invocation_id else ""
        mrr = r.facts.get("max_running_requests")
        rows.append(
            f"{r.invocation_id[:12]}  {local_time(r.started_at)}  {r.unit:<28} {r.outcome:<8}"
            f" max_running_requests={mrr if mrr is not None else '?'}{mark}"
        )
    return "\n".join(rows)


def render_diff(a: StartupRecord, b: StartupRecord, evidence: Sequence[Evidence]) -> str:
    lines = [
        f"{a.unit}: {a.invocation_id[:8]} ({local_time(a.started_at)}) → "
        f"{b.invocation_id[:8]} ({local_time(b.started_at)})"
    ]
    changed = False
    for name in STARTUP_FACTS:
        va, vb = a.facts.get(name), b.facts.get(name)
        if va != vb:
            changed = True
            lines.append(f"  {name:<38} {_show(va)} → {_show(vb)}")
    if not changed:
        lines.append("  facts identical")
    for item in evidence:
        lines.append(f"  {render_evidence(item)}")
    return "\n".join(lines)


def render_log_diff(a: StartupRecord, b: StartupRecord, diff: LogDiff | None) -> str:
    """`sentinel diff --log`: B's startup lines that A never printed, and those gone, the
    downgrade messages first."""
    lines = [
        f"{a.unit}: {a.invocation_id[:8]} ({local_time(a.started_at)}) → "
        f"{b.invocation_id[:8]} ({local_time(b.started_at)}), startup log lines"
    ]
    if diff is None:
        missing = a if a.ledger is None else b
        lines.append(
            f"  no ledger for {missing.invocation_id[:8]}: {no_ledger_reason(missing)}; "
            "nothing to compare"
        )
        return "\n".join(lines)
    if diff.version_changed:
        lines.append(f"  {diff.version_changed}")
    for sign, entries in (("new ", diff.new), ("gone", diff.gone)):
        # Downgrade lines first; another line is marked `(other)`: information only.
        for line in sorted(entries, key=lambda e: e.kind == OTHER):
            ranks = f"{line.ranks} rank{'s' if line.ranks != 1 else ''}"
            kind = "(other) " if line.kind == OTHER else ""
            lines.append(f"  {sign}  {kind}{line.template}")
            lines.append(f"        e.g. {line.example}  ({ranks})")
    if diff.dropped:
        lines.append(f"  new   {diff.not_kept()}")
    if not diff.new and not diff.gone and not diff.dropped:
        lines.append("  the same startup log lines")
    if diff.accepted:
        lines.append(f"  accepted (policy accepted_messages): {diff.accepted} new not shown")
    return "\n".join(lines)


def _show(value: object) -> str:
    if value is None:
        return "(not seen)"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)
