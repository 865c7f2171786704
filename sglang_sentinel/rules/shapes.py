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

import re
import string
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from sglang_sentinel.model import Rank

# --- the line prefix -------------------------------------------------------------------------

# An SGLang line starts with its timestamp: "[2026-03-09 21:34:27" (a line that does not is the
# continuation of one journald split); up to 0.3.x (2024-09) the time had no date, "[23:17:01 TP0]"
# (tests/fixtures/reallogs/r43).
_LINE_START: Final = r"\[(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}"
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


# --- wrappers around the line ----------------------------------------------------------------

# What other tools put before an SGLang line (docs/architecture.md, "Wrappers"), one per match:
# - an RFC 3339 time, as `docker logs -t` and `kubectl logs --timestamps` print it, with the
#   CRI log format's `stdout F ` / `stderr P ` after it (a node's /var/log/pods files);
# - another Python logger the line was passed through, `%(asctime)s - %(name)s - %(levelname)s - `
#   (`2025-03-07 23:50:27,531 - __main__ - INFO - `, olmocr's server runner);
# - Docker Desktop's local time (`2025-02-17 05:27:25 `; Python's own `%(asctime)s` has a comma);
# - a Ray actor's `(SGLangEngine pid=206831) ` or `(Name pid=1, ip=10.0.0.1) `;
# - docker compose's `service-1  | `.
_WRAPPER_RE: Final = re.compile(
    r"(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d) (?:(?:stdout|stderr) [FP] )?"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - [\w.<>-]{1,64} - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})? "
    r"|\((?:[\w.:-]{1,64} )?pid=\d{1,10}(?:, ip=[\w.:-]{1,64})?\) "
    r"|[\w.-]{1,64} +\| )",
    re.ASCII,
)
WRAPPER_STARTS: Final = frozenset("(0123456789")
_MAX_WRAPPERS: Final = 3  # e.g. kubectl's time, then Ray's prefix


def may_be_wrapped(message: str) -> bool:
    """Whether a line that does not start with `[` may carry a wrapper (a cheap test)."""
    if message[:1] in WRAPPER_STARTS:
        return True
    bar = message.find(" | ", 0, 70)  # compose: one word, then spaces, then the bar
    return bar > 0 and " " not in message[:bar].rstrip(" ")


def strip_wrappers(message: str) -> str:
    """The line without the wrappers other tools put before it; any other line unchanged."""
    for _ in range(_MAX_WRAPPERS):
        if message.startswith("[") or not may_be_wrapped(message):
            break
        wrapper = _WRAPPER_RE.match(message)
        if wrapper is None:
            break
        message = message[wrapper.end() :]
    return message


def wrapper_end(raw: bytes) -> int:
    """Where the SGLang line starts in a raw MESSAGE: after the wrappers `strip_wrappers` removes.

    A wrapper is ASCII, so its length in characters is its length in bytes; and its shape tells
    no digit from another, so the offset is the same for every line with the same digit-masked
    text (what lets `MemoMatcher` memoise a wrapped line's verdict).
    """
    if raw.startswith(b"["):
        return 0
    line = raw.decode("utf-8", "replace")
    if not may_be_wrapped(line):
        return 0
    return len(line) - len(strip_wrappers(line))


def split_prefix(message: str) -> tuple[str, Rank]:
    """Strip wrappers, the SGLang `[ts DPn TPn] ` prefix and the pre-logger decoration; return
    body, rank."""
    if not message.startswith("["):
        message = strip_wrappers(message)
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

