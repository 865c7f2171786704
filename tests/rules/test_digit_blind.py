"""`digit_blind` reads a rule regex's text (RE2 syntax) without CPython's private regex parser:
the same answers as that parser gave on every rule regex we have, never True where it said
False, and a True answer keeps its promise on RE2 itself (digits swapped, same match and spans)."""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib
import itertools
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import sglang_sentinel
from sglang_sentinel.rules import BatchMatch, MemoMatcher, RuleSet, default_rules_dir, load_rules
from sglang_sentinel.rules.regex import RegexError, RuleRegex
from sglang_sentinel.rules.ruleset import FactSpec, Rule
from sglang_sentinel.rules.shapes import digit_blind
from sglang_sentinel.text import clean_message

# --- the oracle: the parser-based implementation this module replaced (test code only) --------

_sre: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")
_ALL_DIGITS = frozenset(range(ord("0"), ord("9") + 1))
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)  # one escape pair, read left to right


def parser_digit_blind(pattern: str) -> bool:
    """The former `digit_blind`: CPython's regex parser reads the pattern, the tree is checked.

    RE2's `\\z` (end of text) is read as CPython's `\\Z`, which CPython before 3.14 spells
    only that way (it rejected `\\z` as a bad escape, so the oracle called a blind anchor not
    blind, and the any-text test below failed whenever it drew `\\z`)."""
    pattern = _ESCAPE.sub(lambda m: "\\Z" if m.group(1) == "z" else m.group(0), pattern)
    try:
        with warnings.catch_warnings():  # "possible nested set", flags not at the start (3.10)
            warnings.simplefilter("ignore")
            tree = _sre.parse(pattern, 0)
    except Exception:
        return False
    return _blind(tree)


def _blind(items: Any) -> bool:
    for op, av in items:
        if op in (_sre.LITERAL, _sre.NOT_LITERAL):
            if av in _ALL_DIGITS:
                return False
        elif op is _sre.IN:
            accepted = _class_digits(av)
            if accepted is None or accepted not in (frozenset(), _ALL_DIGITS):
                return False
        elif op in (_sre.ANY, _sre.AT):
            continue
        elif op is _sre.BRANCH:
            if not all(_blind(branch) for branch in av[1]):
                return False
        elif op is _sre.SUBPATTERN:
            if not _blind(av[3]):
                return False
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            if not _blind(av[2]):
                return False
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            if not _blind(av[1]):
                return False
        else:
            return False
    return True


def _class_digits(items: Any) -> frozenset[int] | None:
    every = (
        _sre.CATEGORY_DIGIT,
        _sre.CATEGORY_WORD,
        _sre.CATEGORY_NOT_SPACE,
        _sre.CATEGORY_NOT_LINEBREAK,
    )
    none = (
        _sre.CATEGORY_NOT_DIGIT,
        _sre.CATEGORY_NOT_WORD,
        _sre.CATEGORY_SPACE,
        _sre.CATEGORY_LINEBREAK,
    )
    negate = False
    accepted: set[int] = set()
    for op, av in items:
        if op is _sre.NEGATE:
            negate = True
        elif op is _sre.LITERAL:
            if av in _ALL_DIGITS:
                accepted.add(av)
        elif op is _sre.RANGE:
            accepted.update(d for d in _ALL_DIGITS if av[0] <= d <= av[1])
        elif op is _sre.CATEGORY and av in every:
            accepted.update(_ALL_DIGITS)
        elif op is _sre.CATEGORY and av in none:
            continue
        else:
            return None
    return _ALL_DIGITS - accepted if negate else frozenset(accepted)


def compiles(pattern: str) -> RuleRegex | None:
    try:
        return RuleRegex(pattern)
    except RegexError:
        return None


# --- every rule regex we have --------------------------------------------------------------

