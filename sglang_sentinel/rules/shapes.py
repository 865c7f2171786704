"""Line and regex shapes: what the rule matcher knows before it runs a rule's regex.

Worked out from text alone, never from a rule or a rule set:

- the SGLang line prefix `[ts DPn TPn] ` and the pre-logger decoration `INFO file.py:12: `:
  `split_prefix` strips them and parses the line's rank;
- a rule regex's text: the literal a `^`-anchored regex starts with (`RuleSet`'s head index) and
  the text of a named group (whether a fact is a plain number that cannot fail to convert);
- `digit_blind`: whether a regex cannot tell one ASCII digit from another, which is what lets
  `MemoMatcher.match_line` memoise its outcome per digit-masked line.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from sglang_sentinel.model import Rank

# --- the line prefix -------------------------------------------------------------------------

# An SGLang line starts with its timestamp: "[2026-03-09 21:34:27" (a line that does not is the
# continuation of one journald split).
_LINE_START: Final = r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
LINE_START_RE: Final = re.compile(_LINE_START, re.ASCII)
# re.ASCII: a rank or a line number is never written in non-ASCII digits, and int() on a
# 5000-digit match would raise; `\d{1,9}` below keeps every rank int() safe.
_PREFIX_RE: Final = re.compile(
    _LINE_START + r"(?:\.\d{3})?"
    r"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] "
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+\.py:\d+: )?",
    re.ASCII,
)
# _PREFIX_RE without the decoration: the part that MemoMatcher._split memoizes.
BRACKET_RE: Final = re.compile(
    _LINE_START + r"(?:\.\d{3})?"
    r"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ",
    re.ASCII,
)
PREFIX_MAX: Final = 96  # longer than any real "[ts DPn PPn ATTN_CPn MOE_DPn TPn EPn] "
DECORATION_RE: Final = re.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+\.py:\d+: ", re.ASCII
)
_DECORATION_STARTS: Final = frozenset("DIWEC")
_RANK_PART_RE: Final = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d{1,9})\Z", re.ASCII)
NO_RANK: Final = Rank()
DECORATION_WORDS: Final = ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ")


def split_prefix(message: str) -> tuple[str, Rank]:
    """Strip the SGLang `[ts DPn TPn] ` prefix and the pre-logger decoration; return body, rank."""
    if message.startswith("["):
        prefix = _PREFIX_RE.match(message)
        if prefix is not None:
            ranks = prefix.group(1)
            return message[prefix.end() :], parse_rank(ranks) if ranks else NO_RANK
    elif message[:1] in _DECORATION_STARTS:
        # Lines logged before configure_logger() can carry the decoration without a prefix.
        decoration = DECORATION_RE.match(message)
        if decoration is not None:
            return message[decoration.end() :], NO_RANK
    return message, NO_RANK


def parse_rank(ranks: str) -> Rank:
    """The rank of a prefix's rank part, such as " DP1 TP3" (`BRACKET_RE`'s group 1)."""
    common = _COMMON_RANKS.get(ranks)
    if common is not None:
        return common
    values: dict[str, int] = {}
    for part in ranks.split():
        parsed = _RANK_PART_RE.match(part)
        if parsed is not None:  # ATTN_CP and MOE_DP have no place in Rank; MOE_DP is not DP
            values[parsed.group(1)] = int(parsed.group(2))
    return Rank(dp=values.get("DP"), pp=values.get("PP"), tp=values.get("TP"), ep=values.get("EP"))


# Ranks as most deployments print them, parsed once at import (a frozen mapping, not a cache).
_COMMON_RANKS: Final[Mapping[str, Rank]] = MappingProxyType(
    {
        **{f" TP{t}": Rank(tp=t) for t in range(64)},
        **{f" DP{d} TP{t}": Rank(dp=d, tp=t) for d in range(16) for t in range(16)},
        **{f" TP{t} EP{t}": Rank(tp=t, ep=t) for t in range(64)},
        **{f" DP{d}": Rank(dp=d) for d in range(64)},
    }
)


# --- regex text ------------------------------------------------------------------------------

# Fact group patterns whose int()/float() cannot fail (int() refuses > 4300 digits, hence
# DEFERRABLE_SPAN); exact pattern texts, anything else is simply not deferrable.
_FLOAT_SHAPES: Final = frozenset(
    {r"\d+", r"-?\d+", r"\d+(?:\.\d+)?", r"\d+\.\d+", r"-?\d+(?:\.\d+)?"}
)
NUMBER_SHAPES: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "int": frozenset({r"\d+", r"-?\d+"}),
        "float": _FLOAT_SHAPES,
        "gb": _FLOAT_SHAPES,
    }
)
DEFERRABLE_SPAN: Final = 4000


def group_pattern(pattern: str, group: str) -> str | None:
    """The text of named group `group` in `pattern`, or None when it is not found plainly."""
    start = pattern.find(f"(?P<{group}>")
    if start < 0:
        return None
    inner = start + len(group) + 5
    close, _ = _scan_group(pattern, inner)
    return pattern[inner:close] if close is not None else None


_META: Final = frozenset(".^$*+?{}[]()|\\")


def anchored_prefix(pattern: str) -> str:
    """The literal text every match of a `^`-anchored pattern starts with, or "" when unsure.

    Deliberately conservative: reads literal characters (stepping into a leading group that is
    neither quantified nor an alternation) and stops at the first other metacharacter; a
    character followed by a quantifier is dropped.
    """
    if not pattern.startswith("^") or _scan_group(pattern, 1)[1]:
        return ""
    prefix: list[str] = []
    i = 1
    while i < len(pattern):
        char = pattern[i]
        if char == "(":
            inner = _group_content_start(pattern, i)
            if inner is None:
                break
            close, has_bar = _scan_group(pattern, inner)
            if close is None or has_bar or pattern[close + 1 : close + 2] in _QUANTIFIERS:
                break
            i = inner
            continue
        if char == "\\":
            escaped = pattern[i + 1 : i + 2]
            if not escaped or escaped.isalnum() or (escaped.isspace() and escaped != " "):
                break  # \d, \A, \1 ... are not literals
            char, step = escaped, 2
        elif char in _META:
            break
        else:
            step = 1
        if pattern[i + step : i + step + 1] in _QUANTIFIERS:
            break
        prefix.append(char)
        i += step
    return "".join(prefix)


_QUANTIFIERS: Final = frozenset("*+?{")


def _group_content_start(pattern: str, i: int) -> int | None:
    """Where the content of the group opening at `i` starts; None for lookarounds and flags."""
    if pattern.startswith("(?:", i):
        return i + 3
    if pattern.startswith("(?P<", i):
        end = pattern.find(">", i)
        return end + 1 if end > 0 else None
    return i + 1 if not pattern.startswith("(?", i) else None


def _scan_group(pattern: str, start: int) -> tuple[int | None, bool]:
    """From `start` inside a group: the index of its closing paren (None at the pattern end) and
    whether the group has a `|` of its own."""
    depth = 0
    has_bar = False
    in_class = False
    i = start
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i += 2 if pattern.startswith("[]", i) else 3 if pattern.startswith("[^]", i) else 1
            continue  # a ] right after [ or [^ is a literal inside the class
        elif char == "(":
            depth += 1
        elif char == ")":
            if depth == 0:
                return i, has_bar
            depth -= 1
        elif char == "|" and depth == 0:
            has_bar = True
        i += 1
    return None, has_bar


# --- digit-blind regexes ---------------------------------------------------------------------

# A regex *text* parser, only read, to inspect a rule's pattern once at load time: CPython's own
# (re._parser since 3.11, sre_parse before; typeshed has no stubs for either). It reads the
# common syntax RE2 runs the same way; any pattern it reads differently is refused (conservative).
_sre: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")
_ALL_DIGITS: Final = frozenset(range(ord("0"), ord("9") + 1))


def digit_blind(pattern: str) -> bool:
    """True when the regex `pattern` cannot tell one ASCII digit from another.

    That is: every character test in it accepts all ten ASCII digits or none of them, and it has
    no backreference (the only construct that compares characters with each other). A regex
    engine then makes the very same choices on a line and on any copy of it with other digits in
    the same places, so whether and where it matches, and every group's span, are facts of the
    line with its digits masked. Conservative: a construct not listed below counts as telling
    them apart.
    """
    try:
        tree = _sre.parse(pattern, 0)
    except Exception:  # a pattern RE2 took but this parser reads differently (e.g. \pN, \z)
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
        elif op in (_sre.ANY, _sre.AT):  # AT: anchors and \b, and every digit is a word character
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
        else:  # GROUPREF, GROUPREF_EXISTS, anything a later Python adds
            return False
    return True


def _class_digits(items: Any) -> frozenset[int] | None:
    """The ASCII digits (code points) a character class accepts; None when unsure."""
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
