"""Small immutable records that the pipeline stages hand to each other.

journal source -> JournalEntry -> rules -> RuleMatch -> startups -> StartupRecord
-> compare -> Finding -> metrics / alerts / reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

# A fact value as rules produce it and records store it. Lists are tuples so records stay hashable.
FactValue = int | float | bool | str | tuple[str, ...] | None

# Fact names, their types and scopes: facts.py (the registry).

Outcome = Literal["ready", "failed", "starting"]
Severity = Literal["info", "warning", "critical"]
# The one severity order, lowest first; everything that ranks or lists severities reads it.
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "critical")
SEVERITY_ORDER: Mapping[str, int] = {name: rank for rank, name in enumerate(SEVERITIES)}

# What a piece of evidence says; evidence.render_evidence has one sentence per kind.
EvidenceKind = Literal[
    "flags_added",  # new: the flags the command line gained
    "flags_removed",  # old: the flags it lost
    "flags_changed",  # old, new: the same flags with other values, pairwise
    "server_arg_changed",  # field, old, new, origin (+ flag), detail: the diff's rename note
    "schema_changed",  # new: fields added with default values, old: fields removed
    "memory_at_load",  # old, new: free GPU memory (GB) at `Load weight begin`
    "logged_by_sglang",  # field: the fact, new: the reason SGLang logged
    "fact_invalid",  # field: the fact, new: its value described, detail: what is wrong with it
    "clock_skew",  # detail: what the clocks disagreed about
    "phase_duration",  # field: the phase, old, new: seconds (old None when unknown)
    "note",  # detail: a sentence (decode statistics; text stored by an older release)
]
# Where a changed server_args field came from.
Origin = Literal["command_line", "set_by_sglang", "command_line_not_seen"]

# systemd catalog MESSAGE_IDs that PID 1 attaches to its lines about a unit.
UNIT_STARTING = "7d4958e842da4a758f6c1cdc7b36dcc5"
UNIT_STARTED = "39f53479d3a045ac8e11786248231fbf"
UNIT_PROCESS_EXIT = "98e322203f7a4ed290d09fe03c09fe15"
UNIT_RESTART_SCHEDULED = "5eb03494b6584870a536b337290809b3"
UNIT_FAILED = "be02cf6855d2428ba40df7e9d022f03d"
UNIT_STOPPED = "9d1aaa27d60140bd96365438aad20286"

# A Docker container is the target `docker:NAME` wherever a unit is `UNIT.service` (state,
# reports, metrics, alerts; sources/containers.py reads its entries). NAME follows Docker's own
# rule for container names (daemon/names: RestrictedNamePattern), without the "/".
DOCKER_PREFIX: Final = "docker:"
CONTAINER_NAME: Final = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
# The units dockerd runs as: Docker's own packages (docker.service) and the snap.
DOCKER_UNITS: Final = ("docker.service", "snap.docker.dockerd.service")

# The unit a baseline imported from a file (`sentinel baseline --import`) is stored under: never
# watched, so it is never "the latest startup" of anything; a watched unit only points at it as
# its pinned baseline.
IMPORTED_PREFIX: Final = "imported:"

# Pods' containers are the target `k8s:NAMESPACE/WORKLOAD[/CONTAINER]` (sources/podlogs.py reads
# their logs). WORKLOAD is the pod's name without what a controller generates, so a rolling
# update compares with the same baseline; a StatefulSet's or LeaderWorkerSet's ordinals stay.
K8S_PREFIX: Final = "k8s:"
# The alphabet of generated name parts (k8s.io/apimachinery/pkg/util/rand: no vowels, no 0 1 3).
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX = re.compile(f"[{_SAFE}]{{5}}")
_HASH = re.compile(f"[{_SAFE}]{{6,10}}")
_HASH_CUT = re.compile(f"[{_SAFE}]{{1,10}}")
# A generated name's base is cut to this before the random suffix (names.SimpleNameGenerator).
_BASE_MAX = 63 - 5
# DNS-1123 labels (namespaces) and subdomains (pod names, container names are labels).
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def workload_of(pod: str) -> str:
    """The pod's name without the parts a controller generates: `sglang-7d9f8b6c4d-x2kqz` ->
    `sglang` (Deployment), `agent-x2kqz` -> `agent` (DaemonSet, Job); `sglang-0` stays."""
    parts = pod.split("-")
    if len(parts) >= 3 and _SUFFIX.fullmatch(parts[-1]) and _HASH.fullmatch(parts[-2]):
        return "-".join(parts[:-2])
    if len(parts) >= 2 and _SUFFIX.fullmatch(parts[-1]):
        return "-".join(parts[:-1])
    if len(pod) == _BASE_MAX + 5 and _SUFFIX.fullmatch(pod[_BASE_MAX:]):
        # A long Deployment's `NAME-HASH-` was cut before the suffix, in or right after HASH
        # (`NAME-7d9f8b6x2kqz`): without this its pods were not the workload's, not read.
        name, dash, cut = pod[:_BASE_MAX].rpartition("-")
        if dash and name and _HASH_CUT.fullmatch(cut):
            return name
    return pod


@dataclass(frozen=True, slots=True)
class PodSelector:
    """`NAMESPACE/WORKLOAD[/CONTAINER]`: which pods' containers to follow."""

    namespace: str
    workload: str
    container: str | None = None

    @property
    def target(self) -> str:
        """`k8s:NS/WORKLOAD/CONTAINER`; without a container, `k8s:NS/WORKLOAD` (every
        container of the pod under one identity)."""
        tail = f"/{self.container}" if self.container else ""
        return f"{K8S_PREFIX}{self.namespace}/{self.workload}{tail}"

    def matches(self, namespace: str, pod: str) -> bool:
        """A pod of this workload, or the pod itself named."""
        return namespace == self.namespace and (
            self.workload in (workload_of(pod), pod) or _cut_before_suffix(self.workload, pod)
        )


