"""The one place that knows what a sane fact value is.

A rule's regex takes any run of digits, and SGLang prints `inf`/`nan` where Python has them, so a
hostile or broken line can yield a 400-digit `tp_size` or a `dp_size` of infinity. Such a value
would overflow `float()` at scrape time, come out as bare `NaN` in the JSON contract, or win a
comparison it has no business in. `sane_facts` replaces every numeric fact that is not finite and
inside its range below with None and says why, once, in a note that the comparison turns into a
`fact_invalid` finding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from .model import Evidence, FactValue

_GB: Final = (0.0, 1e6)  # up to 1 PB of GPU memory on one server
_GB_DELTA: Final = (-1e6, 1e6)  # a memory delta SGLang prints may be slightly negative
_COUNT: Final = (0.0, 1e12)
_SECONDS: Final = (0.0, 1e8)  # a little over three years

# fact -> inclusive (low, high). Facts not listed (strings, lists, bools) are not checked.
FACT_RANGES: Final[Mapping[str, tuple[float, float]]] = {
    "max_running_requests": _COUNT,
    "max_total_num_tokens": _COUNT,
    "chunked_prefill_size": (-1.0, 1e12),  # -1 turns chunked prefill off
    "max_prefill_tokens": _COUNT,
    "context_len": _COUNT,
    "available_gpu_mem_gb": _GB,
    "load_avail_mem_gb": _GB,
    "kv_cache_tokens": _COUNT,
    "kv_cache_gb": _GB,
    "mamba_cache_size": _COUNT,
    "mamba_running_cap": _COUNT,
    "cuda_graph_max_bs": _COUNT,
    "retracted_requests": _COUNT,
    "memory_pool_avail_gb": _GB,
    "cuda_graph_mem_gb": _GB_DELTA,
    "weight_load_seconds": _SECONDS,
    "weight_mem_gb": _GB_DELTA,
    "startup_seconds": _SECONDS,
    "tp_size": (1.0, 1e6),
    "dp_size": (1.0, 1e6),
    # runtime facts (the latest batch line)
    "gen_throughput": (0.0, 1e12),
    "input_throughput": (0.0, 1e12),
    "running_requests": _COUNT,
    "queued_requests": _COUNT,
    "token_usage": (0.0, 1e6),
}


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
    bounds = FACT_RANGES.get(name)
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
