"""Every metric family the sentinel exports, declared once: name, kind, help, labels and the
field of the read model (or of the pipeline's stats) it reads, in /metrics order.

The collector (metrics.py, decode_metrics.py) builds each family from here by name, and the
metrics tables of README.md and docs/architecture.md are generated from it (tools/metrics_doc.py,
`make metrics-doc`; `make check` runs `--check`). A fact's gauge (and its `baseline_` series)
comes from the fact's own entry in facts.py, the facts catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from ..facts import Fact, metric_facts, metric_of

PREFIX: Final = "sglang_sentinel_"
Kind = Literal["gauge", "counter", "info"]
# The exposition's suffix of a family kind: a counter `x` is `x_total`, an info `x` is `x_info`.
_SUFFIX = {"counter": "_total", "info": "_info"}

# The facts exported as gauges, in /metrics order (facts.py: `metric`). A startup fact has a
# baseline_ series too; a runtime fact is the latest batch line's value.
FACT_METRICS: Final[tuple[Fact, ...]] = metric_facts("startup")
RUNTIME_METRICS: Final[tuple[Fact, ...]] = metric_facts("runtime")


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family. `reads` names what fills it: a field of a unit's status
    (compare.UnitStatus) or of the pipeline's stats (model.Stats). `note` adds to `help` in the
    docs tables only, never on /metrics."""

    name: str  # without PREFIX and without the exposition's suffix
    kind: Kind
    help: str
    labels: tuple[str, ...]
    reads: str
    note: str = ""
    fact: str = ""  # the fact (facts.py) a fact's gauge exports

    @property
    def full_name(self) -> str:
        return PREFIX + self.name

    @property
    def exposed_name(self) -> str:
        """The name a scrape shows: a counter `x` is `x_total`, an info `x` is `x_info`."""
        return self.full_name + _SUFFIX.get(self.kind, "")


_U: Final = ("unit",)


def _fact_family(fact: Fact, *, baseline: bool, reads: str) -> Family:
    m = metric_of(fact.name)
    if baseline:
        return Family("baseline_" + m.name, "gauge", m.baseline_text, _U, reads, fact=fact.name)
    return Family(m.name, "gauge", m.help, _U, reads, fact=fact.name)


_LATEST = "comparison.record"  # the latest decided startup's record
_BASE = "comparison.baseline"

FACT_FAMILIES: Final = tuple(
    _fact_family(f, baseline=False, reads=f"{_LATEST}.facts[{f.name}]") for f in FACT_METRICS
)
BASELINE_FACT_FAMILIES: Final = tuple(
    _fact_family(f, baseline=True, reads=f"{_BASE}.facts[{f.name}]") for f in FACT_METRICS
)
RUNTIME_FAMILIES: Final = tuple(
    _fact_family(f, baseline=False, reads=f"runtime[{f.name}]") for f in RUNTIME_METRICS
)

STARTUP_FAMILIES: Final = (
    Family(
        "regression",
        "gauge",
        "1 while the latest startup shows this regression against its baseline at this "
        "severity or worse; one series per severity the check can reach.",
        ("unit", "check", "severity"),
        "comparison.findings, starting.findings",
        note='Drop checks have a warning and a critical series; `check="startup_stalled"` is '
        "about the startup under way, not the latest decided one.",
    ),
    Family(
        "new_downgrade_messages",
        "gauge",
        "Downgrade message templates in the latest startup's log that its baseline never "
        "printed (the downgrade ledger), accepted ones left out.",
        _U,
        "comparison.log_diff",
        note="See [the downgrade ledger](#the-downgrade-ledger); absent while there is nothing "
        "to compare.",
    ),
    Family(
        "server",
        "info",
        "The latest startup's model and layout.",
        ("unit", "model", "tp_size", "attention_backend", "gpu"),
        f"{_LATEST}.facts",
        note="Bounded labels only.",
    ),
    Family(
        "baseline",
        "info",
        "The pinned baseline in use: its content hash (as in `sentinel baseline --export`), "
        "model, TP size and this host's GPU.",
        ("unit", "sha256", "model", "tp_size", "gpu"),
        _BASE,
    ),
    # The pod in an info series of its own (Prometheus' "target labels, not static scraped
    # labels"): a label on every series would make a rollout end each series and alert and
    # start them again; `* on(instance, unit) group_left(k8s_pod)` puts it where needed.
    # Not `pod`: a PodMonitor's target label of that name is the sentinel's own pod.
    Family(
        "pod",
        "info",
        "The pod a Kubernetes target's latest startup runs in; one series per target, "
        "replaced when a new pod starts.",
        ("unit", "k8s_pod"),
        "pod",
        note="With `kubernetes.labels`, also `label_<key>` per pod label from the API. "
        "See [Kubernetes](#kubernetes).",
    ),
    Family(
        "baseline_pinned",
        "gauge",
        "1 if a baseline startup is pinned for the unit.",
        _U,
        "pinned",
    ),
    Family(
        "baseline_present",
        "gauge",
        "1 if the latest startup was compared with a baseline (pinned or previous ready).",
        _U,
        _BASE,
    ),
    Family(
        "startups",
        "counter",
        "Startups recorded, by outcome.",
        ("unit", "outcome"),
        "outcome_counts",
        note="Counted when a startup is first stored decided; never goes down.",
    ),
    Family(
        "startup_ready",
        "gauge",
        "1 if the latest decided startup became ready.",
        _U,
        f"{_LATEST}.outcome",
    ),
    Family("startup_in_progress", "gauge", "1 while a startup is under way.", _U, "starting"),
    Family(
        "startup_timestamp_seconds",
        "gauge",
        "When the latest decided startup began.",
        _U,
        f"{_LATEST}.started_at",
    ),
    Family(
        "ready_timestamp_seconds",
        "gauge",
        "When the latest startup became ready.",
        _U,
        f"{_LATEST}.ready_at",
    ),
    Family(
        "startup_in_progress_timestamp_seconds",
        "gauge",
        "When the startup under way began.",
        _U,
        "starting.record.started_at",
    ),
)

