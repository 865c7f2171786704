"""Sane fact values: finite and inside the fact's range in the registry (facts.py).

A rule's regex takes any run of digits, and SGLang prints `inf`/`nan` where Python has them, so a
hostile or broken line can yield a 400-digit `tp_size` or a `dp_size` of infinity. Such a value
would overflow `float()` at scrape time, come out as bare `NaN` in the JSON contract, or win a
comparison it has no business in. `sane_facts` replaces every numeric fact that is not finite and
inside its range with None and says why, once, in a note that the comparison turns into a
`fact_invalid` finding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .facts import RANGES
from .model import FactValue


def describe(value: object) -> str:
    """A short text for a value in a note; never the 400 digits (str() refuses > 4300 anyway)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        if value.bit_length() < 14_000:  # str() refuses more than 4300 digits
            digits = str(len(str(abs(value))))
        else:
            digits = f"~{int(value.bit_length() * math.log10(2)) + 1}"
        return f"a {'-' if value < 0 else ''}{digits}-digit integer"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def problem(name: str, value: FactValue) -> str | None:
    """Why `value` is not a sane `name`, or None when it is (or the fact is not ranged)."""
    bounds = RANGES.get(name)
    if bounds is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    low, high = bounds
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name}={describe(value)} is not a finite number"
    # int vs float comparison is exact in Python, with no overflow for a huge int.
    if not low <= value <= high:
        return f"{name}={describe(value)} is outside [{low:g}, {high:g}]"
    return None


def sane_facts(facts: Mapping[str, FactValue]) -> tuple[dict[str, FactValue], list[str]]:
    """`facts` with every insane numeric value replaced by None, and one note per replacement."""
    out = dict(facts)
    notes: list[str] = []
    for name, value in facts.items():
        why = problem(name, value)
        if why is not None:
            out[name] = None
            notes.append(f"fact_invalid: {why}; recorded as null")
    return out, notes
