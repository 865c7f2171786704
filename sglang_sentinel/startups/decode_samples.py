"""Decode throughput at like load: clean decode intervals, like-for-like buckets, a rank test.

SGLang prints a `Decode batch` line every `--decode-log-interval` (40) decode steps; its
`gen throughput` is the tokens decoded since the previous decode line over the wall time since
it (`report_decode_stats`), so anything else the scheduler did in between (prefill, idle,
retraction) sits in the denominator, and `#running-req` / `#token` / `cuda graph` describe only
the last step. `DecodeState` keeps, per startup, only the intervals that measure decoding alone
(docs/decode-throughput.md defends each filter) as bounded per-bucket samples;
compare/decode_stats.py compares two startups' samples bucket by bucket.

Pure Python on purpose (no numpy/scipy): a few hundred samples per startup at most.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from math import floor, log2
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
            # abs(drift) > max(1.0, 0.25 * running), in ints: exact for any int, compiled too
            # (mypyc converts an int compared with a float, and a huge one overflows)
            4 * (drift if (drift := running - prev_bs) >= 0 else -drift)  # abs(), without the call
            > (running if running > 4 else 4)
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
            # The int bounds are ints: compiled (mypyc), an int compared with a float is
            # converted first, and a 400-digit #token would raise OverflowError.
            ok = (
                0 < gen < 1e9
                and running < 10_000_000  # and > 0: not idle
                and (tokens is None or 0 <= tokens < 10_000_000_000_000)
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
        """What the startup record keeps: enough to be a baseline after a daemon restart.

        The samples themselves are shared, not copied: one is never changed once appended
        (a bucket drops its oldest instead), and a copy per snapshot doubled what a held
        startup's samples take."""
        return {
            "captured": list(self.captured),
            "buckets": {k: list(v) for k, v in self.buckets.items()},
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
