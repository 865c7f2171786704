"""The decode state's fast per-line path (`DecodeState.decode_line` / `prefill_line`, per-shape
field offsets) gives exactly what the line-by-line implementation it replaced gave: the same
`summary()` / `to_dict()`, key order included (they are serialised), for any sequence of decode,
prefill, retraction, OOM and capture lines of every layout, with and without DP ranks, garbage
numbers, missing fields and timestamps going backwards.

The oracle below is that implementation, kept verbatim (`_decode`, `_drop_reason`, `_sane`,
`parse_decode_line`, `dp_rank` as they were before the fast path)."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_sentinel.model import JournalEntry
from sglang_sentinel.rules import MemoMatcher, default_rules_dir, load_rules
from sglang_sentinel.startups import StartupTracker
from sglang_sentinel.startups import decode_samples as decode
from sglang_sentinel.startups.decode_samples import (
    DEFAULT_CAPTURE_BS,
    MAX_BUCKETS,
    MAX_SAMPLES_PER_BUCKET,
    SHAPE_MASK,
    DecodeState,
    _RankState,
    _round3,
    bucket_key,
    ctx_bucket,
    graph_size,
)

# -- the oracle: the implementation before the fast path ------------------------------------------

_RUNNING = b"#running-req: "
_TOKEN = b"token: "
_GRAPH = b" graph: "
_GEN = b"gen throughput (token/s): "
_ACCEPT = b"accept len: "


@dataclass(frozen=True, slots=True)
class _OldLine:
    running: int
    tokens: int | None
    graph: bool | None
    gen: float
    accept_len: float | None


def _old_field(raw: bytes, key: bytes, start: int) -> bytes | None:
    i = raw.find(key, start)
    if i < 0:
        return None
    i += len(key)
    j = raw.find(b",", i)
    return raw[i:j] if j >= 0 else raw[i:]


def _old_parse(raw: bytes) -> _OldLine | None:
    i = raw.find(_RUNNING)
    if i < 0:
        return None
    try:
        running_text = _old_field(raw, _RUNNING, i)
        gen_text = _old_field(raw, _GEN, i)
        if running_text is None or gen_text is None:
            return None
        running = int(running_text)
        gen = float(gen_text)
        tokens_text = _old_field(raw, _TOKEN, i)
        graph_at = raw.find(_GRAPH, i)
        accept_text = _old_field(raw, _ACCEPT, i) if _ACCEPT in raw else None
        return _OldLine(
            running=running,
            tokens=int(tokens_text) if tokens_text is not None else None,
            graph=None if graph_at < 0 else raw.startswith(b"True", graph_at + len(_GRAPH)),
            gen=gen,
            accept_len=float(accept_text) if accept_text is not None else None,
        )
    except ValueError:
        return None


def _old_dp_rank(raw: bytes) -> int:
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


def _old_drop_reason(
    running: int,
    graph: bool | None,
    prev_bs: int | None,
    dirty: str | None,
    ts: float,
    ready_at: float | None,
    warmup: float,
) -> str | None:
    if prev_bs is None:
        return "first"
    if dirty is not None:
        return dirty
    if graph is False:
        return "no_graph"
    if ready_at is None or ts < ready_at + warmup:
        return "warmup"
    if running <= 0:
        return "idle"
    if abs(running - prev_bs) > max(1.0, 0.25 * running):
        return "batch_drift"
    return None


def _old_sane(line: _OldLine) -> bool:
    return (
        0 < line.gen < 1e9
        and 0 < line.running < 1e7
        and (line.tokens is None or 0 <= line.tokens < 1e13)
        and (line.accept_len is None or 0 <= line.accept_len < 1e3)
    )


def _old_count(state: DecodeState, name: str) -> None:
    state.counts[name] = state.counts.get(name, 0) + 1


def _old_decode(
    state: DecodeState, raw: bytes, ts: float, ready_at: float | None, warmup: float
) -> None:
    i = raw.find(_RUNNING)
    if i < 0:
        return
    i += len(_RUNNING)
    j = raw.find(b",", i)
    try:
        running = int(raw[i:j] if j >= 0 else raw[i:])
    except ValueError:
        return
    g = raw.find(_GRAPH, i)
    graph = None if g < 0 else raw.startswith(b"True", g + len(_GRAPH))
    counts = state.counts
    counts["decode_lines"] = counts.get("decode_lines", 0) + 1
    if graph is False:
        counts["graph_off_lines"] = counts.get("graph_off_lines", 0) + 1
    rank = _old_dp_rank(raw)
    rs = state.ranks.get(rank)
    if rs is None:
        rs = state.ranks[rank] = _RankState()
    prev_bs, dirty = rs.bs, rs.dirty
    rs.bs, rs.dirty = running, None
    reason = _old_drop_reason(running, graph, prev_bs, dirty, ts, ready_at, warmup)
    parsed = None
    if reason is None:
        parsed = _old_parse(raw)
        if parsed is None or not _old_sane(parsed):
            reason = "invalid"
    if reason is not None:
        name = "dropped_" + reason
        counts[name] = counts.get(name, 0) + 1
        return
    assert prev_bs is not None and parsed is not None
    graph_bs = graph_size(running, state.captured or DEFAULT_CAPTURE_BS)
    if graph_bs is None:
        _old_count(state, "dropped_over_ceiling")
        return
    tokens = parsed.tokens
    ctx = ctx_bucket(tokens / running) if tokens is not None else None
    key = bucket_key(graph_bs, ctx)
    samples = state.buckets.get(key)
    if samples is None:
        if len(state.buckets) >= MAX_BUCKETS:
            _old_count(state, "dropped_bucket_cap")
            return
        samples = state.buckets[key] = []
    gen = parsed.gen
    samples.append(
        [
            round(2 * gen / (prev_bs + running), 3),
            parsed.accept_len or 0.0,
            gen,
            float(graph_bs),
            round(tokens / running, 3) if tokens is not None else 0.0,
        ]
    )
    if len(samples) > MAX_SAMPLES_PER_BUCKET:
        del samples[0]
    counts["clean"] = counts.get("clean", 0) + 1


def _old_observe(
    state: DecodeState, rule_id: str, raw: bytes, ts: float, ready_at: float | None, warmup: float
) -> None:
    if rule_id == "decode_batch":
        _old_decode(state, raw, ts, ready_at, warmup)
    elif rule_id == "prefill_batch":
        state._dirty(_old_dp_rank(raw), "prefill")
    else:  # retraction, OOM and capture lines: unchanged by the fast path
        state.observe(rule_id, raw, ts, ready_at, warmup)


# -- generated lines ------------------------------------------------------------------------------

PREFIXES = [
    "",
    "[2026-03-09 21:41:22 TP0] ",
    "[2026-03-09 21:41:22.123 TP0] ",
    "[2026-03-09 21:41:22 DP0 TP0] ",
    "[2026-03-09 21:41:22 DP1 TP0] ",
    "[2026-03-09 21:41:22 DP12 TP3 EP3] ",
    "[2026-03-09 21:41:22 DP1 PP0 TP0] ",
    "[2026-03-09 21:41:22 DP TP0] ",  # no digits after DP
    "[2026-03-09 21:41:22 DPx TP0] ",
    "[2026-03-09 21:41:22 DP3 TP0 ",  # no closing bracket
    "2026-03-09 21:41:22 DP3 TP0] ",  # no opening bracket
    "[2026-03-09 21:41:22 TP0] [ DP5] ",
    "[Gloo] ",
]
NUMBERS = st.one_of(
    st.integers(-5, 300).map(str),
    st.integers(0, 10**15).map(str),
    st.sampled_from(["", "abc", " 7", "1_0", "+3", "-0", "0x10", "9" * 30, "9" * 5000, "٣"]),
)
FLOATS = st.one_of(
    st.floats(0, 1e5, allow_nan=False).map(lambda x: f"{x:.2f}"),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "inf", "nan", "-1.00", "1e400", "0.00", "1_000.5", "abc", "2.5e3"]),
)
# A decode line's layout: its fields in order, with {r} (#running-req), {t} (#token), {a}
# (accept len) and {g} (gen throughput) for the numbers of each line.
TOKEN_FIELDS = st.sampled_from(
    [
        "",
        "#token: {t}, token usage: 0.08, ",
        "#full token: {t}, full token usage: 0.59, mamba num: 52, mamba usage: 0.60, ",
        "#full token: {t}, full token usage: 0.5, #swa token: 77, swa token usage: 0.4, ",
        "#token: {t}",  # no comma after it
    ]
)
ACCEPT_FIELDS = st.sampled_from(
    [
        "",
        "",
        "accept len: {a}, accept rate: 0.68, ",
        "accept len: {a}, accept rate: 0.68, cap len: 4, block accept len: 2.1, ",
    ]
)
GRAPH_FIELDS = st.sampled_from(
    [
        "cuda graph: True, ",
        "cuda graph: True, ",
        "cuda graph: False, ",
        "cpu graph: False, ",
        "cpu graph: True, ",
        "",
    ]
)
TAILS = st.sampled_from(
    [
        ", #queue-req: 0",
        ", #queue-req: 0, ",
        "",
        ", #queue-req: 2, est. decode TFLOPS/s (per GPU): 12.5, est. read BW (GB/s per GPU): 900.1",
    ]
)


@st.composite
def layouts(draw: st.DrawFn) -> str:
    """One decode line layout (0.4.x .. 0.5.23 and broken ones)."""
    prefix: str = draw(st.sampled_from(PREFIXES))
    head: str = draw(st.sampled_from(["Decode batch. ", "Decode batch, ", "Decode batch [12], "]))
    fields = ["#running-req: {r}, " if draw(st.integers(0, 20)) else ""]
    fields.append(draw(TOKEN_FIELDS))
    fields.append(draw(ACCEPT_FIELDS))
    if draw(st.booleans()):
        fields.append("#pending-req: 1, ")  # PD-decode fields before the graph flag
    fields.append(draw(GRAPH_FIELDS))
    fields.append("gen throughput (token/s): {g}" if draw(st.integers(0, 20)) else "")
    fields.append(draw(TAILS))
    if draw(st.integers(0, 10)) == 0:
        draw(st.randoms()).shuffle(fields)
    line = prefix + head + "".join(fields)
    if draw(st.integers(0, 15)) == 0:
        line += draw(st.text(max_size=8)).replace("{", "").replace("}", "")
    return line


# Mostly plausible numbers (batches close to each other, so that clean intervals happen), now
# and then garbage.
RUNNING = st.one_of(
    st.integers(6, 12).map(str),
    st.integers(6, 12).map(str),
    st.integers(10**7 - 2, 10**7 + 2).map(str),
    NUMBERS,
)
TOKENS = st.one_of(st.integers(0, 2_000_000).map(str), NUMBERS)
GEN = st.one_of(st.floats(0.5, 5000).map(lambda x: f"{x:.2f}"), FLOATS)
ACCEPT = st.one_of(st.floats(0, 8).map(lambda x: f"{x:.2f}"), FLOATS)


@st.composite
def decode_events(draw: st.DrawFn, layout_list: list[str]) -> tuple[str, bytes]:
    layout: str = draw(st.sampled_from(layout_list))
    line = layout.format(r=draw(RUNNING), t=draw(TOKENS), a=draw(ACCEPT), g=draw(GEN))
    return "decode_batch", line.encode("utf-8", "surrogatepass")


PREFILL = st.builds(
    lambda prefix, n: (
        f"{prefix}Prefill batch, #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.02, "
        f"#running-req: {n}, #queue-req: 1, input throughput (token/s): 6480.12, cuda graph: True"
    ).encode(),
    st.sampled_from(PREFIXES),
    NUMBERS,
)
RETRACT = st.sampled_from(PREFIXES).map(
    lambda p: (
        f"{p}KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_tokens_gained: 900"
    ).encode()
)
OOM = st.sampled_from(PREFIXES).map(
    lambda p: f"{p}Decode out of memory. Try to lower your batch size.".encode()
)
CAPTURE = st.one_of(
    st.lists(st.integers(1, 64), min_size=1, max_size=12).map(
        lambda bs: f"Capture cuda graph bs {bs}".encode()
    ),
    st.just(b"Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]"),
    st.just(b"Capture cuda graph bs [garbage]"),
)


OTHERS = st.one_of(
    st.tuples(st.just("prefill_batch"), PREFILL),
    st.tuples(st.just("kv_pool_retract"), RETRACT),
    st.tuples(st.just("runtime_out_of_memory"), OOM),
    st.tuples(st.just("cuda_graph_capture_bs"), CAPTURE),
    st.tuples(st.just("restore"), st.just(b"")),
)


@st.composite
def scenarios(draw: st.DrawFn) -> list[tuple[str, bytes]]:
    """A startup's observed lines: a few decode layouts, mostly decode lines, the others now and
    then, and a to_dict/from_dict round trip ("restore") in the middle."""
    layout_list = draw(st.lists(layouts(), min_size=1, max_size=3))
    events: list[tuple[str, bytes]] = []
    for _ in range(draw(st.integers(0, 150))):
        if draw(st.integers(0, 9)):
            events.append(draw(decode_events(layout_list)))
        else:
            events.append(draw(OTHERS))
    return events


# Time steps in µs: mostly forward, sometimes a clock step back.
STEPS = st.lists(
    st.one_of(st.integers(0, 5_000_000), st.integers(-400_000_000, 200_000_000)),
    min_size=1,
    max_size=150,
)


def _dump(state: DecodeState) -> tuple[str, str]:
    return json.dumps(state.summary()), json.dumps(state.to_dict())


@pytest.mark.heavy
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    events=scenarios(),
    steps=STEPS,
    ready=st.one_of(st.none(), st.integers(-2_000_000, 2_000_000), st.integers(-2_000_000, 0)),
    ready_after=st.one_of(st.just(0), st.integers(0, 30)),
    warmup=st.sampled_from([0.0, 0.0, 300.0, 1.5]),
)
def test_fast_path_equals_the_old_implementation(
    events: list[tuple[str, bytes]],
    steps: list[int],
    ready: int | None,
    ready_after: int,
    warmup: float,
) -> None:
    old, fast = DecodeState(), DecodeState()
    # `observe` (tests, the bench, the entry path), half the lines as str, against the oracle
    # fed what observe reads of them
    old_text, slow = DecodeState(), DecodeState()
    now = 1_000_000_000_000_000  # µs
    for n, (rule, raw) in enumerate(events):
        now += steps[n % len(steps)]
        ts = now / 1e6
        ready_at = ready / 1e3 + 1_000_000_000 if ready is not None and n >= ready_after else None
        if rule == "restore":
            old, fast, old_text, slow = (
                DecodeState.from_dict(json.loads(json.dumps(s.to_dict())))
                for s in (old, fast, old_text, slow)
            )
            continue
        _old_observe(old, rule, raw, ts, ready_at, warmup)
        # the feed's entry points, the time read through a callable as the feed does
        shape = raw.translate(SHAPE_MASK)
        if rule == "decode_batch":
            fast.decode_line(raw, shape, functools.partial(int, now), ready_at, warmup)
        elif rule == "prefill_batch":
            fast.prefill_line(raw, shape)
        else:
            fast.observe(rule, raw, ts, ready_at, warmup)
        assert _dump(fast) == _dump(old), (rule, raw)
        text = raw.decode("utf-8", "replace")
        line: bytes | str = text if n % 2 else raw
        _old_observe(old_text, rule, text.encode() if n % 2 else raw, ts, ready_at, warmup)
        slow.observe(rule, line, ts, ready_at, warmup)
    assert _dump(fast) == _dump(old)
    assert _dump(slow) == _dump(old_text)


def test_bucket_cap_and_ceiling_like_the_old_implementation() -> None:
    """More (padded size, context) buckets than MAX_BUCKETS, batches above the largest
    captured size, and a capture list that changes in the middle."""
    old, new = DecodeState(), DecodeState()
    ts = 5000.0
    for capture in (
        b"Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]",
        b"Capture cuda graph bs [2, 3]",
    ):
        for state in (old, new):
            state.observe("cuda_graph_capture_bs", capture, 0.0, None, 0.0)
        for bs in range(1, 40):
            for octave in range(0, 20, 3):
                raw = (
                    f"[2026-03-09 21:41:22 TP0] Decode batch, #running-req: {bs}, "
                    f"#token: {bs * 2**octave}, cuda graph: True, gen throughput (token/s): "
                    f"{100 + bs + octave / 7:.2f}"
                ).encode()
                for _ in range(2):
                    ts += 1.0
                    _old_observe(old, "decode_batch", raw, ts, 1000.0, 300.0)
                    new.decode_line(raw, raw.translate(SHAPE_MASK), None, 1000.0, 300.0, ts)
    assert _dump(new) == _dump(old)
    assert len(new.buckets) == MAX_BUCKETS
    assert {"dropped_bucket_cap", "dropped_over_ceiling", "clean"} <= set(new.counts)


def test_str_lines_through_observe_equal_the_old_implementation() -> None:
    old, new = DecodeState(), DecodeState()
    line = "[2026-03-09 21:41:22 DP2 TP0] Decode batch, #running-req: 8, #token: 16000, cuda graph: True, gen throughput (token/s): 410.00"
    for i in range(5):
        _old_observe(old, "decode_batch", line.encode(), 2000.0 + i, 1000.0, 300.0)
        new.observe("decode_batch", line, 2000.0 + i, 1000.0, 300.0)
    assert _dump(new) == _dump(old)
    assert new.counts == {"decode_lines": 5, "dropped_first": 1, "clean": 4}


def test_the_warm_up_time_is_read_only_when_the_test_needs_it() -> None:
    """A decode line whose interval is already dropped (first line, prefill inside, graph off)
    does not read the entry's time; the others read it once."""
    reads: list[int] = []

    def realtime_us() -> int:
        reads.append(1)
        return 2_000_000_000

    state = DecodeState()
    line = b"[2026-03-09 21:41:22 TP0] Decode batch, #running-req: 8, #token: 16000, cuda graph: True, gen throughput (token/s): 410.00"
    shape = line.translate(SHAPE_MASK)
    state.decode_line(line, shape, realtime_us, 1000.0, 300.0)  # first
    assert reads == []
    state.decode_line(line, shape, realtime_us, 1000.0, 300.0)  # clean
    assert reads == [1]
    prefill = b"[2026-03-09 21:41:22 TP0] Prefill batch, #running-req: 8"
    state.prefill_line(prefill, prefill.translate(SHAPE_MASK))
    state.decode_line(line, shape, realtime_us, 1000.0, 300.0)  # prefill inside
    assert reads == [1]
    assert state.counts == {"decode_lines": 3, "dropped_first": 1, "clean": 1, "dropped_prefill": 1}


