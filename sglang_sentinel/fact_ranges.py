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
from .model import Evidence, FactValue


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


def _wrong(name: str, value: FactValue) -> str | None:
    """What is wrong with `value` as a `name` ("is not a finite number"), or None."""
    bounds = RANGES.get(name)
    if bounds is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    low, high = bounds
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    # int vs float comparison is exact in Python, with no overflow for a huge int.
    if not low <= value <= high:
        return f"is outside [{low:g}, {high:g}]"
    return None


def problem(name: str, value: FactValue) -> str | None:
    """Why `value` is not a sane `name`, or None when it is (or the fact is not ranged)."""
    wrong = _wrong(name, value)
    return None if wrong is None else f"{name}={describe(value)} {wrong}"


def sane_facts(facts: Mapping[str, FactValue]) -> tuple[dict[str, FactValue], list[Evidence]]:
    """`facts` with every insane numeric value replaced by None, and one note per replacement."""
    out = dict(facts)
    notes: list[Evidence] = []
    for name, value in facts.items():
        wrong = _wrong(name, value)
        if wrong is not None:
            out[name] = None
            notes.append(Evidence("fact_invalid", field=name, new=describe(value), detail=wrong))
    return out, notes
