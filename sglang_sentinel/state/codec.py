"""StartupRecord <-> JSON document: the one codec of a record as plain data.

The state store persists a record as `record_to_json`, the reports print parts of it through
`plain(..., finite=True)`, a baseline file carries its facts and server_args through `plain`
and reads them back with `facts_from_doc`, and the startup tracker's resumable state uses the
same conversions. JSON has lists and string-keyed objects only, so on the way out tuples become
lists and mapping keys become the strings JSON writes for them; on the way back a list-valued
fact becomes a tuple again (records stay hashable). A record's notes are `model.Evidence`,
stored in evidence.py's form (text an older release stored reads back as a `note`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..evidence import evidence_from_json, evidence_to_json
from ..model import FactValue, StartupRecord

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
    if isinstance(value, Mapping):
        return {json_key(k): plain(v, finite=finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
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
    )


def record_to_json(record: StartupRecord) -> str:
    """The record as the state database stores it (keys sorted: the same record, the same text)."""
    return json.dumps(record_to_doc(record), sort_keys=True)


def record_from_json(text: str) -> StartupRecord:
    return record_from_doc(json.loads(text))


__all__ = [
    "fact_from_doc",
    "facts_from_doc",
    "json_key",
    "plain",
    "record_from_doc",
    "record_from_json",
    "record_to_doc",
    "record_to_json",
]