PACK_PATTERNS = sorted({rule.regex.pattern for rule in load_rules([default_rules_dir()]).rules})
# The regexes written in tests/ (`grep -rn 'regex\|RuleRegex(\|digit_blind' tests/`).
TEST_PATTERNS = [
    # test_matcher.py
    r"\d+",
    r"\d{4}-\d\d",
    r"[0-9.]+",
    r"(?:, [^,]*)*?, \w+",
    r"\D\b",
    r"[^a]",
    "(?:a|b)*",
    "1",
    "[0-5]",
    "[^7]",
    r"(\d)\1",
    r"(a)?(?(1)b|c)",
    r"[\d.a-z]?x(a)?",
    r"^Odd batch [13579], #running-req: (?P<running_requests>\d+)",
    # test_daemon_lifecycle.py, test_log_priority.py, test_scan.py
    r'"POST /v1/chat/completions HTTP/1\.1" 200',
    "(unclosed",
    "(",
    # test_rule_regex.py
    "(a+)+$",
    r"model=(?P<model>\S+) by (?P<who>\w+)(?P<opt>!)?",
    r"(?P<a>x|xy)(?P<b>y?)",
    r"^(?P<name>(?:[^/\s.]|\.)*?\.json)",
    r"a*+b",
    r"(?:a|b)++",
    r"a{1,3}+",
    r"a(?=b)",
    r"a(?!b)",
    r"(?<=b)a",
    r"(?<!b)a",
    r"(?>a|ab)c",
    r"(a)\1",
    r"(?P<x>a)(?P=x)",
    r"a\Z",
    r"x=(?P<n>\d++)",
    # test_rules.py
    r"mystery=(?P<mystery_value>\d+)",
    r"^Load weight begin\. avail mem=(?P<load_avail_mem_gb>\d+(?:\.\d+)?) GB",
    r"abc(?P<context_len>",
    r"abc(?P<y>\d+)",
    r"^Load weight begin\. avail mem=(?P<load_avail_mem_gb>\d+) GB",
    r"^zzz (?P<max_prefill_tokens>\d+)",
    "qqq",
    "www",
    "vvv",
    "uuu",
    "ttt",
    "sss",
    "x",
    r"^flag=(?P<cuda_graph>\w+)",
    r"(?:hay|straw)?needle(?P<context_len>\d+)",
    # e2e/journey.py
    r"^nested (?P<model_arch>(a+)+)$",
]
# Backreferences, conditionals, lookarounds, atomic groups, possessive repeats, `\Z`, syntax errors.
REFUSED_BY_RE2 = {
    r"(\d)\1",
    r"(a)?(?(1)b|c)",
    "(unclosed",
    "(",
    r"a*+b",
    r"(?:a|b)++",
    r"a{1,3}+",
    r"a(?=b)",
    r"a(?!b)",
    r"(?<=b)a",
    r"(?<!b)a",
    r"(?>a|ab)c",
    r"(a)\1",
    r"(?P<x>a)(?P=x)",
    r"a\Z",
    r"x=(?P<n>\d++)",
    r"abc(?P<context_len>",
}


def test_same_answer_as_the_parser_on_every_regex_re2_runs() -> None:
    """Pack and test regexes: the parser's answer wherever RE2 compiles the pattern (the only
    patterns a RuleSet asks about); False for the rest (the parser read lookarounds and `\\Z`,
    which RE2 refuses, as blind)."""
    runs = [p for p in PACK_PATTERNS + TEST_PATTERNS if compiles(p) is not None]
    refused = [p for p in PACK_PATTERNS + TEST_PATTERNS if compiles(p) is None]
    assert refused == [p for p in TEST_PATTERNS if p in REFUSED_BY_RE2]
    assert {p: digit_blind(p) for p in runs} == {p: parser_digit_blind(p) for p in runs}
    assert not any(digit_blind(p) for p in refused)


def test_the_pack_is_all_digit_blind() -> None:
    """Every shipped regex is blind (whichever of them becomes a runtime rule gets memoised)."""
    assert [p for p in PACK_PATTERNS if not digit_blind(p)] == []


# --- known answers -------------------------------------------------------------------------

BLIND = [
    "",
    r"^a\.b$",
    r"x{0,6}y{2}z{3,}?",  # repeat counts are not literals
    r"[/-:]",  # a range over all ten digits
    r"[^\D]",
    r"[\w./-]{1,200}",
    r"[]a]",
    r"[^]a]",
    r"[-a]",
    r"[a-]",
    r"(?i)(?s)abc",
    r"(?i:ab)|(?-i:c)|(?s-i:.)",
    r"\Aa\z",  # \z: RE2's end of text
    r"\bx\B",
    r"\t\n\f\r\v\a",
    r"\{\}\[\]\(\)\|\\\ \_",
    r"x{}",  # no repeat: literal text
    r"a{b",
    "é+",
]
SEEING = [
    "0",
    "a9",
    "[1-9]",
    "[^0]",
    r"x{,3}",  # RE2 reads "{,3}" as text, its 3 a literal (Python's re: a repeat)
    r"x{,}",
    r"x{1,2",
    r"x{12345}",
    r"\x30",
    r"\x{30}",
    r"\060",
    r"\pN",
    r"\p{Nd}",
    r"\PL",
    r"\Q1\E",
    r"\C",
    r"\Z",
    r"[[:digit:]]",
    r"[\b]",
    r"[a-b-c]",
    r"[--/]",
    r"[+--]",
    r"[\d-a]",
    r"[z-a]",
    r"a(?i)b",
    r"(?U)a",
    r"(?x)a",
    r"(?i-i:a)",
    r"(?P<a>x)(?P<a>y)",
    r"(?<a>x)",
    r"(?P<1a>x)",
    "^*",
    r"\b+",
    "a**",
    "a*??",
    "a{2}{3}",
    "{2}",
    "(|*)",
    "a)",
    "[a",
    "\\",
    "x{3,2}",
    "x{1001}",
]


