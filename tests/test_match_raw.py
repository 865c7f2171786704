"""RuleSet.match_raw (the per-line hot path on raw bytes) gives exactly what match() gives."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_sentinel.model import RuleMatch
from sglang_sentinel.rules import RuleSet, default_rules_dir, load_rules, split_prefix
from sglang_sentinel.text import clean_message

PACK = load_rules([default_rules_dir()])
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
    "[2026-03-09 21:31:09] WARNING server_args.py:2326: ",
    "[Gloo] ",
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


def as_facts(rule_set: RuleSet, result: list[RuleMatch] | tuple) -> list:  # type: ignore[type-arg]
    if isinstance(result, tuple):
        rule, found = result
        facts = rule.facts_of(found)
        return [] if facts is None else [(rule.id, facts)]
    return [(m.rule_id, dict(m.facts)) for m in result]


def expected(raw: bytes) -> list:  # type: ignore[type-arg]
    return [(m.rule_id, dict(m.facts)) for m in PACK.match(clean_message(raw))]


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=400)
@given(LINES)
def test_match_raw_is_match_of_the_clean_message(raw: bytes) -> None:
    assert as_facts(PACK, PACK.match_raw(raw)) == expected(raw)


def test_lines_of_one_shape_are_each_judged_on_their_own() -> None:
    """The per-shape memo never carries one line's verdict over to another of the same shape."""
    base = "Decode batch, #running-req: 3, #token: 41, token usage: 0.01, cuda graph: True, "
    lines = [
        f"[2026-03-09 21:34:27 TP0] {base}gen throughput (token/s): 35.47, #queue-req: 0",
        f"[2026-03-09 21:34:27 TP1] {base}gen throughput (token/s): 35.47, #queue-req: 0",
        f"[2026-3-09 21:34:27 TP0] {base}gen throughput (token/s): 35.47, #queue-req: 0",
        f"[2026-03-09 21:34:27 TP0] {base}gen throughput (token/s): 35.47, #queue-req: 9" + "9" * 5000,
        f"[2026-03-09 21:34:27 TP0] {base}gen throughput (token/s): 35.47, #queue-req: 0\x1b[0m",
    ]
    for _ in range(2):  # the second round is served from the memo
        for line in lines:
            raw = line.encode()
            assert as_facts(PACK, PACK.match_raw(raw)) == expected(raw), line[:60]


def test_batch_lines_are_deferred_only_when_conversion_cannot_fail() -> None:
    rule = PACK.get("decode_batch")
    assert rule is not None
    ok = PACK.match_raw(
        b"[2026-03-09 21:41:22 TP0] Decode batch, #running-req: 3, #token: 13520, token usage: "
        b"0.03, cuda graph: True, gen throughput (token/s): 156.84, #queue-req: 0"
    )
    assert isinstance(ok, tuple) and ok[0] is rule and rule.deferrable(ok[1])
    huge = PACK.match_raw(
        b"[2026-03-09 21:41:22 TP0] Decode batch, #running-req: " + b"9" * 5000 + b", #token: 1, "
        b"token usage: 0.03, gen throughput (token/s): 1.00, #queue-req: 0"
    )
    assert isinstance(huge, tuple) and not rule.deferrable(huge[1])
    assert rule.facts_of(huge[1]) is None  # int() refuses it: no match, as match() says
