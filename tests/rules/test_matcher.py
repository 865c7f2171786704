"""The matcher seam: MemoMatcher (the per-line hot path on raw bytes, memoised) gives exactly
what ExactMatcher (the definition: match(clean_message(raw))) gives, and a tracker fed through
either ends with the same records, hit counts and runtime values."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_sentinel.model import JournalEntry, RuleMatch, SourceItem
from sglang_sentinel.rules import BatchMatch, MemoMatcher, RuleSet, default_rules_dir, load_rules
from sglang_sentinel.rules.matcher import ExactMatcher
from sglang_sentinel.rules.regex import RuleRegex
from sglang_sentinel.rules.ruleset import FactSpec, Rule
from sglang_sentinel.rules.shapes import digit_blind, split_prefix
from sglang_sentinel.startups import StartupTracker
from sglang_sentinel.text import clean_message

PACK = load_rules([default_rules_dir()])
MEMO = MemoMatcher(PACK)
EXACT = ExactMatcher(PACK)
LITERALS = sorted({rule.contains for rule in PACK.rules})
SAMPLE_LINES = sorted({s.line for rule in PACK.rules for s in rule.samples})
PREFIXES = [
    "",
    "[2026-03-09 21:34:27 TP0] ",
    "[2026-03-09 21:34:27 DP1 PP0 TP3 EP3] ",
    "[2026-03-09 21:31:15.123 TP2 EP2] ",
    "[2026-03-09 21:31:11] ",
    "[2026-3-09 21:31:11] ",  # same digit-free shape, not a prefix
    "[2026-03-09 21:31:11 TP] ",
    "[23:17:01 TP7] ",  # 0.3.x: no date
    "[23:17:01] ",
    "[2026-03-09 21:31:09] WARNING server_args.py:2326: ",
    "[Gloo] ",
    # other tools' wrappers before the SGLang line (docs/architecture.md, "Wrappers")
    "2026-09-23T08:24:42.655136271Z [2026-03-09 21:34:27 TP0] ",
    "2026-09-23T08:24:42Z stdout F [2026-03-09 21:34:27 DP1 TP3] ",
    "(SGLangEngine pid=206831) [2026-03-09 21:31:11] ",
    "(SGLangEngine pid=206831) ",
    "sglang-1  | [2026-03-09 21:31:11] WARNING server_args.py:2326: ",
    "2025-03-07 23:50:27,531 - __main__ - INFO - [2026-3-09 21:31:11] ",
    "2026-09-23 08:24:42 2026-09-23T08:24:42Z (Name pid=1) (Name pid=2) [2026-03-09 21:31:11] ",
    "2026-09-23T08:24:42Z ",
]
FRAGMENTS = st.one_of(
    st.sampled_from(LITERALS),
    st.sampled_from(SAMPLE_LINES).map(lambda line: split_prefix(line)[0]),
    st.sampled_from(["0", "12.5", "9" * 5000, ", ", " GB", "\x1b[0m", "\r", "\n", "#", ": "]),
    st.text(max_size=40),
)
LINES = st.builds(
    lambda prefix, parts, tail: (prefix + "".join(parts)).encode("utf-8", "surrogatepass") + tail,
    st.sampled_from(PREFIXES),
    st.lists(FRAGMENTS, max_size=6),
    st.sampled_from([b"", b"\xff", b"\xc3", b"\n", b"\r"]),
)


def as_facts(raw: bytes, result: list[RuleMatch] | BatchMatch) -> list:  # type: ignore[type-arg]
    if isinstance(result, BatchMatch):
        facts = result.rule.facts_of_raw(raw)
        assert facts is not None and set(facts) == result.facts  # converts, to the facts said
        return [(result.rule.id, facts)]
    return [(m.rule_id, dict(m.facts)) for m in result]


def expected(raw: bytes) -> list:  # type: ignore[type-arg]
    exact = EXACT.match_line(raw)
    assert not isinstance(exact, BatchMatch)
    assert exact == PACK.match(clean_message(raw))  # the definition
    return [(m.rule_id, dict(m.facts)) for m in exact]


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=400)
@given(LINES)
def test_the_memo_matcher_answers_as_the_exact_matcher(raw: bytes) -> None:
    assert as_facts(raw, MEMO.match_line(raw)) == expected(raw)
    assert MEMO.match(clean_message(raw)) == EXACT.match(clean_message(raw))


def test_lines_of_one_shape_are_each_judged_on_their_own() -> None:
    """The per-shape memo never carries one line's verdict over to another of the same shape."""
    base = "Decode batch, #running-req: 3, #token: 41, token usage: 0.01, cuda graph: True, "
    lines = [
        f"[2026-03-09 21:34:27 TP0] {base}gen throughput (token/s): 35.47, #queue-req: 0",
        f"[2026-03-09 21:34:27 TP1] {base}gen throughput (token/s): 35.47, #queue-req: 0",
        f"[2026-3-09 21:34:27 TP0] {base}gen throughput (token/s): 35.47, #queue-req: 0",
        f"[2026-03-09 21:34:27 TP0] {base}gen throughput (token/s): 35.47, #queue-req: 9"
        + "9" * 5000,
        f"[2026-03-09 21:34:27 TP0] {base}gen throughput (token/s): 35.47, #queue-req: 0\x1b[0m",
    ]
    for _ in range(2):  # the second round is served from the memo
        for line in lines:
            raw = line.encode()
            assert as_facts(raw, MEMO.match_line(raw)) == expected(raw), line[:60]