# Read from the pattern's text, in the RE2 syntax rules are written in. Only the constructs below
# are known; anything else, and anything RE2 and Python's re read differently (the pack's regexes
# are also Python regexes to their authors), counts as telling digits apart.
_ASCII_DIGITS: Final = frozenset("0123456789")
# `\d`-like escapes, by whether their set holds every ASCII digit (True) or none (False). RE2's
# \d, \w and \s are ASCII: [0-9], [0-9A-Za-z_], [\t\n\f\r ].
_SET_ESCAPES: Final[Mapping[str, bool]] = MappingProxyType(
    {"d": True, "w": True, "S": True, "D": False, "W": False, "s": False}
)
_CONTROL_ESCAPES: Final[Mapping[str, str]] = MappingProxyType(
    {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
)
# \b and \B test word characters, and every digit is one; \A and \z (RE2's end of text) none.
_ANCHOR_ESCAPES: Final = frozenset("bBAz")
_ESCAPED_LITERALS: Final = frozenset(string.punctuation + " ")  # `\.`, `\[`, `\ `, ...
# `(`, `(?:`, `(?P<name>` and scoped flags `(?i:`, `(?s-i:`. The flags i, m and s leave digits
# alone: case folding maps no character to or from a digit; m and s change what ^, $ and . do
# at a newline. (RE2's U swaps greediness, but Python's re refuses it, and x is verbose mode.)
_GROUP_OPEN_RE: Final = re.compile(
    r"\((?:\?(?::|P<(?P<name>[A-Za-z_][A-Za-z0-9_]*)>|(?P<on>[ims]*)(?:-(?P<off>[ims]+))?:))?"
)
# Global flags, `(?i)`: only at the very start (Python's re refuses them anywhere else).
_GLOBAL_FLAGS_RE: Final = re.compile(r"(?:\(\?[ims]+\))*")
# `{m}`, `{m,}`, `{m,n}`, whose counts are not literals. RE2 reads anything else from `{` on as
# literal text, its digits literals; Python's re reads `{,n}` as a repeat, so that is refused.
_REPEAT_RE: Final = re.compile(r"\{(?P<min>[0-9]{1,4})(?P<comma>,(?P<max>[0-9]{0,4}))?\}")
_REPEAT_MAX: Final = 1000  # RE2 refuses a larger count


class _Unsure(Exception):
    """The digit scan met a construct it does not read, or one RE2 and Python's re read apart."""


def digit_blind(pattern: str) -> bool:
    """True when the regex `pattern` cannot tell one ASCII digit from another.

    That is: every character test in it accepts all ten ASCII digits or none of them, and it has
    no backreference (the only construct that compares characters with each other). A regex
    engine then makes the very same choices on a line and on any copy of it with other digits in
    the same places, so whether and where it matches, and every group's span, are facts of the
    line with its digits masked. Read from the pattern's text (RE2 syntax); conservative: a
    construct it does not know counts as telling digits apart.
    """
    try:
        _scan(pattern)
    except _Unsure:
        return False
    return True


def _scan(pattern: str) -> None:
    """Read `pattern` left to right; raise _Unsure at anything that may tell digits apart."""
    i = _match(_GLOBAL_FLAGS_RE, pattern, 0).end()
    depth = 0
    names: set[str] = set()
    repeatable = False  # whether the item just read may take a repeat operator
    while i < len(pattern):
        char = pattern[i]
        if char == "(":
            i = _group_start(pattern, i, names)
            depth += 1
            repeatable = False
        elif char == ")":
            if depth == 0:
                raise _Unsure
            depth -= 1
            i += 1
            repeatable = True
        elif char in "*+?{":
            if char == "{" and _REPEAT_RE.match(pattern, i) is None:
                if pattern.startswith("{,", i):
                    raise _Unsure
                i += 1  # a literal `{`
                repeatable = True
                continue
            if not repeatable:
                raise _Unsure  # nothing to repeat, or a second repeat (`a**`, possessive `a*+`)
            i = _repeat_end(pattern, i)
            repeatable = False
        elif char == "[":
            i = _class_end(pattern, i)
            repeatable = True
        elif char == "\\":
            escaped = pattern[i + 1 : i + 2]
            if escaped in _ANCHOR_ESCAPES:
                repeatable = False
            elif (
                escaped in _SET_ESCAPES
                or escaped in _CONTROL_ESCAPES
                or escaped in _ESCAPED_LITERALS
            ):
                repeatable = True
            else:
                raise _Unsure  # \1, \x30, \pN, \Q...\E, \C, \Z ...
            i += 2
        elif char in _ASCII_DIGITS:
            raise _Unsure
        else:  # a literal, `.`, `|`, `^` or `$`
            i += 1
            repeatable = char not in "|^$"
    if depth:
        raise _Unsure


def _match(regex: re.Pattern[str], pattern: str, i: int) -> re.Match[str]:
    found = regex.match(pattern, i)
    if found is None:
        raise _Unsure
    return found


def _group_start(pattern: str, i: int, names: set[str]) -> int:
    """Where the content of the group opening at `i` starts; `names`: the group names so far."""
    opened = _match(_GROUP_OPEN_RE, pattern, i)
    name, on, off = opened.group("name", "on", "off")
    if opened.end() == i + 1 and pattern.startswith("(?", i):
        raise _Unsure  # lookarounds, backreferences, conditionals, flags past the start ...
    if name is not None:
        if name in names:
            raise _Unsure  # Python's re refuses a name used twice
        names.add(name)
    if off is not None and set(on) & set(off):
        raise _Unsure  # a flag turned on and off (Python's re refuses it)
    return opened.end()


def _repeat_end(pattern: str, i: int) -> int:
    """The end of the repeat operator at `i`, with its lazy `?`; its counts are not literals."""
    if pattern[i] == "{":
        repeat = _match(_REPEAT_RE, pattern, i)
        low, comma, high = repeat.group("min", "comma", "max")
        top = int(high) if high else int(low) if comma is None else _REPEAT_MAX
        if not int(low) <= top <= _REPEAT_MAX:
            raise _Unsure
        i = repeat.end()
    else:
        i += 1
    return i + 1 if pattern.startswith("?", i) else i


def _class_end(pattern: str, i: int) -> int:
    """The end of the character class opening at `i`, which must accept all digits or none."""
    i += 2 if pattern.startswith("[^", i) else 1  # a negation keeps "all or none"
    start = i
    digits: set[str] = set()
    while True:
        char = pattern[i : i + 1]
        if char == "]" and i > start:
            break
        if char == "\\" and pattern[i + 1 : i + 2] in _SET_ESCAPES:
            if _SET_ESCAPES[pattern[i + 1]]:
                digits |= _ASCII_DIGITS
            i += 2
            if pattern.startswith("-", i) and not pattern.startswith("-]", i):
                raise _Unsure  # `[\d-a]`: Python's re refuses it, RE2 reads a `-`
            continue
        if (
            char == "-"
            and not pattern.startswith("-]", i)
            and (i > start or pattern.startswith("--", i))
        ):
            raise _Unsure  # a plain `-` is read alike only first or last (`[-a]`, `[a-]`)
        low, i = _class_char(pattern, i)
        high = low
        if pattern.startswith("-", i) and not pattern.startswith("-]", i):
            if pattern.startswith("--", i):
                raise _Unsure  # `[+--]`
            high, i = _class_char(pattern, i + 1)
            if high < low:
                raise _Unsure
        digits.update(d for d in _ASCII_DIGITS if low <= d <= high)
    if digits and digits != _ASCII_DIGITS:
        raise _Unsure
    return i + 1


def _class_char(pattern: str, i: int) -> tuple[str, int]:
    """The one character written at `i` inside a class (plain or escaped), and what follows it."""
    char = pattern[i : i + 1]
    if char == "\\":
        escaped = pattern[i + 1 : i + 2]
        if escaped in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[escaped], i + 2
        if escaped in _ESCAPED_LITERALS:
            return escaped, i + 2
        raise _Unsure  # \b (a backspace to Python's re), \x30, \pN ...
    if not char or pattern.startswith("[:", i):
        raise _Unsure  # no closing `]`, or a POSIX class `[:alpha:]` (RE2)
    return char, i + 1
