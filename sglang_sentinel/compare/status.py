"""The read side: each unit's status, the one read model of check, report, scan, the page and
/metrics.

A unit's status is its latest decided (ready or failed) startup compared with its baseline, plus
the startup under way judged at `now` (which can only be `startup_stalled`), its recent history,
its pin and outcome counts. Its verdict is the verdict of its latest startup: the one under way
while there is one (starting, or stalled), else the decided one (failed, its worst finding's
severity, or ok). Every surface reads a verdict here, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..model import SEVERITY_ORDER, Comparison, FactValue, PodRef, StartupRecord, Stats
from ..state import StateStore
from .findings import compare
from .policy import Policy

HISTORY = 12  # startups a unit's status carries (the page's charts)

Verdict = Literal["none", "ok", "starting", "info", "warning", "stalled", "failed", "critical"]
# Worst last: a fleet's verdict (the page's title) is its worst unit's.
VERDICTS: tuple[Verdict, ...] = (
    "none",
    "ok",
    "starting",
    "info",
    "warning",
    "stalled",
    "failed",
    "critical",
)
Evaluate = Callable[[StateStore, StartupRecord, Policy], Comparison]


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


def verdict_of(comparison: Comparison | None) -> Verdict:
    """The verdict of one compared startup (None: no startup yet)."""
    if comparison is None:
        return "none"
    if comparison.record.outcome == "starting":
        stalled = any(f.check == "startup_stalled" for f in comparison.findings)
        return "stalled" if stalled else "starting"
    if comparison.record.outcome == "failed":
        return "failed"
    if not comparison.findings:
        return "ok"
    return max((f.severity for f in comparison.findings), key=SEVERITY_ORDER.__getitem__)


@dataclass(frozen=True, slots=True)
class UnitStatus:
    """One unit as every surface shows it."""

    unit: str
    comparison: Comparison | None  # the latest decided (ready/failed) startup, compared
    starting: Comparison | None  # a startup under way, judged now (it may be startup_stalled)
    history: tuple[StartupRecord, ...]  # the last HISTORY startups, oldest first
    pinned: bool
    outcome_counts: Mapping[str, int] = field(default_factory=dict)
    # The latest batch-line values of `comparison`'s startup (model.RuntimeView): in memory
    # only (the daemon's), so empty after a restart until the next batch line, and elsewhere.
    runtime: Mapping[str, FactValue] = field(default_factory=dict)
    # The pod `latest`'s startup runs in (a `k8s:` target's, while its log files are there;
    # the daemon's, from its source): its name the `k8s_pod` of sglang_sentinel_pod_info.
    pod: PodRef | None = None

    @property
    def latest(self) -> Comparison | None:
        """The unit's latest startup, compared: the one under way while there is one."""
        return self.starting if self.starting is not None else self.comparison

    @property
    def in_progress(self) -> bool:
        return self.starting is not None

    @property
    def verdict(self) -> Verdict:
        return verdict_of(self.latest)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one scrape of /metrics reads, taken at once: the units' statuses as last
    published, the pins, the policy, the pipeline's counters and rule hits, this host's GPU."""

    units: tuple[UnitStatus, ...] = ()
    pinned: frozenset[str] = frozenset()
    policy: Policy = field(default_factory=lambda: Policy(checks={}))
    stats: Stats = field(default_factory=Stats)
    rule_hits: Mapping[str, int] = field(default_factory=dict)
    gpu: str = ""
    # From the Kubernetes API when kubernetes.labels names some (daemon/kubeapi.py): the
    # Prometheus label names, and per pod uid their values.
    pod_label_names: tuple[str, ...] = ()
    pod_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


def unit_status(
    store: StateStore,
    units: Sequence[str],
    policy: Policy,
    now: float,
    *,
    history: int = HISTORY,
    evaluator: Evaluate = evaluate,
    on_error: Callable[[str, Exception], None] | None = None,
) -> tuple[UnitStatus, ...]:
    """Each unit's status from the state; a startup under way is judged at `now` (unix seconds).

    With `on_error`, a unit whose comparison fails is shown without one and the error handed
    over, so one unit's fault never hides the others.
    """
    pins = store.baselines()
    out = []
    for unit in units:
        # The latest by the journal's order (as stored), not by the start time a clock wrote.
        latest = store.latest(unit)
        decided = (
            latest
            if latest is not None and latest.outcome != "starting"
            else store.latest(unit, decided=True)
        )
        comparison = starting = None
        try:
            if decided is not None:
                comparison = evaluator(store, decided, policy)
            if latest is not None and latest.outcome == "starting":
                starting = evaluate(store, latest, policy, now=now)
        except Exception as exc:
            if on_error is None:
                raise
            on_error(unit, exc)
        out.append(
            UnitStatus(
                unit=unit,
                comparison=comparison,
                starting=starting,
                history=tuple(store.recent(unit, history)) if history else (),
                pinned=unit in pins,
                outcome_counts=store.outcome_counts(unit),
            )
        )
    return tuple(out)
