"""StartupRecord <-> JSON document: the one codec of a record as plain data.

The state store persists a record as `record_to_json`, the reports print parts of it through
`plain(..., finite=True)`, a baseline file carries its facts and server_args through `plain`
and reads them back with `facts_from_doc`, and the startup tracker's resumable state uses the
same conversions. JSON has lists and string-keyed objects only, so on the way out tuples become
lists and mapping keys become the strings JSON writes for them; on the way back a list-valued
fact becomes a tuple again (records stay hashable). A record's notes are `model.Evidence`,
stored in evidence.py's form (text an older release stored reads back as a `note`).

The tracker's resumable state of a startup under way (the store's builders table) is written
here too (`builder_to_json` / `builder_from_json`), so that this module owns every stored
shape; its decode samples and downgrade ledger come as the documents their own types write
(startups/decode_samples.py, startups/ledger.py), which this layer below them never reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..evidence import evidence_from_json, evidence_to_json
from ..model import Evidence, FactValue, StartupRecord

# Values `plain` hands back as they are when not `finite` (exactly these types, no subclass).
_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})


def json_key(key: object) -> str:
    """A mapping key as JSON writes it: `None` -> 'null', `True` -> 'true', `1.5` -> '1.5'."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool | int | float):
        return json.dumps(key)
    return str(key)


def plain(value: Any, *, finite: bool = False) -> Any:
    """`value` as JSON data: tuples to lists, mappings to dicts with string keys, recursively.

    String keys up front keep a nested dict with mixed keys (`{1: 'a', 'b': 2}`, which a
    server_args repr may hold) writable with `sort_keys`. With `finite`, the floats JSON cannot
    carry (nan, inf) become their Python spelling, as the `--json` contract prints them.
    """
    cls = value.__class__
    # Exact types first: most values are, and the Mapping ABC's isinstance is the slow test
    # (a scalar used to pay it: a live daemon's commit walks thousands of them).
    if cls in _SCALARS:
        if finite and cls is float and not math.isfinite(value):
            return repr(value)
        return value
    if cls is dict or (cls is not list and cls is not tuple and isinstance(value, Mapping)):
        return {json_key(k): plain(v, finite=finite) for k, v in value.items()}
    if cls is list or cls is tuple or isinstance(value, list | tuple):
        if not finite and _SCALARS.issuperset(map(type, value)):
            # Nothing in it to convert (a decode sample, a flag list): the bulk of a record.
            return list(value)
        return [plain(v, finite=finite) for v in value]
    if finite and isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def fact_from_doc(value: Any) -> FactValue:
    """A fact read back from JSON: a list is a tuple of strings; anything else not a scalar
    (only a hand-edited document has one) is its string."""
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def facts_from_doc(facts: Mapping[str, Any]) -> dict[str, FactValue]:
    return {str(k): fact_from_doc(v) for k, v in facts.items()}


def record_to_doc(record: StartupRecord) -> dict[str, Any]:
    """The record as a JSON-able dict (the state store's form; `record_from_doc` reads it)."""
    return {
        "unit": record.unit,
        "invocation_id": record.invocation_id,
        "started_at": record.started_at,
        "ready_at": record.ready_at,
        "ended_at": record.ended_at,
        "outcome": record.outcome,
        "failure_reason": record.failure_reason,
        "facts": plain(record.facts),
        "launch_flags": list(record.launch_flags),
        "server_args": plain(record.server_args),
        "rule_hits": plain(record.rule_hits),
        "decode": plain(record.decode),
        "notes": [evidence_to_json(n) for n in record.notes],
        "ledger": plain(record.ledger),
    }


def record_from_doc(doc: Mapping[str, Any]) -> StartupRecord:
    """A record from `record_to_doc`'s dict; keys added after the first version are optional."""
    return StartupRecord(
        unit=doc["unit"],
        invocation_id=doc["invocation_id"],
        started_at=doc["started_at"],
        ready_at=doc["ready_at"],
        outcome=doc["outcome"],
        facts=facts_from_doc(doc["facts"]),
        launch_flags=tuple(doc["launch_flags"]),
        server_args=doc["server_args"],
        failure_reason=doc.get("failure_reason"),
        ended_at=doc.get("ended_at"),
        rule_hits=doc.get("rule_hits", {}),
        decode=doc.get("decode", {}),
        notes=tuple(evidence_from_json(n) for n in doc.get("notes", ())),
        ledger=doc.get("ledger"),
    )


