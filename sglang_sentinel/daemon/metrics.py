"""Every metric the sentinel exports, built at scrape time from the current state.

No metric object lives between scrapes: `SentinelCollector.collect()` reads the latest decided
startup of every unit, its baseline and the pipeline counters, and builds fresh families.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from .. import __version__
from ..compare import CHECKS, Snapshot, alerting, reached_tiers
from ..model import FactValue, PodRef, StartupRecord
from ..state import model_label, record_sha256, tp_label
from .decode_metrics import decode_metrics
from .families import (
    BASELINE_FACT_FAMILIES,
    FACT_FAMILIES,
    FACT_METRICS,
    RUNTIME_FAMILIES,
    RUNTIME_METRICS,
    counter,
    fact_gauges,
    gauge,
    info,
    sample,
)

__all__ = ["SentinelCollector"]


def fact_value(value: FactValue, scale: float = 1.0) -> float | None:
    """The sample value of a fact, or None (no sample) when it has none or it is not finite.

    Records are sanitized when built (fact_ranges.py); this guards the scrape against any record
    stored before that, so that one value never fails the whole /metrics page.
    """
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, tuple):
        return float(len(value))
    try:
        out = float(value) * scale
    except OverflowError:  # an int of 309+ digits
        return None
    return out if math.isfinite(out) else None


class SentinelCollector(Collector):
    """Builds every sglang_sentinel_* family per scrape from one snapshot (compare.Snapshot)."""

    def __init__(
        self,
        snapshot: Callable[[], Snapshot],
        clock: Callable[[], float] = time.time,
        reader: str = "python",
        file_reader: str = "python",
    ) -> None:
        self._snapshot = snapshot
        self._clock = clock
        self._reader = reader  # which journal reader runs: "c" or "python" (sources.reader_path)
        self._file_reader = file_reader  # and which file reader (sources.file_reader_path)
        self._hashes: dict[str, str] = {}  # baseline invocation id -> content sha256
        # Concurrent scrapes share the hash cache (_sha256 changes it); the snapshot needs none.
        self._hashes_lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        # One snapshot a scrape: the daemon's published statuses and pins (replaced whole, never
        # changed, never the SQLite connection the loop writes through) with the counters.
        snap = self._snapshot()
        yield from self._startup_metrics(snap)
        yield from decode_metrics(snap.units)
        yield from self._self_metrics(snap)

    def _startup_metrics(self, snap: Snapshot) -> Iterator[Metric]:
        policy, gpu, pinned = snap.policy, snap.gpu, snap.pinned
        current = fact_gauges(FACT_FAMILIES)
        base = fact_gauges(BASELINE_FACT_FAMILIES)
        runtime = fact_gauges(RUNTIME_FAMILIES)
        regression = gauge("regression")
        new_downgrades = gauge("new_downgrade_messages")
        server_info = info("server")
        baseline_info = info("baseline")
        pod_info = info("pod")
        baseline_pinned = gauge("baseline_pinned")
        has_baseline = gauge("baseline_present")
        startups = counter("startups")
        ready = gauge("startup_ready")
        in_progress = gauge("startup_in_progress")
        started = gauge("startup_timestamp_seconds")
        ready_ts = gauge("ready_timestamp_seconds")
        in_progress_ts = gauge("startup_in_progress_timestamp_seconds")
        for view in snap.units:
            unit = view.unit
            if view.pod is not None:
                pod_info.add_metric([unit, view.pod.name], _pod_labels(snap, view.pod))
            baseline_pinned.add_metric([unit], 1.0 if unit in pinned else 0.0)
            in_progress.add_metric([unit], 1.0 if view.in_progress else 0.0)
            # startup_stalled is about the startup under way, not the latest decided one.
            under_way = view.starting.findings if view.starting is not None else ()
            stalled = any(f.check == "startup_stalled" for f in under_way)
            regression.add_metric(
                [unit, "startup_stalled", policy.severity("startup_stalled")],
                1.0 if stalled else 0.0,
            )
            if view.starting is not None:
                in_progress_ts.add_metric([unit], view.starting.record.started_at)
            for outcome in ("ready", "failed"):
                startups.add_metric([unit, outcome], float(view.outcome_counts.get(outcome, 0)))
            c = view.comparison
            if c is None:
                continue
            r = c.record
            for fact in FACT_METRICS:
                v = fact_value(r.facts.get(fact.name), fact.scale)
                if v is not None:
                    current[fact.name].add_metric([unit], v)
                if c.baseline is not None:
                    bv = fact_value(c.baseline.facts.get(fact.name), fact.scale)
                    if bv is not None:
                        base[fact.name].add_metric([unit], bv)
            for fact in RUNTIME_METRICS:
                rv = fact_value(view.runtime.get(fact.name), fact.scale)
                if rv is not None:
                    runtime[fact.name].add_metric([unit], rv)
            firing = {f.check: f for f in c.findings}
            for check in CHECKS:
                if check == "startup_stalled":
                    continue  # above, from the startup under way
                f = firing.get(check)
                if f is not None and not alerting(f):
                    f = None  # shown, never alerted (ledger_check.alerting)
                # Series per tier, never relabelled: an escalation sets the critical series
                # to 1 and leaves the warning one as it was, so its alert carries on.
                reached = reached_tiers(check, f.severity) if f else ()
                for tier in policy.tiers(check):
                    regression.add_metric([unit, check, tier], 1.0 if tier in reached else 0.0)
            has_baseline.add_metric([unit], 1.0 if c.baseline is not None else 0.0)
            if c.log_diff is not None:
                downgrades = [n for n in c.log_diff["new"] if n.get("kind") == "downgrade"]
                new_downgrades.add_metric([unit], float(len(downgrades)))
            server_info.add_metric(
                [
                    unit,
                    model_label(r),
                    _str(r.facts.get("tp_size")),
                    _str(r.facts.get("attention_backend")),
                    gpu,
                ],
                {},
            )
            if c.baseline is not None and c.baseline_kind == "pinned":
                b = c.baseline
                baseline_info.add_metric(
                    [unit, self._sha256(b), model_label(b), tp_label(b), gpu], {}
                )
            ready.add_metric([unit], 1.0 if r.outcome == "ready" else 0.0)
            started.add_metric([unit], r.started_at)
            if r.ready_at is not None:
                ready_ts.add_metric([unit], r.ready_at)
        yield from current.values()
        yield from base.values()
        yield from runtime.values()
        yield from (
            regression,
            new_downgrades,
            server_info,
            baseline_info,
            pod_info,
            baseline_pinned,
            has_baseline,
            startups,
            ready,
            in_progress,
            started,
            ready_ts,
            in_progress_ts,
        )

    def _sha256(self, baseline: StartupRecord) -> str:
        # A baseline never changes once recorded ready; hash each one once.
        with self._hashes_lock:
            sha = self._hashes.get(baseline.invocation_id)
            if sha is None:
                if len(self._hashes) > 1000:
                    self._hashes.clear()
                sha = self._hashes[baseline.invocation_id] = record_sha256(baseline)
            return sha

    def _self_metrics(self, snap: Snapshot) -> Iterator[Metric]:
        s = snap.stats
        yield sample("journal_entries_read", s.entries_read)
        hits = counter("rule_matches")
        for rule, n in sorted(snap.rule_hits.items()):
            hits.add_metric([rule], float(n))
        yield hits
        if s.last_entry_realtime is not None:
            yield sample("journal_last_entry_timestamp_seconds", s.last_entry_realtime)
            yield sample(
                "journal_last_entry_age_seconds",
                max(0.0, self._clock() - s.last_entry_realtime),
            )
        yield sample("processing_lag_seconds", s.processing_lag_seconds)
        yield sample("journal_up", 1.0 if s.journal_up else 0.0)
        yield sample("cursor_resets", s.cursor_resets)
        yield sample("rule_load_errors", s.rule_load_errors)
        yield sample("alertmanager_pushes", s.alertmanager_pushes)
        yield sample("alertmanager_push_failures", s.alertmanager_push_failures)
        errors = counter("processing_errors")
        for stage in PROCESSING_STAGES:
            errors.add_metric([stage], float(s.processing_errors.get(stage, 0)))
        yield errors
        yield sample("state_commit_failures", s.commit_failures)
        yield sample("journal_corrupt_reads", s.journal_corrupt_reads)
        yield sample("journal_truncated_reads", s.journal_truncated_reads)
        yield sample("late_lines_dropped", s.late_lines_dropped)
        yield sample("forged_entries", s.forged_entries)
        yield sample("journal_files_unreadable", s.journal_files_unreadable)
        build = info("build")
        build.add_metric([__version__, self._reader, self._file_reader], {})
        yield build


# The stages an entry or a startup passes through; processing_errors has a series for each.
PROCESSING_STAGES = ("rules", "tracker", "compare", "state", "metrics")


def _str(value: FactValue) -> str:
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**64:
        return ""  # str() of a huge int is slow or raises; no label is better than a wrong one
    return str(value)[:64]


def _pod_labels(snap: Snapshot, pod: PodRef) -> dict[str, str]:
    """The API's labels of a target's pod: every configured one, "" while it is not known.
    By uid: a StatefulSet pod recreated under its name is another pod, with labels of its own."""
    if not snap.pod_label_names:
        return {}
    known = snap.pod_labels.get(pod.uid, {})
    return {name: known.get(name, "") for name in snap.pod_label_names}