def _cut_before_suffix(workload: str, pod: str) -> bool:
    """A pod of a DaemonSet or Job named past 57 characters: `NAME-` was cut to 58 before the
    random suffix, dash and all, so nothing in the pod's name says where NAME ended."""
    return (
        len(workload) >= _BASE_MAX
        and len(pod) == _BASE_MAX + 5
        and pod.startswith(workload[:_BASE_MAX])
        and _SUFFIX.fullmatch(pod, _BASE_MAX) is not None
    )


@dataclass(frozen=True, slots=True)
class PodRef:
    """A pod as its log directory (`NS_NAME_UID`) names it: the name a person reads, and the
    uid that tells apart two pods of one name (a StatefulSet pod deleted and recreated)."""

    name: str
    uid: str


def parse_selector(text: str) -> PodSelector:
    """`NS/WORKLOAD[/CONTAINER]` (a leading `k8s:` is allowed); ValueError says what is wrong."""
    body = text[len(K8S_PREFIX) :] if text.startswith(K8S_PREFIX) else text
    parts = body.split("/")
    if len(parts) not in (2, 3):
        raise ValueError(f"expected NAMESPACE/WORKLOAD[/CONTAINER], got {text!r}")
    ns, workload = parts[0], parts[1]
    container = parts[2] if len(parts) == 3 else None
    if not _LABEL.fullmatch(ns) or len(ns) > 63:
        raise ValueError(f"not a namespace name: {ns!r} (lowercase letters, digits, '-')")
    if not _SUBDOMAIN.fullmatch(workload) or len(workload) > 253:
        raise ValueError(f"not a workload or pod name: {workload!r}")
    if container is not None and (not _LABEL.fullmatch(container) or len(container) > 63):
        raise ValueError(f"not a container name: {container!r}")
    return PodSelector(ns, workload, container)