def test_known_answers() -> None:
    assert [p for p in BLIND if not digit_blind(p)] == []
    assert [p for p in SEEING if digit_blind(p)] == []


def test_a_repeat_count_re2_reads_as_text_tells_digits_apart() -> None:
    """The parser called `x{,3}` blind; on RE2 it matches "x{,3}" and not "x{,4}" (a bug fixed)."""
    regex = RuleRegex(r"x{,3}")
    assert regex.search("x{,3}") is not None
    assert regex.search("x{,4}") is None
    assert parser_digit_blind(r"x{,3}")
    assert not digit_blind(r"x{,3}")


def test_a_rule_with_a_brace_count_re2_reads_as_text_is_run_on_every_line() -> None:
    """The memo keys lines by their digit-masked text, so "x{,3}" and "x{,4}" share a key: the
    regex must be run on each (the parser-based check memoised the first line's verdict)."""
    rule = Rule(
        id="braced_batch",
        contains="Braced batch",
        regex=RuleRegex(r"^Braced batch x{,3}, #running-req: (?P<running_requests>\d+)"),
        facts=(FactSpec("running_requests", "int", "running_requests"),),
        scope="runtime",
    )
    rule_set = RuleSet((rule,))
    memo = MemoMatcher(rule_set)
    answers = []
    for digit in "3434":
        raw = f"[2026-03-09 21:41:22 TP0] Braced batch x{{,{digit}}}, #running-req: 7".encode()
        got = memo.match_line(raw)
        assert [m.rule_id for m in rule_set.match(clean_message(raw))] == (
            ["braced_batch"] if digit == "3" else []
        )
        answers.append(isinstance(got, BatchMatch) or got != [])
    assert answers == [True, False, True, False]


# --- generated patterns --------------------------------------------------------------------

_CHARS = "ab x,.:-é_"
_DIGITS = "059"
_ESCAPES = [r"\d", r"\D", r"\w", r"\W", r"\s", r"\S", r"\.", r"\-", r"\{", r"\n", r"\t"]
_ANCHORS = ["^", "$", r"\b", r"\B", r"\A"]
# RE2 syntax Python's re refuses.
_RE2_ONLY = [r"\z", r"\pN", r"\p{Nd}", r"\x30", r"\x{61}", "[[:alpha:]]", "[[:digit:]]", r"\C"]
# Constructs RE2 or Python's re refuses, or that they read differently.
_MISREAD = [r"\Z", r"\1", "(?=a)", "(?!0)", "(?<=a)", "(?P=g0)", "(?x)", "(?U)", "(?i)"]
_ODD_BRACES = ["{", "}", "{,2}", "{1,", "{,}", "{}", "{3,2}"]
_QUANTIFIERS = ["*", "+", "?", "{2}", "{0,}", "{1,3}", "{0}", "{3,2}"]
_CLASS_POINTS = "0159/:az.-é]^"
_GROUP_OPENERS = ["(", "(?:", "(?P<g{}>", "(?i:", "(?-i:", "(?s-i:", "(?i-i:"]


# The grammar's strategies, each built once: one built inside a draw is built and validated
# again on every draw, which cost more than the test itself (same strategies, same choices).
@functools.cache
def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


