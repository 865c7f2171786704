"""Decode throughput at like load, judged: a startup's decode samples against its baseline's.

The startup tracker keeps bounded per-bucket samples of the decode intervals that measure
decoding alone (startups/decode_samples.py, docs/decode-throughput.md); `compare_decode`
compares two startups' samples bucket by bucket with a rank test (Hodges-Lehmann shift,
Mann-Whitney z) and `describe` / `bucket_evidence` say the result in words.

Pure Python on purpose (no numpy/scipy): a few hundred samples per startup at most.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from math import log
from operator import add, mul, neg, sub, truediv
from typing import Any


def median(values: Sequence[float]) -> float:
    return _median_sorted(sorted(values))


def _median_sorted(s: Sequence[float]) -> float:
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def _finite(*values: Sequence[float]) -> bool:
    """Whether every value is finite: a NaN or an infinity carries through a sum (an overflow
    only makes this say no, which is safe: callers then take their plain path)."""
    try:
        return all(math.isfinite(sum(v)) for v in values)
    except (OverflowError, TypeError):
        return False


def hodges_lehmann(x: Sequence[float], y: Sequence[float]) -> float:
    """The Hodges-Lehmann shift estimate: the median of all differences x_i - y_j.

    With x sorted, the differences from one y_j come in order (rounding is monotone), so the
    sort merges len(y) runs rather than sorting from scratch; the median is the same value (a
    zero's sign aside). A NaN or an infinity (whose differences may be NaN) takes the plain way.
    """
    if not _finite(x, y):
        return median([a - b for a in x for b in y])
    xs = sorted(x)
    n = len(xs)
    diffs: list[float] = []
    for b in y:
        diffs += map(sub, xs, repeat(b, n))
    diffs.sort()
    return _median_sorted(diffs)


def mann_whitney_z(x: Sequence[float], y: Sequence[float]) -> float:
    """Mann-Whitney U of x against y as a z-score (normal approximation, tie-corrected,
    continuity-corrected); positive when x tends to be larger."""
    if not _finite(x, y):
        return _mann_whitney_z_pooled(x, y)  # NaN sorts nowhere: the order of the old loop
    n1, n2 = len(x), len(y)
    n = n1 + n2
    pooled = sorted([*x, *y])
    # An x in a run of equal values pooled[lo:hi] has the mid-rank (lo + hi + 1) / 2: exact
    # half-integers, whose sum is the same in any order.
    ranks_x = (
        sum(map(bisect_left, repeat(pooled, n1), x))
        + sum(map(bisect_right, repeat(pooled, n1), x))
        + n1
    ) / 2
    ties = 0.0
    if len(set(pooled)) < n:
        for t in Counter(pooled).values():  # the runs in sorted order, as the loop had them
            ties += t**3 - t
    return _z(ranks_x, ties, n1, n2)


def _mann_whitney_z_pooled(x: Sequence[float], y: Sequence[float]) -> float:
    """`mann_whitney_z` by a walk over the pooled, labelled values (any input, NaN included)."""
    n1, n2 = len(x), len(y)
    pooled = sorted([(v, 0) for v in x] + [(v, 1) for v in y])
    ranks_x = 0.0
    ties = 0.0
    i = 0
    n = n1 + n2
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2 + 1
        t = j - i + 1
        ties += t**3 - t
        ranks_x += rank * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        i = j + 1
    return _z(ranks_x, ties, n1, n2)


def _z(ranks_x: float, ties: float, n1: int, n2: int) -> float:
    """The normal approximation of Mann-Whitney's U from x's rank sum and the tie term (sum of
    t^3 - t over runs of equal values), with continuity correction."""
    n = n1 + n2
    u = ranks_x - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 0.0
    diff = u - mean
    diff = diff - 0.5 if diff > 0 else diff + 0.5 if diff < 0 else 0.0
    return diff / math.sqrt(var)


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2))


# -- the comparison ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DecodeSettings:
    """Thresholds of the decode comparison (policy `decode_throughput_drop`)."""

    min_bucket_samples: int = 8  # per side, for a bucket to count
    min_samples: int = 30  # current clean samples in counted buckets, for any verdict
    margin: float = 0.05  # |ratio - 1| below this is `unchanged`
    z_critical: float = 3.09  # one-sided p < 0.001
    warmup_seconds: float = 300.0


def compare_decode(
    current: Mapping[str, Any] | None,
    baseline: Mapping[str, Any] | None,
    settings: DecodeSettings = DecodeSettings(),
    *,
    final: bool = False,
) -> dict[str, Any]:
    """The JSON contract's `runtime.decode` block: current vs baseline at like load.

    Like load, twice: (1) a step-time model fitted on the baseline's clean samples, log rate
    per request ~ padded batch size and context per request, gives every sample a residual,
    and only current samples inside the baseline's (batch, context) range count; the verdict's
    ratio is exp(Hodges-Lehmann shift) of current against baseline residuals and its test a
    Mann-Whitney U on them. (2) Buckets (captured graph size x context octave) with enough
    samples on both sides are reported with their own medians, ratio and z as the evidence.
    """
    cur = (current or {}).get("buckets", {})
    base = (baseline or {}).get("buckets", {})
    buckets: list[dict[str, Any]] = []
    for key in sorted(set(cur) & set(base), key=_bucket_order):
        # A rate of 0 (an interval so stalled that its rate per request rounds to 0.000) says
        # nothing about a step's speed and has no log: left out, as the model leaves it out.
        c = [x for x in cur[key] if x[0] > 0]
        b = [x for x in base[key] if x[0] > 0]
        if len(c) < settings.min_bucket_samples or len(b) < settings.min_bucket_samples:
            continue
        lc = [math.log(x[0]) for x in c]
        lb = [math.log(x[0]) for x in b]
        buckets.append(
            {
                "bucket": key,
                "samples": len(c),
                "baseline_samples": len(b),
                "median_tps": round(median([x[2] for x in c]), 2),
                "baseline_median_tps": round(median([x[2] for x in b]), 2),
                "ratio": round(math.exp(hodges_lehmann(lc, lb)), 4),
                "z": round(mann_whitney_z(lc, lb), 2),
            }
        )
    # _usable, inline
    cur_all = [x for v in cur.values() for x in v if len(x) >= 5 and x[0] > 0 and x[4] > 0]
    base_all = [x for v in base.values() for x in v if len(x) >= 5 and x[0] > 0 and x[4] > 0]
    result: dict[str, Any] = {
        "verdict": "inconclusive",
        "ratio": None,
        "estimate": None,
        "samples": 0,
        "baseline_samples": len(base_all),
        "clean_samples": len(cur_all),
        "buckets": buckets,
        "graph_off_share": graph_off_share(current),
        "baseline_graph_off_share": graph_off_share(baseline),
        "final": final,
    }
    if len(base_all) < settings.min_samples or not cur_all:
        return result
    model = _fit(base_all)
    lo_p = min(x[3] for x in base_all)
    hi_p = max(x[3] for x in base_all)
    lo_c = min(x[4] for x in base_all)
    hi_c = max(x[4] for x in base_all)
    # Like load: inside the baseline's range, widened by a quarter of it (the step-time model
    # is linear, so a short extrapolation is safe; a long one is not made).
    wp, wc = (hi_p - lo_p) / 4, (hi_c - lo_c) / 4
    like = [x for x in cur_all if lo_p - wp <= x[3] <= hi_p + wp and lo_c - wc <= x[4] <= hi_c + wc]
    result["samples"] = len(like)
    if len(like) < settings.min_bucket_samples:
        return result
    rc = model(like)
    rb = model(base_all)
    shift = hodges_lehmann(_thin(rc, 160), _thin(rb, 160))
    z = mann_whitney_z(rc, rb)
    ratio = math.exp(shift)
    result["estimate"] = round(ratio, 4)
    result["z"] = round(z, 2)
    result["p_value"] = float(f"{2 * normal_sf(abs(z)):.3g}")
    base_tps = median([x[2] for x in base_all])
    result["baseline_tps"] = round(base_tps, 1)
    result["current_tps"] = round(base_tps * ratio, 1)
    spec_c = [x for x in like if x[1] > 0]
    spec_b = [x for x in base_all if x[1] > 0]
    if len(spec_c) >= settings.min_bucket_samples and len(spec_b) >= settings.min_bucket_samples:
        accept = hodges_lehmann(
            _thin([math.log(x[1]) for x in spec_c], 256),
            _thin([math.log(x[1]) for x in spec_b], 256),
        )
        result["speculative"] = {
            "accept_len_ratio": round(math.exp(accept), 4),
            # step rate = verify steps per second = token rate / accept len
            "step_rate_ratio": round(math.exp(shift - accept), 4),
        }
    if len(like) < settings.min_samples:
        return result
    if z <= -settings.z_critical and ratio <= 1 - settings.margin:
        result["verdict"] = "regressed"
    elif z >= settings.z_critical and ratio >= 1 + settings.margin:
        result["verdict"] = "improved"
    elif abs(ratio - 1) < settings.margin:
        result["verdict"] = "unchanged"
    if result["verdict"] != "inconclusive":
        result["ratio"] = round(ratio, 4)
    return result


def _thin(values: list[float], limit: int) -> list[float]:
    """At most `limit` values, evenly spaced (keeps the Hodges-Lehmann pairs bounded)."""
    if len(values) <= limit:
        return values
    step = len(values) / limit
    return [values[int(i * step)] for i in range(limit)]


def _fit(samples: Sequence[Sequence[float]]) -> Callable[[Sequence[Sequence[float]]], list[float]]:
    """The baseline's decode step-time model, as the residuals it leaves: for each sample, its
    log rate per request less the one predicted.

    A decode step costs a fixed part (weights read once per step), a part per padded request
    and a part per KV token read by attention, so seconds per token per request (1 / rate) is
    close to linear in the padded batch size, the context per request and their product.
    Least squares on that scale (lightly ridged so a baseline at one batch size still solves).

    Computed a column at a time (map over the features), with the same operations on the same
    values in the same order as sample by sample, so to the bit the same: `sum` stays `sum`
    (its float accumulation differs between Python versions, so nothing replaces it).
    """
    if not samples:
        raise IndexError("list index out of range")  # as a fit of no rows always did
    n = len(samples)
    cols = _feature_columns(samples)
    means = [sum(c) / n for c in cols]
    sds = [
        math.sqrt(sum(map(pow, map(sub, c, repeat(mean)), repeat(2))) / n) or 1.0
        for c, mean in zip(cols, means, strict=True)
    ]
    zcols = [[1.0] * n] + [
        list(map(truediv, map(sub, c, repeat(mean)), repeat(sd)))
        for c, mean, sd in zip(cols, means, sds, strict=True)
    ]
    y = [1.0 / x[0] for x in samples]
    m = len(zcols)
    a = [[0.0] * m for _ in range(m)]
    for i in range(m):
        for j in range(i, m):  # r[i] * r[j] == r[j] * r[i]: the matrix is symmetric
            a[i][j] = a[j][i] = sum(map(mul, zcols[i], zcols[j]))
    for i in range(1, m):
        a[i][i] += 1.0
    rhs = [sum(map(mul, z, y)) for z in zcols]
    beta = _solve(a, rhs)
    floor = min(y) / 4  # a prediction at or below zero is an extrapolation; clamp it

    def residuals(xs: Sequence[Sequence[float]]) -> list[float]:
        terms = [
            # beta_j * (f_j - mean_j) / sd_j
            map(truediv, map(mul, repeat(bj), map(sub, c, repeat(mean))), repeat(sd))
            for bj, c, mean, sd in zip(beta[1:], _feature_columns(xs), means, sds, strict=True)
        ]
        t = map(add, repeat(beta[0]), map(sum, zip(*terms, strict=True)))
        predicted = map(neg, map(log, map(max, t, repeat(floor))))  # -log(max(t, floor))
        return list(map(sub, map(log, [x[0] for x in xs]), predicted))

    return residuals


def _feature_columns(samples: Sequence[Sequence[float]]) -> list[list[float]]:
    """The model's features of every sample, as columns: padded batch size, context per request
    (thousands of tokens), their product."""
    pads = [x[3] for x in samples]
    ctxs = [x[4] / 1000.0 for x in samples]
    return [pads, ctxs, list(map(mul, pads, ctxs))]


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (a small, well-conditioned system)."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        if abs(m[col][col]) < 1e-12:
            continue
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                for c in range(col, n + 1):
                    m[r][c] -= f * m[col][c]
    return [m[i][n] / m[i][i] if abs(m[i][i]) >= 1e-12 else 0.0 for i in range(n)]


def graph_off_share(summary: Mapping[str, Any] | None) -> float | None:
    """Share of decode lines that ran without a CUDA graph (None without decode lines)."""
    counts = (summary or {}).get("counts", {})
    lines = counts.get("decode_lines", 0)
    return round(counts.get("graph_off_lines", 0) / lines, 4) if lines else None


def phase_durations(phases: Mapping[str, float], started_at: float) -> dict[str, float]:
    """Startup phase durations (seconds) from the first line of each phase rule."""
    out: dict[str, float] = {}

    def span(name: str, a: float | None, b: float | None) -> None:
        if a is not None and b is not None and b >= a:
            out[name] = round(b - a, 3)

    span("weight_load", phases.get("load_begin"), phases.get("load_end"))
    span(
        "kv_allocation",
        phases.get("load_end"),
        phases.get("pool_end") or phases.get("kv_allocated"),
    )
    span("graph_capture", phases.get("capture_begin"), phases.get("capture_end"))
    span("time_to_ready", started_at, phases.get("ready"))
    return out


def _bucket_order(key: str) -> tuple[int, float]:
    graph, _, ctx = key.partition("/")
    try:
        return int(graph.removeprefix("bs")), float(ctx.removeprefix("ctx").replace("?", "-1"))
    except ValueError:
        return 0, 0.0


def describe(result: Mapping[str, Any]) -> str:
    """The report's one line: `decode at like load 1180 → 955 tok/s (-19 %), 3 buckets, 120 samples`."""
    n = result.get("samples", 0)
    nb = len(result.get("buckets", ()))
    if result.get("current_tps") is None:
        return (
            f"decode at like load: {result.get('verdict', 'inconclusive')}, "
            f"{result.get('clean_samples', 0)} clean samples, no bucket comparable yet"
        )
    change = (
        (result["current_tps"] / result["baseline_tps"] - 1) * 100
        if result["baseline_tps"]
        else 0.0
    )
    sign = "−" if change < 0 else "+"
    text = (
        f"decode at like load {result['baseline_tps']:.0f} → {result['current_tps']:.0f} tok/s "
        f"({sign}{abs(change):.0f} %), {nb} bucket{'s' if nb != 1 else ''}, {n} samples: "
        f"{result['verdict']}"
    )
    spec = result.get("speculative")
    if spec:
        text += f"; accept len ×{spec['accept_len_ratio']:.2f}, step rate ×{spec['step_rate_ratio']:.2f}"
    return text


def bucket_evidence(result: Mapping[str, Any], limit: int = 6) -> list[str]:
    """Per-bucket evidence lines for a finding."""
    out = []
    for e in list(result.get("buckets", ()))[:limit]:
        out.append(
            f"bucket {e['bucket']}: median {e['baseline_median_tps']} → {e['median_tps']} tok/s, "
            f"ratio {e['ratio']}, {e['baseline_samples']}/{e['samples']} samples, z={e['z']}"
        )
    return out


def iter_samples(summary: Mapping[str, Any] | None) -> Iterable[tuple[str, list[float]]]:
    for key, samples in (summary or {}).get("buckets", {}).items():
        for s in samples:
            yield key, s
