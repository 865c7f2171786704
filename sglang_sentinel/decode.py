"""Decode throughput at like load: clean decode intervals, like-for-like buckets, a rank test.

SGLang prints a `Decode batch` line every `--decode-log-interval` (40) decode steps; its
`gen throughput` is the tokens decoded since the previous decode line over the wall time since
it (`report_decode_stats`), so anything else the scheduler did in between (prefill, idle,
retraction) sits in the denominator, and `#running-req` / `#token` / `cuda graph` describe only
the last step. `DecodeState` keeps, per startup, only the intervals that measure decoding alone
(docs/decode-throughput.md defends each filter) as bounded per-bucket samples, and
`compare_decode` compares two startups' samples bucket by bucket.

Pure Python on purpose (no numpy/scipy): a few hundred samples per startup at most.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from math import floor, log, log2
from operator import add, mul, neg, sub, truediv
from typing import Any, Final

# Rules whose lines the decode state reads (their ids in rules/50-runtime.yaml and 20-cuda-graph.yaml).
DECODE_RULE = "decode_batch"
PREFILL_RULE = "prefill_batch"
RETRACT_RULE = "kv_pool_retract"
OOM_RULE = "runtime_out_of_memory"
CAPTURE_BS_RULES: Final = frozenset({"cuda_graph_capture_bs"})
OBSERVED_RULES: Final = frozenset(
    {DECODE_RULE, PREFILL_RULE, RETRACT_RULE, OOM_RULE, *CAPTURE_BS_RULES}
)
# Startup phases: rule id -> the phase mark its first line sets (see `phase_durations`).
PHASE_RULES: Final[Mapping[str, str]] = {
    "load_weight_begin": "load_begin",
    "load_weight_end": "load_end",
    "kv_cache_allocated": "kv_allocated",
    "memory_pool_end": "pool_end",
    "cuda_graph_capture_begin": "capture_begin",
    "cuda_graph_capture_end": "capture_end",
    "server_ready": "ready",
}

# Bounds: samples kept per bucket (the newest), buckets per startup (the first seen).
MAX_SAMPLES_PER_BUCKET: Final = 64
MAX_BUCKETS: Final = 32
# SGLang's default capture list (cuda_graph_runner get_batch_sizes_to_capture, 0.5.x) for when
# the startup's `Capture cuda graph bs [...]` line was not seen.
DEFAULT_CAPTURE_BS: Final = (1, 2, 4, 8, 12, 16, 24, 32, *range(40, 257, 8))

_RUNNING = b"#running-req: "
_TOKEN = b"token: "  # `#token: N` (plain pool) or `#full token: N` (SWA / SSM pools)
_GRAPH = b" graph: "  # `cuda graph:` or, 0.5.3 .. 0.5.7 on CPU, `cpu graph:`
_GEN = b"gen throughput (token/s): "
_ACCEPT = b"accept len: "
# Entries of each of decode_line's memos before it starts over (a garbage journal's batch
# sizes cannot grow it without bound).
_MEMO_CAP: Final = 4096
_RUNNING_LEN: Final = len(_RUNNING)
_GRAPH_LEN: Final = len(_GRAPH)
_GEN_LEN: Final = len(_GEN)
_TOKEN_LEN: Final = len(_TOKEN)
_ACCEPT_LEN: Final = len(_ACCEPT)


@dataclass(frozen=True, slots=True)
class DecodeLine:
    """The fields of one `Decode batch` line the comparison needs."""

    running: int
    tokens: int | None
    graph: bool | None  # None: a version without the field (<= 0.4.x)
    gen: float
    accept_len: float | None


def _field(raw: bytes, key: bytes, start: int) -> bytes | None:
    i = raw.find(key, start)
    if i < 0:
        return None
    i += len(key)
    j = raw.find(b",", i)
    return raw[i:j] if j >= 0 else raw[i:]


def parse_decode_line(line: bytes | str) -> DecodeLine | None:
    """The fields of a decode line (any layout 0.4.x .. 0.5.23), None when one is missing.

    Every decode line of a busy server comes through here, so it is a few `bytes.find` calls
    rather than a regex: the fields are `, key: value` pairs whose order varies by version.
    """
    raw = line.encode("utf-8", "replace") if isinstance(line, str) else line
    i = raw.find(_RUNNING)
    if i < 0:
        return None
    try:
        running_text = _field(raw, _RUNNING, i)
        gen_text = _field(raw, _GEN, i)
        if running_text is None or gen_text is None:
            return None
        running = int(running_text)
        gen = float(gen_text)
        tokens_text = _field(raw, _TOKEN, i)
        graph_at = raw.find(_GRAPH, i)
        accept_text = _field(raw, _ACCEPT, i) if _ACCEPT in raw else None
        return DecodeLine(
            running=running,
            tokens=int(tokens_text) if tokens_text is not None else None,
            graph=None if graph_at < 0 else raw.startswith(b"True", graph_at + len(_GRAPH)),
            gen=gen,
            accept_len=float(accept_text) if accept_text is not None else None,
        )
    except ValueError:
        return None


def dp_rank(line: bytes | str) -> int:
    """The DP rank of a prefixed line (0 without one): each DP group logs its own lines."""
    raw = line.encode("utf-8", "replace") if isinstance(line, str) else line
    if not raw.startswith(b"["):
        return 0
    end = raw.find(b"]")
    i = raw.find(b" DP", 0, end)
    if i < 0:
        return 0
    j = i + 3
    while j < end and 48 <= raw[j] <= 57:
        j += 1
    return int(raw[i + 3 : j]) if j > i + 3 else 0


def parse_capture_bs(text: str) -> tuple[int, ...]:
    """The captured batch sizes of `Capture cuda graph bs [1, 2, 4]` / `bs=[1, 2, 4]`."""
    start = text.find("[", text.find("bs"))
    end = text.find("]", start)
    if start < 0 or end < 0:
        return ()
    try:
        return tuple(sorted({int(p) for p in text[start + 1 : end].split(",") if p.strip()}))
    except ValueError:
        return ()


def graph_size(bs: int, captured: Sequence[int]) -> int | None:
    """The captured CUDA-graph batch size a batch of `bs` pads to; None above the largest."""
    for size in captured:
        if size >= bs:
            return size
    return None


def ctx_bucket(tokens_per_request: float) -> int:
    """Octave bucket of the context per request: k = floor(log2 ctx)."""
    return math.floor(math.log2(max(tokens_per_request, 1.0)))


def bucket_key(graph_bs: int, ctx: int | None) -> str:
    return f"bs{graph_bs}/ctx{'?' if ctx is None else 2**ctx}"


@dataclass(slots=True)
class _RankState:
    bs: int | None = None  # the previous decode line's #running-req; None before the first
    dirty: str | None = None  # why the interval since that line is not clean


@dataclass(slots=True)
class DecodeState:
    """Per-startup decode samples, built line by line; bounded and JSON-serialisable."""

    captured: tuple[int, ...] = ()
    ranks: dict[int, _RankState] = field(default_factory=dict)
    # bucket key -> samples [rate per request (tok/s), accept len (0: none), gen throughput,
    # padded batch size, context tokens per request]
    buckets: dict[str, list[list[float]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    # decode_line's memo: (`captured`, {#running-req * 64 + context octave (63: none) ->
    # (padded size, bucket key), ("": above the largest captured size)})
    _memo: tuple[Sequence[int], dict[int, tuple[float, str]]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def _count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def observe(
        self, rule_id: str, line: bytes | str, ts: float, ready_at: float | None, warmup: float
    ) -> None:
        """One line of an observed rule, in journal order (`ts` is read for decode lines only)."""
        if rule_id == DECODE_RULE:
            self._decode(line, ts, ready_at, warmup)
        elif rule_id == PREFILL_RULE:
            self._dirty(dp_rank(line), "prefill")
        elif rule_id == RETRACT_RULE:
            self._count("retractions")
            self._dirty(dp_rank(line), "retract")
        elif rule_id == OOM_RULE:
            self._count("oom_lines")
            self._dirty(dp_rank(line), "oom")
        elif rule_id in CAPTURE_BS_RULES:
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
            captured = parse_capture_bs(text)
            if captured:
                self.captured = captured

    def phase(self, rule_id: str, ts: float) -> None:
        """The first line of a startup-phase rule marks that phase."""
        mark = PHASE_RULES.get(rule_id)
        if mark is not None and mark not in self.phases:
            self.phases[mark] = ts

    def _dirty(self, rank: int, reason: str) -> None:
        state = self.ranks.get(rank)
        if state is not None and state.bs is not None and state.dirty is None:
            state.dirty = reason

    def prefill_line(self, raw: bytes, shape: bytes) -> None:
        """`observe` of a prefill line (`shape` as for `decode_line`): it dirties its DP rank's
        open interval."""
        lay = _LAYOUTS.get(shape)
        if lay is None:
            if len(_LAYOUTS) >= _MEMO_CAP:
                _LAYOUTS.clear()
            lay = _LAYOUTS[shape] = _layout(raw)
        rank_at = lay[3]
        state = self.ranks.get(int(raw[rank_at : lay[4]]) if rank_at else 0)
        if state is not None and state.bs is not None and state.dirty is None:
            state.dirty = "prefill"

    def _decode(self, line: bytes | str, ts: float, ready_at: float | None, warmup: float) -> None:
        raw = line.encode("utf-8", "replace") if isinstance(line, str) else line
        self.decode_line(raw, raw.translate(SHAPE_MASK), None, ready_at, warmup, ts)

    def decode_line(
        self,
        raw: bytes,
        shape: bytes,
        realtime_us: Callable[[], int] | None,
        ready_at: float | None,
        warmup: float,
        ts: float = 0.0,
    ) -> None:
        """One decode line, in journal order: what `observe` does with it.

        `shape` is `raw.translate(SHAPE_MASK)` (or any mask that maps every digit to one digit
        and leaves the rest alone): the feed has it already, as its matcher's memo key. The time is
        `realtime_us() / 1e6`, read only when the warm-up test needs it (`ts` without
        `realtime_us`).

        Nearly every line of a busy server comes here. Lines of one shape have their fields at
        the same offsets (and the same `cuda graph` flag, which is letters), so the offsets are
        found once per shape (`_layout`) and a line costs a few slices: #running-req, the DP
        rank, the interval's drop tests in `_drop_reason`'s order, and only for an interval
        that may be clean the other fields. Counters are bumped in place: `counts` keeps its
        key order (the order in which each count first happened), which is serialised.
        """
        lay = _LAYOUTS.get(shape)
        if lay is None:
            if len(_LAYOUTS) >= _MEMO_CAP:
                _LAYOUTS.clear()
            lay = _LAYOUTS[shape] = _layout(raw)
        rs, re_, graph, rank_at, rank_end, fields = lay
        try:
            running = int(raw[rs:re_])
        except ValueError:
            return  # no #running-req field (an empty slice), or not a number
        counts = self.counts
        try:
            counts["decode_lines"] += 1
        except KeyError:
            counts["decode_lines"] = 1
        if graph is False:
            try:
                counts["graph_off_lines"] += 1
            except KeyError:
                counts["graph_off_lines"] = 1
        rank = int(raw[rank_at:rank_end]) if rank_at else 0
        ranks = self.ranks
        state = ranks.get(rank)
        if state is None:
            state = ranks[rank] = _RankState()
        prev_bs = state.bs
        dirty = state.dirty
        state.bs = running
        state.dirty = None
        # _drop_reason, inline (same tests, same order).
        if prev_bs is None:
            name = "dropped_first"  # its timer started at scheduler init
        elif dirty is not None:
            # prefill (or idle, which always ends in a prefill), retraction, OOM
            name = _DROPPED.get(dirty) or "dropped_" + dirty
        elif graph is False:
            name = "dropped_no_graph"
        elif ready_at is None or (
            (realtime_us() / 1e6 if realtime_us is not None else ts) < ready_at + warmup
        ):
            name = "dropped_warmup"
        elif running <= 0:
            name = "dropped_idle"
        elif (
            (drift if (drift := running - prev_bs) >= 0 else -drift)  # abs(), without the call
            > (bound if (bound := 0.25 * running) > 1.0 else 1.0)  # max(1.0, ...)
        ):
            name = "dropped_batch_drift"
        else:
            name = ""
        if name:
            try:
                counts[name] += 1
            except KeyError:
                counts[name] = 1
            return
        # parse_decode_line's other fields and _sane's bounds, for this line only.
        gen_at, gen_end, tokens_at, tokens_end, accept_at, accept_end = fields
        try:
            if gen_at < 0:
                raise ValueError
            gen = float(raw[gen_at:gen_end])
            tokens = int(raw[tokens_at:tokens_end]) if tokens_at >= 0 else None
            accept = float(raw[accept_at:accept_end]) if accept_at >= 0 else 0.0
        except ValueError:
            ok = False
        else:
            ok = (
                0 < gen < 1e9
                and running < 1e7  # and > 0: not idle
                and (tokens is None or 0 <= tokens < 1e13)
                and 0 <= accept < 1e3
            )
        if not ok:
            try:
                counts["dropped_invalid"] += 1
            except KeyError:
                counts["dropped_invalid"] = 1
            return
        # The bucket: the captured size the batch pads to and the context octave, memoised per
        # capture list (the same few keys come back line after line).
        if tokens is not None:
            per_request = tokens / running
            octave = floor(log2(1.0 if per_request < 1.0 else per_request))  # ctx_bucket
            ctx: int | None = octave
            slot = running * 64 + octave  # octave <= log2(1e13) < 63
        else:
            per_request = 0.0
            ctx = None
            slot = running * 64 + 63
        memo = self._memo
        if memo is None or memo[0] is not self.captured:
            memo = self._memo = (self.captured, {})
        slots = memo[1]
        bucket = slots.get(slot)
        if bucket is None:
            if len(slots) >= _MEMO_CAP:
                slots.clear()
            graph_bs = graph_size(running, self.captured or DEFAULT_CAPTURE_BS)
            bucket = slots[slot] = (
                (float(graph_bs), bucket_key(graph_bs, ctx)) if graph_bs is not None else (0.0, "")
            )
        padded, key = bucket
        if not key:
            self._count("dropped_over_ceiling")
            return
        assert prev_bs is not None  # the first line was dropped
        buckets = self.buckets
        samples = buckets.get(key)
        if samples is None:
            if len(buckets) >= MAX_BUCKETS:
                self._count("dropped_bucket_cap")
                return
            samples = buckets[key] = []
        samples.append(
            [
                _round3(2 * gen / (prev_bs + running)),  # per-request rate over the mean batch
                accept or 0.0,
                gen,
                padded,
                _round3(per_request) if tokens is not None else 0.0,
            ]
        )
        if len(samples) > MAX_SAMPLES_PER_BUCKET:
            del samples[0]
        try:
            counts["clean"] += 1
        except KeyError:
            counts["clean"] = 1

    # -- persistence ------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """What the startup record keeps: enough to be a baseline after a daemon restart."""
        return {
            "captured": list(self.captured),
            "buckets": {k: [list(s) for s in v] for k, v in self.buckets.items()},
            "counts": dict(self.counts),
            "phases": dict(self.phases),
        }

    def to_dict(self) -> dict[str, Any]:
        data = self.summary()
        data["ranks"] = {str(r): [s.bs, s.dirty] for r, s in self.ranks.items()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> DecodeState:
        if not data:
            return cls()
        return cls(
            captured=tuple(int(x) for x in data.get("captured", ())),
            ranks={int(r): _RankState(v[0], v[1]) for r, v in data.get("ranks", {}).items()},
            buckets={k: [list(s) for s in v] for k, v in data.get("buckets", {}).items()},
            counts=dict(data.get("counts", {})),
            phases=dict(data.get("phases", {})),
        )


# A decode line's offsets, found once per line shape (see `DecodeState.decode_line`):
# #running-req value (start, end), cuda graph flag (None: no field), DP rank digits (start,
# end; 0, 0 without a rank), and (start, end) of gen throughput, #token and accept len
# (start -1: no such field).
_Layout = tuple[int, int, bool | None, int, int, tuple[int, int, int, int, int, int]]
# The shape of a line: every digit masked as "0" (the matcher's memo key, MASK_DIGITS).
SHAPE_MASK: Final = bytes.maketrans(b"0123456789", b"0000000000")
# shape -> layout; bounded by _MEMO_CAP.
_LAYOUTS: dict[bytes, _Layout] = {}


def _value_at(raw: bytes, key: bytes, start: int) -> tuple[int, int]:
    """(start, end) of `_field(raw, key, start)`, (-1, -1) without it."""
    i = raw.find(key, start)
    if i < 0:
        return -1, -1
    i += len(key)
    j = raw.find(b",", i)
    return i, j if j >= 0 else len(raw)


def _layout(raw: bytes) -> _Layout:
    """The offsets of a decode line's fields, as `_decode`/`parse_decode_line`/`dp_rank`
    find them; the same for every line of its shape (no key searched for has a digit)."""
    rank_at = rank_end = 0
    if raw.startswith(b"["):
        end = raw.find(b"]")
        r = raw.find(b" DP", 0, end)
        if r >= 0:
            e = r + 3
            while e < end and 48 <= raw[e] <= 57:
                e += 1
            if e > r + 3:
                rank_at, rank_end = r + 3, e
    i = raw.find(_RUNNING)
    if i < 0:  # not a decode line: its empty #running-req slice is not a number
        return 0, 0, None, rank_at, rank_end, (-1, -1, -1, -1, -1, -1)
    rs, re_ = _value_at(raw, _RUNNING, i)
    g = raw.find(_GRAPH, rs)
    graph = None if g < 0 else raw.startswith(b"True", g + _GRAPH_LEN)
    return (
        rs,
        re_,
        graph,
        rank_at,
        rank_end,
        (*_value_at(raw, _GEN, i), *_value_at(raw, _TOKEN, i), *_value_at(raw, _ACCEPT, i)),
    )


# The count of each dirty interval's reason (a reason restored from an older state may not be here).
_DROPPED: Final[Mapping[str, str]] = {r: "dropped_" + r for r in ("prefill", "retract", "oom")}


def _round3(x: float) -> float:
    """`round(x, 3)` (the samples' three decimals), without its decimal conversion for the
    values samples have.

    For 0 < y = x * 1000 < 2**31 the product is within 2**-23 of the exact one, so unless its
    fraction is that close to one half, the exact value rounds to the integer y rounds to, n;
    and n / 1000 (one correctly rounded division) is the float nearest to n * 10**-3, which is
    what `round` returns. Anything else goes to `round`.
    """
    y = x * 1000.0
    if 0.0 < y < 2147483648.0:
        n = int(y)
        f = y - n
        if f < 0.4999995:
            return n / 1000.0
        if f > 0.5000005:
            return (n + 1) / 1000.0
    return round(x, 3)


# -- statistics ---------------------------------------------------------------------------------


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
