"""The decode comparison's statistics (`compare_decode`, `hodges_lehmann`, `mann_whitney_z`, the
step-time fit) give exactly what the implementation they replaced gave: the same `runtime.decode`
block, value for value (it is serialised and rendered), for generated startups' samples: tied,
constant, one-sided, speculative or not, restored with odd values.

The oracle below is that implementation, kept verbatim (`median` .. `_solve` as they were before
the faster statistics); `compare_decode` is the old one with only its helpers renamed."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from sglang_sentinel.compare import decode_stats as decode
from sglang_sentinel.compare.decode_stats import DecodeSettings, _bucket_order, graph_off_share
from sglang_sentinel.startups.decode_samples import DecodeState

# -- the oracle: the statistics before the faster ones ---------------------------------------------

_DEFAULT = DecodeSettings()


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("median of nothing")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def hodges_lehmann(x: Sequence[float], y: Sequence[float]) -> float:
    """The Hodges-Lehmann shift estimate: the median of all differences x_i - y_j."""
    return median([a - b for a in x for b in y])


def mann_whitney_z(x: Sequence[float], y: Sequence[float]) -> float:
    """Mann-Whitney U of x against y as a z-score (normal approximation, tie-corrected,
    continuity-corrected); positive when x tends to be larger."""
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


def compare_decode(
    current: Mapping[str, Any] | None,
    baseline: Mapping[str, Any] | None,
    settings: DecodeSettings = _DEFAULT,
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
        c, b = cur[key], base[key]
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
    cur_all = [x for v in cur.values() for x in v if _usable(x)]
    base_all = [x for v in base.values() for x in v if _usable(x)]
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
    rc = [math.log(x[0]) - model(x) for x in like]
    rb = [math.log(x[0]) - model(x) for x in base_all]
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


def _usable(sample: Sequence[float]) -> bool:
    return len(sample) >= 5 and sample[0] > 0 and sample[4] > 0


def _thin(values: list[float], limit: int) -> list[float]:
    """At most `limit` values, evenly spaced (keeps the Hodges-Lehmann pairs bounded)."""
    if len(values) <= limit:
        return values
    step = len(values) / limit
    return [values[int(i * step)] for i in range(limit)]


def _fit(samples: Sequence[Sequence[float]]) -> Any:
    """The baseline's decode step-time model, as a predictor of log rate per request.

    A decode step costs a fixed part (weights read once per step), a part per padded request
    and a part per KV token read by attention, so seconds per token per request (1 / rate) is
    close to linear in the padded batch size, the context per request and their product.
    Least squares on that scale (lightly ridged so a baseline at one batch size still solves).
    """
    rows = [_features(x) for x in samples]
    k = len(rows[0])
    means = [sum(r[j] for r in rows) / len(rows) for j in range(k)]
    sds = [
        math.sqrt(sum((r[j] - means[j]) ** 2 for r in rows) / len(rows)) or 1.0 for j in range(k)
    ]
    zrows = [[1.0] + [(r[j] - means[j]) / sds[j] for j in range(k)] for r in rows]
    y = [1.0 / x[0] for x in samples]
    m = k + 1
    a = [[sum(r[i] * r[j] for r in zrows) for j in range(m)] for i in range(m)]
    for i in range(1, m):
        a[i][i] += 1.0
    rhs = [sum(r[i] * yy for r, yy in zip(zrows, y, strict=True)) for i in range(m)]
    beta = _solve(a, rhs)
    floor = min(y) / 4  # a prediction at or below zero is an extrapolation; clamp it

    def predict(x: Sequence[float]) -> float:
        f = _features(x)
        t = beta[0] + sum(beta[j + 1] * (f[j] - means[j]) / sds[j] for j in range(k))
        return -math.log(max(t, floor))

    return predict


def _features(x: Sequence[float]) -> list[float]:
    pad, ctx = x[3], x[4] / 1000.0
    return [pad, ctx, pad * ctx]


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


# -- generated inputs ------------------------------------------------------------------------------

# Few distinct values, so ties (within and across sides) are common; and the odd non-finite one.
_values = st.one_of(
    st.sampled_from([0.5, 1.0, 1.5, 2.0, -1.0, 0.0, -0.0, 3.25]),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.integers(min_value=-5, max_value=5),
)
_odd = st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308])
_pairs = st.tuples(st.lists(_values, max_size=40), st.lists(_values, max_size=40))


def _same(new: Any, old: Any) -> None:
    """The same serialised value (a NaN equals a NaN here), or the same exception."""
    assert json.dumps(new) == json.dumps(old)


def _equal(new: Any, old: Any) -> None:
    """The same value (0 == 0.0 == -0.0: with integer or signed-zero inputs a median may be
    another of equal values), or the same exception."""
    if isinstance(new, float) and isinstance(old, float) and math.isnan(new):
        assert math.isnan(old)
    else:
        assert new == old
        assert type(new) is type(old) or {type(new), type(old)} <= {int, float}


def _outcome(f: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return f(*args, **kwargs)
    except Exception as exc:  # the old code's failures must be the new one's
        return f"{type(exc).__name__}: {exc}"


@hypothesis_settings(max_examples=500, deadline=None)
@given(_pairs, st.lists(_odd, max_size=2), st.booleans())
def test_mann_whitney_and_hodges_lehmann_equal_the_old_ones(
    xy: tuple[list[float], list[float]], odd: list[float], odd_in_x: bool
) -> None:
    x, y = xy
    if odd:
        (x if odd_in_x else y).extend(odd)
    _equal(_outcome(decode.mann_whitney_z, x, y), _outcome(mann_whitney_z, x, y))
    _equal(_outcome(decode.hodges_lehmann, x, y), _outcome(hodges_lehmann, x, y))


def _sample(rates: st.SearchStrategy[float] | None = None) -> st.SearchStrategy[list[float]]:
    return st.tuples(
        rates
        if rates is not None
        else st.one_of(st.sampled_from([10.0, 12.5, 20.0]), st.floats(0.001, 1e4)),
        st.one_of(st.just(0.0), st.sampled_from([1.5, 2.0, 3.0]), st.floats(0.5, 8.0)),  # accept
        st.one_of(st.sampled_from([800.0, 1000.0]), st.floats(1.0, 1e6)),  # gen throughput
        st.sampled_from([1.0, 2.0, 8.0, 16.0, 64.0, 256.0]),  # padded batch size
        st.one_of(st.sampled_from([0.0, 512.0, 2048.5]), st.floats(0.0, 1e6)),  # context
    ).map(list)


def _summaries(rates: st.SearchStrategy[float] | None = None) -> st.SearchStrategy[Any]:
    """A startup's decode summary (or none): up to four buckets of up to 70 samples (a bucket
    keeps 64; a restored one may hold more), often the same keys on both sides."""
    bucket = st.integers(0, 70).flatmap(lambda n: st.lists(_sample(rates), min_size=n, max_size=n))
    keys = st.sampled_from(["bs1/ctx512", "bs8/ctx1024", "bs16/ctx?", "bs64/ctx4096", "x"])
    return st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "buckets": st.dictionaries(keys, bucket, max_size=4),
                "counts": st.fixed_dictionaries(
                    {"decode_lines": st.integers(0, 100), "graph_off_lines": st.integers(0, 100)}
                ),
            }
        ),
    )


_summary = _summaries()


@pytest.mark.heavy
@hypothesis_settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    _summary,
    _summary,
    st.integers(1, 10),
    st.integers(1, 40),
    st.booleans(),
    st.sampled_from([None, 0.5, 0.97, 1.0, 1.6]),
)
def test_compare_decode_equals_the_old_one(
    current: dict[str, Any] | None,
    baseline: dict[str, Any] | None,
    min_bucket: int,
    min_samples: int,
    final: bool,
    scale: float | None,
) -> None:
    """Same block, value for value and key for key. `scale`: the current startup is the
    baseline with its rates scaled (so verdicts other than inconclusive come up)."""
    if scale is not None and baseline is not None:
        current = {
            "buckets": {
                k: [[x[0] * scale, *x[1:]] for x in v] for k, v in baseline["buckets"].items()
            },
            "counts": baseline["counts"],
        }
    settings = DecodeSettings(min_bucket_samples=min_bucket, min_samples=min_samples)
    new = _outcome(decode.compare_decode, current, baseline, settings, final=final)
    old = _outcome(compare_decode, current, baseline, settings, final=final)
    _same(new, old)


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_sample(), min_size=1, max_size=120), st.lists(_sample(), max_size=60))
def test_fit_residuals_equal_the_old_model(
    base: list[list[float]], other: list[list[float]]
) -> None:
    usable = [x for x in base if x[0] > 0]
    if not usable:
        return
    new = _outcome(lambda: decode._fit(usable)(usable + [x for x in other if x[0] > 0]))
    model = _outcome(_fit, usable)
    old = (
        model
        if isinstance(model, str)
        else _outcome(
            lambda: [math.log(x[0]) - model(x) for x in usable + [x for x in other if x[0] > 0]]
        )
    )
    _same(new, old)


@pytest.mark.heavy
@hypothesis_settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(_summaries(st.sampled_from([0.0, 10.0, 12.0])), _summary)
def test_compare_decode_with_zero_rates_is_the_old_one_without_them(
    current: dict[str, Any] | None, baseline: dict[str, Any] | None
) -> None:
    """The old one raised on a bucket sample of rate 0 (log of 0); the new one leaves such
    samples out of the buckets, as the model always did: the old one's block without them."""

    def without_zero_rates(summary: dict[str, Any] | None) -> dict[str, Any] | None:
        if summary is None:
            return None
        buckets = {k: [x for x in v if x[0] > 0] for k, v in summary["buckets"].items()}
        return {**summary, "buckets": buckets}

    for a, b in ((current, baseline), (baseline, current)):
        old = compare_decode(without_zero_rates(a), without_zero_rates(b))
        _same(decode.compare_decode(a, b), old)


