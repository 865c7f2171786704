"""Every metric the sentinel exports, built at scrape time from the current state.

No metric object lives between scrapes: `SentinelCollector.collect()` reads the latest decided
startup of every unit, its baseline and the pipeline counters, and builds fresh families.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from .. import __version__
from ..compare import CHECKS, Policy, UnitStatus, alerting, reached_tiers
from ..facts import Fact, metric_facts, metric_of
from ..model import FactValue, StartupRecord, Stats
from ..state import model_label, record_sha256, tp_label
from .decode_metrics import decode_metrics

PREFIX = "sglang_sentinel_"
# The facts exported as gauges, in /metrics order (facts.py: `metric`). A startup fact has a
# baseline_ series too; a runtime fact is the latest batch line's value.
FACT_METRICS: Sequence[Fact] = metric_facts("startup")
RUNTIME_METRICS: Sequence[Fact] = metric_facts("runtime")


def fact_gauge(fact: Fact, *, baseline: bool) -> GaugeMetricFamily:
    """The empty gauge family of a fact's metric (facts.py), or of its baseline series."""
    m = metric_of(fact.name)
    if baseline:
        return GaugeMetricFamily(PREFIX + "baseline_" + m.name, m.baseline_text, labels=["unit"])
    return GaugeMetricFamily(PREFIX + m.name, m.help, labels=["unit"])


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
    """Builds every sglang_sentinel_* family per scrape from `views()` and the stats."""

    def __init__(
        self,
        views: Callable[[], Sequence[UnitStatus]],
        stats: Stats,
        rule_hits: Callable[[], dict[str, int]],
        policy: Callable[[], Policy],
        baselines_pinned: Callable[[], set[str]],
        clock: Callable[[], float] = time.time,
        gpu: Callable[[], str] = str,
        reader: str = "python",
    ) -> None:
        self._views = views
        self._stats = stats
        self._rule_hits = rule_hits
        self._policy = policy
        self._pinned = baselines_pinned
        self._clock = clock
        self._gpu = gpu
        self._reader = reader  # which journal reader runs: "c" or "python" (sources.reader_path)
        self._hashes: dict[str, str] = {}  # baseline invocation id -> content sha256
        self._hashes_lock = threading.Lock()  # concurrent scrapes share the cache

    def collect(self) -> Iterator[Metric]:
        # What views() and the pins return is the daemon's published snapshot, replaced whole and
        # never changed: no lock, and never the SQLite connection the loop writes through.
        views = list(self._views())
        pinned = self._pinned()
        yield from self._startup_metrics(views, pinned)
        yield from decode_metrics(views)
        yield from self._self_metrics()

    def _startup_metrics(self, views: Sequence[UnitStatus], pinned: set[str]) -> Iterator[Metric]:
        policy = self._policy()
        gpu = self._gpu()
        current = {f.name: fact_gauge(f, baseline=False) for f in FACT_METRICS}
        base = {f.name: fact_gauge(f, baseline=True) for f in FACT_METRICS}
        runtime = {f.name: fact_gauge(f, baseline=False) for f in RUNTIME_METRICS}
        regression = GaugeMetricFamily(
            PREFIX + "regression",
            "1 while the latest startup shows this regression against its baseline at this "
            "severity or worse; one series per severity the check can reach.",
            labels=["unit", "check", "severity"],
        )
        new_downgrades = GaugeMetricFamily(
            PREFIX + "new_downgrade_messages",
            "Downgrade message templates in the latest startup's log that its baseline never "
            "printed (the downgrade ledger), accepted ones left out.",
            labels=["unit"],
        )
        info = InfoMetricFamily(
            PREFIX + "server",
            "The latest startup's model and layout.",
            labels=["unit", "model", "tp_size", "attention_backend", "gpu"],
        )
        baseline_info = InfoMetricFamily(
            PREFIX + "baseline",
            "The pinned baseline in use: its content hash (as in `sentinel baseline --export`), "
            "model, TP size and this host's GPU.",
            labels=["unit", "sha256", "model", "tp_size", "gpu"],
        )
        # The pod in an info series of its own (Prometheus' "target labels, not static scraped
        # labels"): a label on every series would make a rollout end each series and alert and
        # start them again; `* on(instance, unit) group_left(k8s_pod)` puts it where needed.
        # Not `pod`: a PodMonitor's target label of that name is the sentinel's own pod.
        pod_info = InfoMetricFamily(
            PREFIX + "pod",
            "The pod a Kubernetes target's latest startup runs in; one series per target, "
            "replaced when a new pod starts.",
            labels=["unit", "k8s_pod"],
        )
        baseline_pinned = GaugeMetricFamily(
            PREFIX + "baseline_pinned",
            "1 if a baseline startup is pinned for the unit.",
            labels=["unit"],
        )
        has_baseline = GaugeMetricFamily(
            PREFIX + "baseline_present",
            "1 if the latest startup was compared with a baseline (pinned or previous ready).",
            labels=["unit"],
        )
        startups = CounterMetricFamily(
            PREFIX + "startups", "Startups recorded, by outcome.", labels=["unit", "outcome"]
        )
        ready = GaugeMetricFamily(
            PREFIX + "startup_ready",
            "1 if the latest decided startup became ready.",
            labels=["unit"],
        )
        in_progress = GaugeMetricFamily(
            PREFIX + "startup_in_progress", "1 while a startup is under way.", labels=["unit"]
        )
        started = GaugeMetricFamily(
            PREFIX + "startup_timestamp_seconds",
            "When the latest decided startup began.",
            labels=["unit"],
        )
        ready_ts = GaugeMetricFamily(
            PREFIX + "ready_timestamp_seconds",
            "When the latest startup became ready.",
            labels=["unit"],
        )
        in_progress_ts = GaugeMetricFamily(
            PREFIX + "startup_in_progress_timestamp_seconds",
            "When the startup under way began.",
            labels=["unit"],
        )
        for view in views:
            unit = view.unit
            if view.pod is not None:
                pod_info.add_metric([unit, view.pod], {})
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
                new_downgrades.add_metric([unit], float(len(c.log_diff["new"])))
            info.add_metric(
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
            info,
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

    def _self_metrics(self) -> Iterator[Metric]:
        s = self._stats
        yield CounterMetricFamily(
            PREFIX + "journal_entries_read",
            "Journal entries of the watched units read.",
            value=s.entries_read,
        )
        hits = CounterMetricFamily(
            PREFIX + "rule_matches", "Lines matched, per rule.", labels=["rule"]
        )
        for rule, n in sorted(self._rule_hits().items()):
            hits.add_metric([rule], float(n))
        yield hits
        if s.last_entry_realtime is not None:
            yield GaugeMetricFamily(
                PREFIX + "journal_last_entry_timestamp_seconds",
                "Time of the newest watched entry read.",
                value=s.last_entry_realtime,
            )
            yield GaugeMetricFamily(
                PREFIX + "journal_last_entry_age_seconds",
                "Seconds since the newest watched entry read was written.",
                value=max(0.0, self._clock() - s.last_entry_realtime),
            )
        yield GaugeMetricFamily(
            PREFIX + "processing_lag_seconds",
            "How far reading is behind the journal (0 when caught up).",
            value=s.processing_lag_seconds,
        )
        yield GaugeMetricFamily(
            PREFIX + "journal_up",
            "1 if the journal is readable.",
            value=1.0 if s.journal_up else 0.0,
        )
        yield CounterMetricFamily(
            PREFIX + "cursor_resets",
            "Saved cursors whose entry was gone (rotation, vacuum).",
            value=s.cursor_resets,
        )
        yield CounterMetricFamily(
            PREFIX + "rule_load_errors",
            "Rule or config reloads rejected as invalid.",
            value=s.rule_load_errors,
        )
        yield CounterMetricFamily(
            PREFIX + "alertmanager_pushes", "Alert batches sent.", value=s.alertmanager_pushes
        )
        yield CounterMetricFamily(
            PREFIX + "alertmanager_push_failures",
            "Alert batches that failed to reach Alertmanager.",
            value=s.alertmanager_push_failures,
        )
        errors = CounterMetricFamily(
            PREFIX + "processing_errors",
            "Entries or startups whose handling raised; each was logged and skipped.",
            labels=["stage"],
        )
        for stage in PROCESSING_STAGES:
            errors.add_metric([stage], float(s.processing_errors.get(stage, 0)))
        yield errors
        yield CounterMetricFamily(
            PREFIX + "state_commit_failures",
            "Transactions that failed (database locked, disk full) and were retried.",
            value=s.commit_failures,
        )
        yield CounterMetricFamily(
            PREFIX + "journal_corrupt_reads",
            "Journal reads that hit a corrupt file (EBADMSG) and skipped it.",
            value=s.journal_corrupt_reads,
        )
        yield CounterMetricFamily(
            PREFIX + "journal_truncated_reads",
            "Reads of a journal file truncated under the reader (SIGBUS survived, part skipped).",
            value=s.journal_truncated_reads,
        )
        yield CounterMetricFamily(
            PREFIX + "late_lines_dropped",
            "Lines of a startup two or more startups back in the journal, written that late; "
            "dropped, its stored record kept.",
            value=s.late_lines_dropped,
        )
        yield CounterMetricFamily(
            PREFIX + "forged_entries",
            "Journal entries naming a watched container that its engine did not send (not "
            "root dockerd in the engine's unit); ignored.",
            value=s.forged_entries,
        )
        yield GaugeMetricFamily(
            PREFIX + "journal_files_unreadable",
            "Journal files that could not be opened at all (bad header) when the journal was "
            "opened; libsystemd skips them.",
            value=s.journal_files_unreadable,
        )
        build = InfoMetricFamily(
            PREFIX + "build",
            "sglang-sentinel build: its version and the journal reader it runs (c: the optional "
            "C extension, python: python-systemd's reader).",
            labels=["version", "reader"],
        )
        build.add_metric([__version__, self._reader], {})
        yield build


# The stages an entry or a startup passes through; processing_errors has a series for each.
PROCESSING_STAGES = ("rules", "tracker", "compare", "state", "metrics")


def _str(value: FactValue) -> str:
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**64:
        return ""  # str() of a huge int is slow or raises; no label is better than a wrong one
    return str(value)[:64]