@dataclass(slots=True)
class Stats:
    """Counters about the sentinel itself, shared by the pipeline, the alert pusher and metrics.

    Mutable on purpose: one owner (the daemon) creates it and hands it to each stage; the
    metrics collector reads it at scrape time. In memory only; counters restart with the process.
    """

    entries_read: int = 0
    last_entry_realtime: float | None = None
    processing_lag_seconds: float = 0.0
    cursor_resets: int = 0
    rule_load_errors: int = 0
    startups_recorded: int = 0
    alertmanager_pushes: int = 0
    alertmanager_push_failures: int = 0
    journal_up: bool = True
    # Entries or startups whose handling raised, by stage (rules, tracker, compare, state,
    # metrics); each was logged once and skipped.
    processing_errors: dict[str, int] = field(default_factory=dict)
    # Transactions that failed (database locked, disk full, ...) and were retried.
    commit_failures: int = 0
    # Journal reads that hit a corrupt file (EBADMSG) and skipped it.
    journal_corrupt_reads: int = 0
    # SIGBUS faults survived reading a journal file truncated under the reader.
    journal_truncated_reads: int = 0
    # Journal files libsystemd could not open at all (bad header) and so skipped.
    journal_files_unreadable: int = 0
    # Lines of a startup two or more startups back in the journal (forgotten), dropped.
    late_lines_dropped: int = 0
    # Entries naming a watched container that its engine did not send (any process can write
    # CONTAINER_NAME), ignored.
    forged_entries: int = 0


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One journal entry about a watched unit, with only the fields the sentinel reads."""

    unit: str
    message: str  # decoded tolerantly; CR-separated progress updates reduced to the last one
    realtime_us: int
    invocation_id: str | None = None  # _SYSTEMD_INVOCATION_ID, or INVOCATION_ID on PID 1's lines
    from_pid1: bool = False  # PID 1's own line about the unit (UNIT=, _PID=1)
    message_id: str | None = None  # catalog id on PID 1's lines
    pid: int | None = None
    cmdline: str | None = None  # _CMDLINE, read only on the first entry of an invocation


# What the journal source hands the tracker, in journal order (JournalSource.lines): a
# JournalEntry, or, for a service line of the same unit and invocation as the entry before it
# (nearly every line of a busy unit), just its raw MESSAGE bytes; its time is the source's
# `realtime_us()` while the source is suspended on it. A JournalEntry per line would cost as
# much again as reading the line.
SourceItem = JournalEntry | bytes


@dataclass(frozen=True, slots=True)
class Rank:
    """The rank prefix of an SGLang line, `[ts DP1 TP0 EP0]`; None where absent."""

    dp: int | None = None
    pp: int | None = None
    tp: int | None = None
    ep: int | None = None

    @property
    def is_primary(self) -> bool:
        """True for the main process (no prefix) and for rank 0 of every present dimension."""
        return not any((self.dp, self.pp, self.tp, self.ep))


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """A rule that matched one line, with the typed facts it yielded."""

    rule_id: str
    facts: Mapping[str, FactValue]
    rank: Rank = field(default_factory=Rank)


@dataclass(frozen=True, slots=True)
class StartupRecord:
    """One service invocation reduced to facts. A fact not seen is None, never guessed."""

    unit: str
    invocation_id: str
    started_at: float  # unix seconds
    ready_at: float | None
    outcome: Outcome
    facts: Mapping[str, FactValue]
    launch_flags: tuple[str, ...] = ()  # from _CMDLINE, redacted
    server_args: Mapping[str, Any] = field(default_factory=dict)  # parsed, redacted
    failure_reason: str | None = None
    ended_at: float | None = None
    rule_hits: Mapping[str, int] = field(default_factory=dict)  # rule id -> lines matched
    # Clean decode samples, line counts and phase marks (startups/decode_samples.py: DecodeState.summary()).
    decode: Mapping[str, Any] = field(default_factory=dict)
    # Why facts are null although a line reported them (fact_ranges.py: not finite, out of
    # range), and clock skew around the startup.
    notes: tuple[Evidence, ...] = ()
    # The downgrade ledger (ledger.py): the startup window's downgrade lines as templates, each
    # with one redacted example and its ranks; None when not recorded (an older release).
    ledger: Mapping[str, Any] | None = None

    def fact(self, name: str) -> FactValue:
        return self.facts.get(name)

    @property
    def time_to_ready(self) -> float | None:
        """Seconds from start to ready by the journal's monotonic clock (`startup_seconds`).

        Never the wall-clock difference: a clock stepped during the startup would make it wrong,
        even negative; None when not ready or not measurable.
        """
        value = self.facts.get("startup_seconds")
        if self.outcome != "ready" or isinstance(value, bool):
            return None
        return float(value) if isinstance(value, int | float) else None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One fact behind a finding or a record's note, as data; evidence.render_evidence words it."""

    kind: EvidenceKind
    field: str | None = None
    old: Any = None
    new: Any = None
    origin: Origin | None = None
    flag: str | None = None  # origin command_line: the flag that asked
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class RuntimeView:
    """The latest batch-line values of one startup (`scope: runtime` facts), held in memory.

    Never persisted: they describe the server now, not the startup, and change on every batch
    line. Published with the daemon's snapshot after each commit; empty after a restart until
    the next batch line. An impossible value (fact_ranges.py) is None here, without a note.
    """

    unit: str
    invocation_id: str
    facts: Mapping[str, FactValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Finding:
    """One named difference between a startup and its baseline."""

    check: str  # stable id, e.g. max_running_requests_drop
    severity: Severity
    baseline: FactValue
    current: FactValue
    message: str
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True, slots=True)
class Comparison:
    """A startup compared with its baseline; baseline is None when there was nothing to compare."""

    record: StartupRecord
    baseline: StartupRecord | None
    baseline_kind: Literal["pinned", "previous"] | None
    findings: tuple[Finding, ...]
    # Decode throughput at like load against the baseline (the JSON contract's runtime.decode).
    decode: Mapping[str, Any] = field(default_factory=dict)
    # New and gone downgrade templates against the baseline (ledger.LogDiff.to_json(), the
    # JSON contract's log_diff); None while there is nothing to compare.
    log_diff: Mapping[str, Any] | None = None