def test_ties_and_non_finite_values_by_hand() -> None:
    """The tie correction, and the plain path a NaN or an infinity takes."""
    x, y = [1.0, 1.0, 2.0, 3.0], [1.0, 2.0, 2.0, 5.0]
    assert decode.mann_whitney_z(x, y) == mann_whitney_z(x, y)
    assert decode.mann_whitney_z(x, y) == pytest.approx(-0.455232734000163)
    assert decode.hodges_lehmann(x, y) == hodges_lehmann(x, y) == -0.5
    nan = [math.nan, 1.0, 2.0]
    assert json.dumps(decode.mann_whitney_z(nan, y)) == json.dumps(mann_whitney_z(nan, y))
    # NaN on some Pythons (inf - inf among the differences): compared as written, NaN == NaN.
    assert json.dumps(decode.hodges_lehmann([math.inf, 1.0], [math.inf, 0.0])) == json.dumps(
        hodges_lehmann([math.inf, 1.0], [math.inf, 0.0])
    )
    with pytest.raises(ValueError, match="median of nothing"):
        decode.hodges_lehmann([], [1.0])
    with pytest.raises(IndexError):
        decode._fit([])


def _decode_text(bs: int, gen: float) -> str:
    return (
        f"[2026-03-09 21:41:22 TP0] Decode batch, #running-req: {bs}, #token: {bs * 2000}, "
        f"token usage: 0.10, cuda graph: True, gen throughput (token/s): {gen:.2f}, #queue-req: 0"
    )


