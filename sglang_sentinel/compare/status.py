"""The read side: a unit's latest decided startup, compared, and the one under way judged now.

`evaluate` compares one record with its unit's pinned baseline, else the previous ready
startup; `collect_status` reads each unit's status from the state. `sentinel check`, `report`,
the page and the daemon's snapshot read the state through these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Comparison, StartupRecord
from ..state import StateStore
from .findings import compare
from .policy import Policy

HISTORY = 12  # startups a unit's status carries (the page's charts)


def evaluate(
    store: StateStore, record: StartupRecord, policy: Policy, now: float | None = None
) -> Comparison:
    """Compare `record` with its unit's pinned baseline, else the previous ready startup.

    `now` (unix seconds) lets a startup still starting be judged stalled; stored comparisons are
    made without it, since a stall is a matter of the time it is looked at.
    """
    pinned_id = store.baseline_id(record.unit)
    if pinned_id is not None:
        pinned = store.startup(pinned_id)
        if pinned is not None:
            return compare(record, pinned, "pinned", policy, now)
    previous = store.previous_ready(record)
    return compare(record, previous, "previous" if previous else None, policy, now)


@dataclass(frozen=True, slots=True)
class UnitStatus:
    """What the page shows for one unit."""

    unit: str
    comparison: Comparison | None  # the latest decided (ready/failed) startup, compared
    starting: Comparison | None  # a startup under way, judged now (it may be startup_stalled)
    history: tuple[StartupRecord, ...]  # the last HISTORY startups, oldest first
    pinned: bool


def collect_status(
    store: StateStore, units: Sequence[str], policy: Policy, now: float, history: int = HISTORY
) -> list[UnitStatus]:
    """Read each unit's latest startup, its comparison and recent history from the state;
    a startup under way is judged at `now` (unix seconds), so a stalled one shows."""
    pins = store.baselines()
    out = []
    for unit in units:
        records = store.recent(unit, history)
        latest = records[-1] if records else None
        decided = (
            latest
            if latest is not None and latest.outcome != "starting"
            else store.latest(unit, decided=True)
        )
        out.append(
            UnitStatus(
                unit=unit,
                comparison=evaluate(store, decided, policy) if decided else None,
                starting=evaluate(store, latest, policy, now=now)
                if latest is not None and latest.outcome == "starting"
                else None,
                history=tuple(records),
                pinned=unit in pins,
            )
        )
    return out