_MAX_BS = metric_of("cuda_graph_max_bs")  # facts.py, a `decode` metric
DECODE_FAMILIES: Final = (
    Family(
        "decode_throughput_ratio",
        "gauge",
        "Decode throughput at like load, current / baseline (absent while inconclusive).",
        _U,
        "comparison.decode",
    ),
    Family(
        "decode_verdict",
        "gauge",
        "1 for the decode comparison's current verdict, 0 for the others.",
        ("unit", "verdict"),
        "comparison.decode",
        note="`verdict`: `regressed`, `improved`, `unchanged`, `inconclusive`.",
    ),
    Family(
        "decode_samples",
        "gauge",
        "Clean decode samples at like load counted by the comparison, per side.",
        ("unit", "side"),
        "comparison.decode",
        note="`side`: `current`, `baseline`.",
    ),
    Family(
        "decode_bucket_median_tokens_per_second",
        "gauge",
        "Median gen throughput of a like-load bucket (captured graph batch / context octave).",
        ("unit", "bucket"),
        "comparison.decode",
        note="At most 8 buckets per unit.",
    ),
    Family(
        "baseline_decode_bucket_median_tokens_per_second",
        "gauge",
        "Baseline startup's median gen throughput of the same bucket.",
        ("unit", "bucket"),
        "comparison.decode",
    ),
    Family(
        "decode_without_cuda_graph_ratio",
        "gauge",
        "Share of decode lines with `cuda graph: False` in the latest startup.",
        _U,
        "comparison.decode",
    ),
    Family(
        "baseline_decode_without_cuda_graph_ratio",
        "gauge",
        "Baseline startup's share of decode lines with `cuda graph: False`.",
        _U,
        "comparison.decode",
    ),
    Family(
        "decode_retractions",
        "gauge",
        "`KV cache pool is full. Retract requests.` lines in the latest startup.",
        _U,
        f"{_LATEST}.decode",
    ),
    Family(
        "decode_out_of_memory_lines",
        "gauge",
        "`Decode/Prefill out of memory` lines in the latest startup.",
        _U,
        f"{_LATEST}.decode",
    ),
    Family(_MAX_BS.name, "gauge", _MAX_BS.help, _U, f"{_LATEST}.facts[cuda_graph_max_bs]"),
    Family(
        "baseline_" + _MAX_BS.name,
        "gauge",
        _MAX_BS.baseline_text,
        _U,
        f"{_BASE}.facts[cuda_graph_max_bs]",
    ),
    Family(
        "startup_phase_seconds",
        "gauge",
        "Startup phase durations from the first line of each phase.",
        ("unit", "phase"),
        f"{_LATEST}.decode",
        note="`phase`: `weight_load`, `kv_allocation`, `graph_capture`, `time_to_ready`.",
    ),
    Family(
        "baseline_startup_phase_seconds",
        "gauge",
        "Baseline startup's phase durations.",
        ("unit", "phase"),
        f"{_BASE}.decode",
    ),
)