def _stalled_startup(rate: float) -> dict[str, Any]:
    """40 requests decoding at `rate` tok/s each, and one interval at 0.01 tok/s in all (a
    stalled scheduler): its rate per request, 0.01 / 40, keeps three decimals as 0.0."""
    state = DecodeState()
    gens = [40 * rate * (1 + (i % 7) / 100) for i in range(40)]
    gens[20] = 0.01
    for i, gen in enumerate([40 * rate, *gens]):
        state.observe("decode_batch", _decode_text(40, gen), 2000.0 + i, 1000.0, 300.0)
    return state.summary()


def test_a_clean_interval_whose_rate_rounds_to_zero_does_not_break_the_comparison() -> None:
    """Such a sample used to make the bucket statistics take log(0): the comparison raised,
    so the startup had none (the daemon counted a fault; `sentinel scan` failed on it). A rate
    of 0 says nothing about a step's speed: the bucket leaves it out, as the model already did."""
    current, baseline = _stalled_startup(20.0), _stalled_startup(25.0)
    (samples,) = current["buckets"].values()
    assert [x[0] for x in samples].count(0.0) == 1
    result = decode.compare_decode(current, baseline)
    (bucket,) = result["buckets"]
    assert (bucket["samples"], bucket["baseline_samples"]) == (39, 39)
    assert bucket["ratio"] == 0.8
    assert result["clean_samples"] == result["baseline_samples"] == 39
    assert result["estimate"] == 0.8