@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(
        st.floats(0, 1e7),
        st.integers(0, 10**10).map(lambda n: n / 1000 + 0.0005),
        st.integers(0, 10**10).map(lambda n: n / 1000 - 0.0005),
        st.tuples(st.floats(0.01, 1e5), st.integers(1, 2000)).map(lambda t: 2 * t[0] / t[1]),
        st.floats(allow_nan=False),
    )
)
def test_round3_is_round(x: float) -> None:
    r = _round3(x)
    assert r == round(x, 3) and math.copysign(1, r) == math.copysign(1, round(x, 3))


def test_the_feed_passes_shapes_decode_line_can_read() -> None:
    """decode_line takes the feed's rule-memo key as the line's shape: that key must mask every
    digit as one digit and leave every other byte alone (as SHAPE_MASK does)."""
    known = MemoMatcher(load_rules([default_rules_dir()])).known()
    assert known is not None
    mask = known[1]
    digits = {mask[c] for c in b"0123456789"}
    assert len(digits) == 1 and digits <= set(b"0123456789")
    assert all(mask[c] == c for c in range(256) if c not in b"0123456789")


def test_tracker_feed_equals_observe_per_line() -> None:
    """Through StartupTracker.feed (the fast path) and through the old per-line path, a
    startup's decode summary is the same."""
    rules = load_rules([default_rules_dir()])
    unit = "sglang-decodefast-test.service"

    lines = [
        "[2026-03-09 21:41:20 TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32]",
        "[2026-03-09 21:41:21] The server is fired up and ready to roll!",
    ]
    for i in range(300):
        bs = 8 + (i // 7) % 3
        if i % 11 == 5:
            lines.append(
                "[2026-03-09 21:41:22 TP0] Prefill batch, #new-seq: 1, #new-token: 8192, "
                f"#cached-token: 0, token usage: 0.02, #running-req: {bs}, #queue-req: 1, "
                "input throughput (token/s): 6480.12, cuda graph: True"
            )
        lines.append(
            f"[2026-03-09 21:41:22 TP0] Decode batch, #running-req: {bs}, #token: {bs * 1900 + i}, "
            f"token usage: 0.10, cuda graph: {'False' if i % 37 == 3 else 'True'}, "
            f"gen throughput (token/s): {400 + i % 13}.{i % 100:02d}, #queue-req: 0"
        )
    # two seconds apart, a clock step back now and then
    times = [
        1_773_100_000_000_000 + k * 2_000_000 - (k % 50 == 7) * 700_000_000
        for k in range(len(lines))
    ]
    tracker = StartupTracker(MemoMatcher(rules))
    now = {"t": times[0]}
    first = JournalEntry(unit, lines[0], times[0], invocation_id="a" * 32)

    def items() -> Iterator[JournalEntry | bytes]:
        yield first
        for line, t in zip(lines[1:], times[1:], strict=True):
            now["t"] = t
            yield line.encode()

    tracker.feed(items(), lambda: now["t"])
    record = tracker.current(unit)
    assert record is not None
    builder = tracker._builders["a" * 32]
    ready_at = builder.ready_at
    assert ready_at is not None
    oracle = DecodeState()
    for line, t in zip(lines, times, strict=True):
        rule = (
            "decode_batch"
            if "Decode batch" in line
            else "prefill_batch"
            if "Prefill batch" in line
            else "cuda_graph_capture_bs"
            if "Capture" in line
            else None
        )
        if rule is not None:
            warmup = tracker.decode_warmup_seconds
            _old_observe(oracle, rule, line.encode(), t / 1e6, ready_at, warmup)
    oracle.phase("server_ready", ready_at)  # the tracker's phase marks, not decode lines
    assert builder.decode.counts.get("clean", 0) > 0
    assert _dump(builder.decode) == _dump(oracle)


def test_layout_memo_is_bounded() -> None:
    decode._LAYOUTS.clear()
    state = DecodeState()
    for n in range(decode._MEMO_CAP + 10):
        line = (
            f"Decode batch, #running-req: 8, {'x' * (n % 5000)}{n}, gen throughput (token/s): 1.00"
        )
        raw = line.encode()
        state.decode_line(raw, raw.translate(SHAPE_MASK), None, None, 300.0)
    assert len(decode._LAYOUTS) <= decode._MEMO_CAP
    assert state.counts["decode_lines"] == decode._MEMO_CAP + 10