def test_batch_lines_are_deferred_only_when_conversion_cannot_fail() -> None:
    [rule] = [r for r in PACK.rules if r.id == "decode_batch"]
    line = (
        b"[2026-03-09 21:41:22 TP0] Decode batch, #running-req: 3, #token: 13520, token usage: "
        b"0.03, cuda graph: True, gen throughput (token/s): 156.84, #queue-req: 0"
    )
    for _ in range(2):  # the second time from the memo
        ok = MEMO.match_line(line)
        assert isinstance(ok, BatchMatch) and ok.rule is rule
    huge = (
        b"[2026-03-09 21:41:22 TP0] Decode batch, #running-req: " + b"9" * 5000 + b", #token: 1, "
        b"token usage: 0.03, gen throughput (token/s): 1.00, #queue-req: 0"
    )
    assert MEMO.match_line(huge) == []  # int() refuses it: no match, as match() says


def test_a_wrapped_batch_line_is_memoised_as_the_bare_one() -> None:
    """A wrapper (docker -t, CRI, Ray, compose) costs the memo nothing: the verdict of the masked
    line is kept, and the deferred facts are read after the wrapper."""
    bare = (
        "[2026-03-09 21:41:22 TP0] Decode batch, #running-req: 3, #token: 13520, token usage: "
        "0.03, cuda graph: True, gen throughput (token/s): 156.84, #queue-req: 0"
    )
    want = as_facts(bare.encode(), MEMO.match_line(bare.encode()))
    memo = MemoMatcher(PACK)
    for wrapper in (
        "2026-09-23T08:24:42.655136271Z ",
        "2026-09-23T08:24:42.655136271Z stdout F ",
        "(SGLangEngine pid=206831) ",
        "sglang-1  | ",
        "2026-09-23T08:24:42Z (SGLangEngine pid=7) ",
    ):
        raw = (wrapper + bare).encode()
        for _ in range(2):  # the second time from the memo
            got = memo.match_line(raw)
            assert isinstance(got, BatchMatch), wrapper
            assert as_facts(raw, got) == want == expected(raw)
        known = memo.known()
        assert known is not None
        view, table = known
        assert view[raw.translate(table)] is got


def test_the_runtime_rules_are_digit_blind() -> None:
    """The pack's batch-line regexes get their outcome memoised (else the memo buys little)."""
    assert {r.id for r in PACK.rules if r.scope == "runtime" and digit_blind(r.regex.pattern)} == {
        "prefill_batch",
        "decode_batch",
        "kv_pool_retract",
        "runtime_out_of_memory",
    }


def test_digit_blind_is_conservative() -> None:
    blind = [r"\d+", r"\d{4}-\d\d", r"[0-9.]+", r"(?:, [^,]*)*?, \w+", r"\D\b", r"[^a]", "(?:a|b)*"]
    seeing = [r"1", r"[0-5]", r"[^7]", r"(\d)\1", r"(a)?(?(1)b|c)", r"[\d.a-z]?x(a)?"]
    assert all(digit_blind(p) for p in blind)
    assert not any(digit_blind(p) for p in seeing[:5])
    assert digit_blind(seeing[5])  # a class of all digits plus others is still blind