def record_to_json(record: StartupRecord) -> str:
    """The record as the state database stores it (keys sorted: the same record, the same text)."""
    return json.dumps(record_to_doc(record), sort_keys=True)


def record_from_json(text: str) -> StartupRecord:
    return record_from_doc(json.loads(text))


Mono = tuple[int, str]  # the journal's monotonic time: (µs, boot id hex)


@dataclass(frozen=True, slots=True)
class BuilderDoc:
    """The stored state of one startup under way, read back (StartupTracker.restore)."""

    unit: str
    invocation_id: str
    started_at: float
    ready_at: float | None
    ended_at: float | None
    failure_reason: str | None
    exit_status: str | None
    facts: dict[str, FactValue]
    primary: frozenset[str]
    rule_hits: dict[str, int]
    server_args: dict[str, Any]
    flags: tuple[str, ...]
    has_server_args_line: bool
    decode: Mapping[str, Any] | None  # DecodeState.to_dict's document
    start_mono: Mono | None
    ready_mono: Mono | None
    clock_notes: tuple[Evidence, ...]
    ledger: Mapping[str, Any] | None  # LogLedger.to_doc's document


def builder_to_json(
    *,
    unit: str,
    invocation_id: str,
    started_at: float,
    ready_at: float | None,
    ended_at: float | None,
    failure_reason: str | None,
    exit_status: str | None,
    facts: Mapping[str, FactValue],
    primary: Iterable[str],
    rule_hits: Mapping[str, int],
    server_args: Mapping[str, Any],
    flags: Iterable[str],
    has_server_args_line: bool,
    decode: Mapping[str, Any] | None,
    start_mono: Mono | None,
    ready_mono: Mono | None,
    clock_notes: Iterable[Evidence],
    ledger: Mapping[str, Any] | None,
) -> str:
    """A startup under way as the builders table stores it (keys sorted)."""
    data = {
        "unit": unit,
        "invocation_id": invocation_id,
        "started_at": started_at,
        "ready_at": ready_at,
        "ended_at": ended_at,
        "failure_reason": failure_reason,
        "exit_status": exit_status,
        "facts": plain(facts),
        "primary": sorted(primary),
        "rule_hits": rule_hits,
        "server_args": plain(server_args),
        # Never persisted: the raw text is unredacted until it parses.
        "server_args_pending": None,
        "flags": list(flags),
        "has_server_args_line": has_server_args_line,
        "decode": decode,
        "start_mono": start_mono,
        "ready_mono": ready_mono,
        "clock_notes": [evidence_to_json(n) for n in clock_notes],
        "ledger": ledger,
    }
    return json.dumps(data, sort_keys=True)


def builder_from_json(text: str) -> BuilderDoc:
    """`builder_to_json`'s text read back; keys added after the first version are optional."""
    d = json.loads(text)
    return BuilderDoc(
        unit=d["unit"],
        invocation_id=d["invocation_id"],
        started_at=d["started_at"],
        ready_at=d["ready_at"],
        ended_at=d["ended_at"],
        failure_reason=d["failure_reason"],
        exit_status=d["exit_status"],
        facts=facts_from_doc(d["facts"]),
        primary=frozenset(d["primary"]),
        rule_hits=dict(d["rule_hits"]),
        server_args=d["server_args"],
        flags=tuple(d["flags"]),
        has_server_args_line=d["has_server_args_line"],
        decode=d.get("decode"),
        start_mono=_mono_of(d.get("start_mono")),
        ready_mono=_mono_of(d.get("ready_mono")),
        clock_notes=tuple(evidence_from_json(n) for n in d.get("clock_notes", ())),
        ledger=d.get("ledger"),
    )


def _mono_of(value: Any) -> Mono | None:
    if isinstance(value, list | tuple) and len(value) == 2:
        return int(value[0]), str(value[1])
    return None


__all__ = [
    "BuilderDoc",
    "builder_from_json",
    "builder_to_json",
    "fact_from_doc",
    "facts_from_doc",
    "json_key",
    "plain",
    "record_from_doc",
    "record_from_json",
    "record_to_doc",
    "record_to_json",
]