SELF_FAMILIES: Final = (
    Family(
        "journal_entries_read",
        "counter",
        "Journal entries of the watched units read.",
        (),
        "stats.entries_read",
    ),
    Family("rule_matches", "counter", "Lines matched, per rule.", ("rule",), "tracker.rule_hits"),
    Family(
        "journal_last_entry_timestamp_seconds",
        "gauge",
        "Time of the newest watched entry read.",
        (),
        "stats.last_entry_realtime",
        note="Absent until an entry was read.",
    ),
    Family(
        "journal_last_entry_age_seconds",
        "gauge",
        "Seconds since the newest watched entry read was written.",
        (),
        "stats.last_entry_realtime",
        note="Absent until an entry was read.",
    ),
    Family(
        "processing_lag_seconds",
        "gauge",
        "How far reading is behind the journal (0 when caught up).",
        (),
        "stats.processing_lag_seconds",
    ),
    Family("journal_up", "gauge", "1 if the journal is readable.", (), "stats.journal_up"),
    Family(
        "cursor_resets",
        "counter",
        "Saved cursors whose entry was gone (rotation, vacuum).",
        (),
        "stats.cursor_resets",
    ),
    Family(
        "rule_load_errors",
        "counter",
        "Rule or config reloads rejected as invalid.",
        (),
        "stats.rule_load_errors",
    ),
    Family(
        "alertmanager_pushes", "counter", "Alert batches sent.", (), "stats.alertmanager_pushes"
    ),
    Family(
        "alertmanager_push_failures",
        "counter",
        "Alert batches that failed to reach Alertmanager.",
        (),
        "stats.alertmanager_push_failures",
    ),
    Family(
        "processing_errors",
        "counter",
        "Entries or startups whose handling raised; each was logged and skipped.",
        ("stage",),
        "stats.processing_errors",
        note="See [Faults](#faults).",
    ),
    Family(
        "state_commit_failures",
        "counter",
        "Transactions that failed (database locked, disk full) and were retried.",
        (),
        "stats.commit_failures",
    ),
    Family(
        "journal_corrupt_reads",
        "counter",
        "Journal reads that hit a corrupt file (EBADMSG) and skipped it.",
        (),
        "stats.journal_corrupt_reads",
    ),
    Family(
        "journal_truncated_reads",
        "counter",
        "Reads of a journal file truncated under the reader (SIGBUS survived, part skipped).",
        (),
        "stats.journal_truncated_reads",
    ),
    Family(
        "late_lines_dropped",
        "counter",
        "Lines of a startup two or more startups back in the journal, written that late; "
        "dropped, its stored record kept.",
        (),
        "stats.late_lines_dropped",
    ),
    Family(
        "forged_entries",
        "counter",
        "Journal entries naming a watched container that its engine did not send (not "
        "root dockerd in the engine's unit); ignored.",
        (),
        "stats.forged_entries",
    ),
    Family(
        "journal_files_unreadable",
        "gauge",
        "Journal files that could not be opened at all (bad header) when the journal was "
        "opened; libsystemd skips them.",
        (),
        "stats.journal_files_unreadable",
    ),
    Family(
        "build",
        "info",
        "sglang-sentinel build: its version, the journal reader it runs (c: the optional "
        "C extension, python: python-systemd's reader) and the reader of log files it runs "
        "(c: the optional C extension, python: Python).",
        ("version", "reader", "file_reader"),
        "__version__, the journal reader, the file reader",
    ),
)

# Every family, in /metrics order.
FAMILIES: Final[tuple[Family, ...]] = (
    *FACT_FAMILIES,
    *BASELINE_FACT_FAMILIES,
    *RUNTIME_FAMILIES,
    *STARTUP_FAMILIES,
    *DECODE_FAMILIES,
    *SELF_FAMILIES,
)
BY_NAME: Final[Mapping[str, Family]] = {f.name: f for f in FAMILIES}


def _declared(name: str, kind: Kind) -> Family:
    f = BY_NAME[name]
    if f.kind != kind:
        raise TypeError(f"metric family {name} is a {f.kind}, not a {kind}")
    return f


def gauge(name: str) -> GaugeMetricFamily:
    """The empty gauge family `name` (without PREFIX) declared above."""
    f = _declared(name, "gauge")
    return GaugeMetricFamily(f.full_name, f.help, labels=list(f.labels))


def counter(name: str) -> CounterMetricFamily:
    """The empty counter family `name` declared above."""
    f = _declared(name, "counter")
    return CounterMetricFamily(f.full_name, f.help, labels=list(f.labels))


def info(name: str) -> InfoMetricFamily:
    """The empty info family `name` declared above."""
    f = _declared(name, "info")
    return InfoMetricFamily(f.full_name, f.help, labels=list(f.labels))


def sample(name: str, value: float) -> Metric:
    """Gauge or counter `name`, which has no labels, with its one sample."""
    out: GaugeMetricFamily | CounterMetricFamily
    out = counter(name) if BY_NAME[name].kind == "counter" else gauge(name)
    out.add_metric([], value)
    return out


def fact_gauges(families: tuple[Family, ...]) -> dict[str, GaugeMetricFamily]:
    """Fact name -> the empty gauge of each family of FACT_FAMILIES, BASELINE_FACT_FAMILIES or
    RUNTIME_FAMILIES, in their order."""
    return {f.fact: gauge(f.name) for f in families}