def with_digits(raw: bytes, digits: list[str]) -> bytes:
    """`raw` with its ASCII digits replaced, in turn, by `digits` (cycled)."""
    it = iter(digits * (len(raw) // len(digits) + 1))
    return re.sub(rb"[0-9]", lambda _: next(it).encode(), raw)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=200)
@given(
    LINES, st.lists(st.lists(st.sampled_from("0123456789"), min_size=64, max_size=64), max_size=4)
)
def test_lines_that_differ_in_digits_only_are_each_exact(raw: bytes, digit_maps: list) -> None:  # type: ignore[type-arg]
    """The memo answers a line from another with the same digit-masked text; still exact."""
    variants = [raw]
    for digits in digit_maps:
        variants.append(with_digits(raw, digits))
    for line in variants:
        assert as_facts(line, MEMO.match_line(line)) == expected(line)


# --- the tracker: deferred batch lines --------------------------------------------------------

BATCH_SAMPLES = sorted(
    {s.line for rule in PACK.rules if rule.scope == "runtime" for s in rule.samples}
    | {line for rule in PACK.rules if rule.scope == "runtime" for line in rule.no_match}
)
NUMBER = st.one_of(
    st.integers(0, 10**7).map(str),
    st.sampled_from(["0", "00", "1.5", "9" * 5000, ""]),
)


@st.composite
def batch_line(draw: st.DrawFn) -> bytes:
    """A sample batch line with other numbers (other lengths too, so other shapes)."""
    line = draw(st.sampled_from(BATCH_SAMPLES))
    if draw(st.booleans()):
        line = re.sub(r"\d+", lambda _: draw(NUMBER), line)
    if draw(st.integers(0, 9)) == 0:  # drop a field: the optional throughput, or a required one
        parts = line.split(", ")
        del parts[draw(st.integers(0, len(parts) - 1))]
        line = ", ".join(parts)
    return line.encode()


STREAM = st.lists(st.one_of(batch_line(), batch_line(), LINES), min_size=1, max_size=40)
SERVICE = JournalEntry(
    "sglang.service", "[2026-03-09 21:41:00 TP0] starting", 1_773_100_000_000_000, "inv-1"
)


def fed(tracker: StartupTracker, lines: list[bytes], *, one_by_one: bool) -> StartupTracker:
    def now() -> int:
        return 1_773_100_001_000_000

    if one_by_one:  # a feed() per item: nothing may depend on where one call ends
        items: list[SourceItem] = [SERVICE, *lines]
        for item in items:
            tracker.feed([item], now)
    else:
        tracker.feed([SERVICE, *lines], now)
    return tracker


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(STREAM, st.booleans())
def test_deferred_batch_lines_end_as_the_exact_path_does(
    lines: list[bytes], one_by_one: bool
) -> None:
    """Hit counts and the runtime values equal those of matching every line exactly."""
    fast = fed(StartupTracker(MemoMatcher(PACK)), lines, one_by_one=one_by_one)
    exact = fed(StartupTracker(ExactMatcher(PACK)), lines, one_by_one=True)
    got, want = fast.current("sglang.service"), exact.current("sglang.service")
    assert got is not None and want is not None
    assert got.rule_hits == want.rule_hits
    assert fast.runtime_views() == exact.runtime_views()
    assert got.facts == want.facts
    assert fast.rule_hits == exact.rule_hits


def test_a_runtime_regex_that_tells_digits_apart_is_run_on_every_line() -> None:
    """Its outcome is not memoised: lines differing only in a digit get their own answers."""
    rule = Rule(
        id="odd_batch",
        contains="Odd batch",
        regex=RuleRegex(r"^Odd batch [13579], #running-req: (?P<running_requests>\d+)"),
        facts=(FactSpec("running_requests", "int", "running_requests"),),
        scope="runtime",
    )
    rule_set = RuleSet((rule,))
    memo = MemoMatcher(rule_set)
    assert not digit_blind(rule.regex.pattern)
    for digit in "1234567891":
        raw = f"[2026-03-09 21:41:22 TP0] Odd batch {digit}, #running-req: 4{digit}".encode()
        got = memo.match_line(raw)
        want = [(m.rule_id, dict(m.facts)) for m in rule_set.match(clean_message(raw))]
        assert as_facts(raw, got) == want
        assert isinstance(got, BatchMatch) == (digit in "13579")