@functools.cache
def _pick(options: str | tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.sampled_from(options)


def _class(draw: st.DrawFn) -> str:
    items = []
    for _ in range(draw(_ints(1, 4))):
        kind = draw(_ints(0, 3))
        if kind == 0:
            items.append(draw(_pick(_CLASS_POINTS)))
        elif kind == 1:
            low, high = draw(_pick(_CLASS_POINTS)), draw(_pick(_CLASS_POINTS))
            items.append(f"{low}-{high}")
        elif kind == 2:
            items.append(draw(_pick((r"\d", r"\D", r"\w", r"\W", r"\s", r"\S"))))
        else:
            items.append(draw(_pick((r"\]", r"\-", r"\\", r"\n", r"\b"))))
    return "[" + draw(_pick(("", "^"))) + "".join(items) + "]"


def _atom(draw: st.DrawFn, depth: int, names: list[str], extra: list[str]) -> str:
    kind = draw(_ints(0, 9 if depth < 3 else 7))
    if kind <= 2:
        return draw(_pick(_CHARS + (_DIGITS if kind == 0 else "")))
    if kind == 3:
        return draw(_pick((*_ESCAPES, ".")))
    if kind == 4:
        return draw(_pick(tuple(_ANCHORS)))
    if kind == 5:
        return _class(draw)
    if kind == 6:
        return draw(_pick((*_ODD_BRACES, *extra)))
    if kind == 7:
        return draw(_pick(_CHARS))
    opener = draw(_pick(tuple(_GROUP_OPENERS)))
    if "{}" in opener:
        names.append(f"g{draw(_ints(0, len(names)))}")  # sometimes a name used before
        opener = opener.format(names[-1][1:])
    return opener + _alternation(draw, depth + 1, names, extra) + ")"


def _alternation(draw: st.DrawFn, depth: int, names: list[str], extra: list[str]) -> str:
    branches = []
    for _ in range(draw(_ints(1, 3))):
        pieces = []
        for _ in range(draw(_ints(0, 4))):
            atom = _atom(draw, depth, names, extra)
            quantifier = draw(_pick(("", "", "", *_QUANTIFIERS)))
            lazy = draw(_pick(("", "", "?"))) if quantifier else ""
            pieces.append(atom + quantifier + lazy)
        branches.append("".join(pieces))
    return "|".join(branches)


@st.composite
def patterns(draw: st.DrawFn, extra: tuple[str, ...] = ()) -> str:
    """Patterns from a small grammar of the syntax rules use, with `extra` atoms mixed in."""
    flags = draw(_pick(("", "", "(?i)", "(?s)(?m)")))
    return flags + _alternation(draw, 0, [], list(extra))


def python_reads(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def swap_digits(line: str, digits: list[str]) -> str:
    """`line` with its ASCII digits replaced, in turn, by `digits` (cycled)."""
    new = itertools.cycle(digits)
    return "".join(next(new) if char in "0123456789" else char for char in line)


def spans(regex: RuleRegex, line: str) -> list[tuple[int, int]] | None:
    """Where the match and each group are (None: no match)."""
    found = regex.search(line)
    return None if found is None else list(found._spans)


@settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], max_examples=500
)
@given(patterns(extra=tuple(_RE2_ONLY)), st.data())
def test_a_blind_regex_gives_re2_the_same_match_and_spans_whatever_the_digits(
    pattern: str, data: st.DataObject
) -> None:
    """What MemoMatcher's memo relies on: swap any digits in a line, nothing changes."""
    regex = compiles(pattern)
    assume(regex is not None and digit_blind(pattern))
    assert regex is not None
    # Lines holding a match where Python's re reads the pattern alike, else random text.
    lines = st.text(st.sampled_from(sorted(set(pattern) | set("0123456789 \n"))), max_size=30)
    matching = st.from_regex(re.compile(pattern, re.ASCII)) if python_reads(pattern) else None
    with contextlib.suppress(InvalidArgument):  # a class no character is in: `[^\d\D]`
        if matching is not None:
            matching.validate()
            lines = matching | lines
    for line in data.draw(st.lists(lines, min_size=1, max_size=4)):
        digits = data.draw(st.lists(st.sampled_from("0123456789"), min_size=1, max_size=30))
        other = swap_digits(line, digits)
        assert spans(regex, other) == spans(regex, line), (line, other)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=400)
@given(patterns(extra=tuple(_MISREAD)))
def test_never_blind_where_the_parser_was_not(pattern: str) -> None:
    """Conservative: no pattern the parser-based check refused is called blind now."""
    if not parser_digit_blind(pattern):
        assert not digit_blind(pattern)


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=300)
@given(st.text(st.sampled_from("()[]{}|\\^$.*+?-:,=!<>P_aiszbdDwWsSxpQEC059é "), max_size=16))
@example("\\z")  # RE2's end of text: blind; the oracle once refused it
@example("a\\\\z")  # an escaped backslash, then a literal z
def test_any_text_gets_an_answer_never_blind_where_the_parser_was_not(pattern: str) -> None:
    """Any string (a rule file may hold anything): an answer, no exception, still conservative."""
    blind = digit_blind(pattern)
    if not parser_digit_blind(pattern):
        assert not blind


# --- no private stdlib parser --------------------------------------------------------------

_PRIVATE = re.compile(r"\bsre_(?:parse|compile|constants)\b|\bre\._|\b_sre\b")


def test_the_package_does_not_use_a_private_regex_module() -> None:
    """No `re._parser`, `sre_parse` or `_sre` in the package: not imported, not named."""
    found = []
    for path in sorted(Path(sglang_sentinel.__file__).parent.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names = [node.value]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                names = [f"{node.value.id}.{node.attr}"]
            found += [f"{path.name}: {name}" for name in names if _PRIVATE.search(name)]
    assert found == []
