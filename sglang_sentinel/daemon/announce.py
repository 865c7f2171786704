"""What the running daemon tells people and systemd: sd_notify (READY, STATUS, WATCHDOG,
STOPPING) and the log events of startups, findings and pins.

The announcer remembers what it said (a startup's outcome and checks, each unit's open
findings, the pins) so that it says each thing once: a runtime line that re-saves a ready
startup, a restart or a replay after a cursor reset logs only what is new.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from systemd import daemon as sd

from ..compare import UnitStatus
from ..logs import Logger
from ..model import Comparison, Finding

log = Logger("sglang_sentinel")

ANNOUNCED_KEPT = 256  # startups whose last logged outcome/findings are remembered


def _notify(message: str) -> None:
    sd.notify(message)


class Announcer:
    """Says what changed, once: startup_recorded, finding_raised / finding_cleared,
    baseline_pinned / baseline_unpinned, and the unit summary in systemd's STATUS."""

    def __init__(self, notify: Callable[[str], object] = _notify) -> None:
        self._notify = notify
        # invocation -> (outcome, checks) last logged, for the most recent startups only.
        self._announced: dict[str, tuple[str, tuple[str, ...] | None]] = {}
        # unit -> open check id -> invocation (8 hex), for finding_raised / finding_cleared
        self._open_findings: dict[str, dict[str, str]] = {}
        self._pins: dict[str, str] = {}  # unit -> pinned invocation, to log the CLI's (un)pins
        self._last_status = ""

    # -- systemd ---------------------------------------------------------------------------------

    def ready(self) -> None:
        self._notify("READY=1")

    def stopping(self) -> None:
        self._notify("STOPPING=1")

    def watchdog(self) -> None:
        self._notify("WATCHDOG=1")

    def status(self, views: Iterable[UnitStatus]) -> None:
        """STATUS= with each unit's latest decided startup, when it changed."""
        parts = []
        for view in views:
            c = view.comparison
            if c is None:
                parts.append(f"{view.unit}: no startup yet")
                continue
            base = c.baseline_kind or "no baseline"
            parts.append(f"{view.unit}: {c.record.outcome}, {len(c.findings)} finding(s) vs {base}")
        status = "; ".join(parts)
        if status != self._last_status:
            self._notify(f"STATUS={status}")
            self._last_status = status

    # -- the log ---------------------------------------------------------------------------------

    def remember(
        self,
        outcomes: Iterable[tuple[str, str]],
        views: Iterable[UnitStatus],
        pins: Mapping[str, str],
    ) -> None:
        """Take what an earlier run already logged: the recent startups' (invocation, outcome),
        each unit's open findings (from its status) and the pins (unit -> invocation)."""
        for inv, outcome in outcomes:
            if outcome == "starting":
                continue
            # Logged by an earlier run with findings not known here (comparisons are not
            # stored, and comparing hundreds of startups would delay the start): a later save
            # with the same outcome is not announced again; finding_raised / finding_cleared
            # still say what changed in the unit's open findings.
            self._announced[inv] = (outcome, None)
        for view in views:  # as findings() computes a unit's open set
            now: dict[str, str] = {}
            for c in (view.comparison, view.starting):
                if c is not None:
                    now.update({f.check: c.record.invocation_id[:8] for f in c.findings})
            self._open_findings[view.unit] = now
        self._pins = dict(pins)

    def recorded(
        self, comparisons: Sequence[Comparison], already_stored: Collection[str] = ()
    ) -> None:
        """startup_recorded for each decided startup whose outcome or findings changed.

        `already_stored`: startups the state held with the same outcome before this commit. One
        of those this run has not logged (older than the ANNOUNCED_KEPT it remembered, read
        again after a cursor reset or under another target list) was logged when it was
        stored: it is not logged again."""
        for c in comparisons:
            r = c.record
            if r.outcome == "starting":
                continue
            # Runtime lines (batch stats) re-save a ready startup every few seconds; announce it
            # and its findings only when the outcome or the set of findings changed.
            announced = (r.outcome, tuple(f.check for f in c.findings))
            before = self._announced.get(r.invocation_id)
            if before is None and r.invocation_id in already_stored:
                before = (r.outcome, None)
            self._announced[r.invocation_id] = announced
            if len(self._announced) > ANNOUNCED_KEPT:
                del self._announced[next(iter(self._announced))]
            if before == announced or before == (r.outcome, None):
                continue
            log.info(
                "startup_recorded",
                unit=r.unit,
                invocation=r.invocation_id[:8],
                outcome=r.outcome,
                max_running_requests=r.facts.get("max_running_requests"),
                findings=[f.check for f in c.findings],
            )

    def pin_changes(self, units: Iterable[str], pins: Mapping[str, str]) -> None:
        """baseline_pinned / baseline_unpinned for pins another process (the CLI) changed."""
        for unit in sorted(units):
            before, now = self._pins.get(unit), pins.get(unit)
            if now is not None and now != before:
                log.info("baseline_pinned", unit=unit, invocation=now[:8])
            elif now is None and before is not None:
                log.info("baseline_unpinned", unit=unit, invocation=before[:8])
        self._pins = dict(pins)

    def findings(self, views: Iterable[UnitStatus]) -> list[Comparison]:
        """Log findings raised/cleared per unit; the comparisons whose findings are open.

        A unit's open set is the findings of its latest decided startup plus `startup_stalled`
        of the startup under way, once that one has been starting for too long.
        """
        wanted: list[Comparison] = []
        for view in views:
            unit = view.unit
            now: dict[str, tuple[str, Finding]] = {}
            for c in (view.comparison, view.starting):
                if c is not None:
                    if c is view.comparison or c.findings:
                        wanted.append(c)
                    inv = c.record.invocation_id[:8]
                    now.update({f.check: (inv, f) for f in c.findings})
            before = self._open_findings.get(unit, {})
            for check in sorted(now.keys() - before.keys()):
                inv, f = now[check]
                log.warning(
                    "finding_raised",
                    unit=unit,
                    invocation=inv,
                    check=check,
                    severity=f.severity,
                    message=f.message,
                )
            for check in sorted(before.keys() - now.keys()):
                log.info("finding_cleared", unit=unit, invocation=before[check], check=check)
            self._open_findings[unit] = {check: inv for check, (inv, _) in now.items()}
        return wanted
