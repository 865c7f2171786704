"""Evidence as data: the one place that words a `model.Evidence`, and its stored form.

compare, runtime_checks, fact_ranges and the startup tracker produce `Evidence` records; the
report, the status page, the alert pushes, the CLI and the JSON contract show
`render_evidence(e)`. Nothing reads a sentence back: what a consumer needs (a flag list, the
origin of a server_args change) it takes from the record's fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, get_args

from .fact_ranges import describe
from .model import Evidence, EvidenceKind

KINDS: frozenset[str] = frozenset(get_args(EvidenceKind))
# Kinds whose old/new are flag lists (tuples in memory, lists in JSON).
_FLAG_KINDS = frozenset({"flags_added", "flags_removed", "flags_changed"})
_FIELDS = tuple(f.name for f in fields(Evidence))


def fmt_value(value: object) -> str:
    """A fact or server_args value as evidence and messages show it."""
    if value is None:
        return "unset"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # inf, -inf, nan: int(value) would raise
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return describe(value)
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.2f}"
    return str(value)


def invalid_fact_text(e: Evidence) -> str:
    """A fact_invalid item without its kind: `tp_size=inf is not a finite number; recorded as null`."""
    return f"{e.field}={e.new} {e.detail}; recorded as null"


def _origin_text(e: Evidence) -> str:
    if e.origin == "command_line":
        return f"{e.flag} on the command line"
    if e.origin == "set_by_sglang":
        return "not on the command line: set by SGLang"
    return "command line not seen"


def render_evidence(e: Evidence) -> str:
    """The sentence a person reads for one piece of evidence (the JSON contract keeps it too)."""
    kind = e.kind
    if kind == "flags_added":
        return "flags added: " + ", ".join(e.new)
    if kind == "flags_removed":
        return "flags removed: " + ", ".join(e.old)
    if kind == "flags_changed":
        pairs = zip(e.old, e.new, strict=True)
        return "flags changed: " + "; ".join(f"{old} → {new}" for old, new in pairs)
    if kind == "server_arg_changed":
        note = f" ({e.detail})" if e.detail else ""
        return (
            f"server_args {e.field}: {fmt_value(e.old)} → {fmt_value(e.new)}{note}; "
            + _origin_text(e)
        )
    if kind == "schema_changed":
        return (
            f"server_args schema changed (SGLang version?): {e.new} field(s) added with "
            f"default values, {e.old} removed"
        )
    if kind == "memory_at_load":
        return f"free GPU memory at load {e.old:.2f} → {e.new:.2f} GB"
    if kind == "logged_by_sglang":
        return f"SGLang logged: disabled because {e.new}"
    if kind == "fact_invalid":
        return "fact_invalid: " + invalid_fact_text(e)
    if kind == "clock_skew":
        return f"clock_skew: {e.detail}"
    if kind == "phase_duration":
        return f"{e.field}: {'?' if e.old is None else e.old} s → {e.new} s"
    return e.detail or ""


def note(text: str) -> Evidence:
    """Evidence that is a sentence and nothing more."""
    return Evidence("note", detail=text)


def evidence_to_json(e: Evidence) -> dict[str, Any]:
    """The stored form: kind and the fields that are set (flag lists as lists)."""
    out: dict[str, Any] = {}
    for name in _FIELDS:
        value = getattr(e, name)
        if value is not None:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def evidence_from_json(data: object) -> Evidence:
    """Read a stored item back; text stored by an older release becomes a `note`, shown as it was."""
    if isinstance(data, str):
        return note(data)
    if not isinstance(data, Mapping) or data.get("kind") not in KINDS:
        return note(str(data))
    values: dict[str, Any] = {name: data.get(name) for name in _FIELDS}
    if values["kind"] in _FLAG_KINDS:
        for side in ("old", "new"):
            if isinstance(values[side], list):
                values[side] = tuple(values[side])
    return Evidence(**values)
