"""Rule files: load, validate and apply the regex rules that turn SGLang log lines into facts.

A rule file (`rules/*.yaml`, schema in docs/architecture.md) holds rules with a required literal
(`contains`), a regex applied to the line *body* (the SGLang `[ts TPn] ` prefix and the pre-logger
`INFO server_args.py:1835: ` decoration stripped), typed facts and sample lines. Everything is
validated up front, samples included, and every problem is reported at once as
`file:rule_id: message`; a `RuleSet` is only ever built from rules that passed.

The pipeline calls `RuleSet.match_raw` on nearly every journal line; almost no line matches a
startup rule and nearly all the rest are batch lines of a few layouts, so what a line gets is
memoised per digit-masked line (see `match_raw`).
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, cast

import yaml

from sglang_sentinel.errors import RuleError
from sglang_sentinel.model import RUNTIME_FACTS, FactValue, Rank, RuleMatch
from sglang_sentinel.text import clean_message

FactType = Literal["int", "float", "gb", "bool", "str", "list"]
Scope = Literal["startup", "runtime"]

FACT_TYPES: Final[frozenset[str]] = frozenset({"int", "float", "gb", "bool", "str", "list"})
SCOPES: Final[frozenset[str]] = frozenset({"startup", "runtime"})
# The lead's policy file lives beside the rule files but is not a rule file.
POLICY_FILE: Final = "policy.yaml"

_RULE_KEYS: Final = frozenset(
    {"id", "description", "contains", "regex", "scope", "facts", "samples", "also_matches"}
)
_TOP_KEYS: Final = frozenset({"version", "rules"})
_FACT_KEYS: Final = frozenset({"type", "group", "value"})
_SAMPLE_KEYS: Final = frozenset({"match", "no_match"})
_ID_RE: Final = re.compile(r"[a-z][a-z0-9_]*\Z")
_BOOLS: Final[Mapping[str, bool]] = MappingProxyType(
    {"True": True, "true": True, "1": True, "False": False, "false": False, "0": False}
)

# re.ASCII: a rank or a line number is never written in non-ASCII digits, and int() on a
# 5000-digit match would raise; `\d{1,9}` below keeps every rank int() safe.
_PREFIX_RE: Final = re.compile(
    r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?"
    r"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] "
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+\.py:\d+: )?",
    re.ASCII,
)
# _PREFIX_RE without the decoration: the part that RuleSet._split memoizes.
_BRACKET_RE: Final = re.compile(
    r"\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?"
    r"((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] ",
    re.ASCII,
)
_MEMO_PREFIX_MAX: Final = 96  # longer than any real "[ts DPn PPn ATTN_CPn MOE_DPn TPn EPn] "
_MEMO_SIZE: Final = 4096
# Longer lines (server_args, tracebacks) are neither batch lines nor frequent; not memoising them
# keeps the memo a few MB at most.
_MEMO_LINE_MAX: Final = 1024
_ASCII_DIGITS: Final = "0123456789"
# bytes.translate table: every ASCII digit becomes "0" (match_raw's memo key).
_MASK_DIGITS: Final = bytes.maketrans(b"0123456789", b"0000000000")
_DECORATION_RE: Final = re.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+\.py:\d+: ", re.ASCII
)
_DECORATION_STARTS: Final = frozenset("DIWEC")
_RANK_PART_RE: Final = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d{1,9})\Z", re.ASCII)
_NO_RANK: Final = Rank()
_SAMPLE_SHOWN = 90  # characters of a sample line quoted in a problem message


@dataclass(frozen=True, slots=True)
class FactSpec:
    """How one fact is produced: from a named group (converted to `type`) or as a constant."""

    name: str
    type: FactType
    group: str | None  # None for a constant
    constant: FactValue = None


@dataclass(frozen=True, slots=True)
class Sample:
    """A positive sample: a full log line and exactly the facts it must yield."""

    line: str
    facts: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Rule:
    """One validated rule from a rule file."""

    id: str
    contains: str
    regex: re.Pattern[str]
    facts: tuple[FactSpec, ...]
    scope: Scope = "startup"
    description: str = ""
    samples: tuple[Sample, ...] = ()
    no_match: tuple[str, ...] = ()
    also_matches: frozenset[str] = frozenset()
    source: str = "-"  # the file it came from, for problem messages

    # Precomputed by __post_init__ so that apply() is one regex call and a short loop.
    _constants: tuple[tuple[str, FactValue], ...] = field(init=False, repr=False, compare=False)
    _plan: tuple[tuple[str, str, Callable[[str], FactValue]], ...] = field(
        init=False, repr=False, compare=False
    )
    # Every fact group is a plain number pattern whose conversion cannot fail on a match shorter
    # than _DEFERRABLE_SPAN. See `deferrable`.
    _numbers_only: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        constants = tuple((f.name, f.constant) for f in self.facts if f.group is None)
        plan = tuple(
            (f.name, f.group, _CONVERTERS[f.type]) for f in self.facts if f.group is not None
        )
        object.__setattr__(self, "_constants", constants)
        object.__setattr__(self, "_plan", plan)
        numbers_only = bool(plan) and all(
            _group_pattern(self.regex.pattern, group) in _NUMBER_SHAPES.get(spec.type, ())
            for spec in self.facts
            if (group := spec.group) is not None
        )
        object.__setattr__(self, "_numbers_only", numbers_only)

    def apply(self, body: str) -> dict[str, FactValue] | None:
        """Facts from a line body, or None when the regex misses or a value does not convert."""
        found = self.regex.search(body)
        if found is None:
            return None
        return self.facts_of(found)

    def deferrable(self, found: re.Match[str]) -> bool:
        """True when `facts_of(found)` cannot fail, so a caller may keep the line and convert it
        later (or never, when a newer line replaces it)."""
        return self._numbers_only and found.end() - found.start() <= _DEFERRABLE_SPAN

    def fact_names(self, found: re.Match[str]) -> frozenset[str]:
        """The facts `facts_of(found)` yields when it converts: all but those of optional
        groups that did not take part."""
        names = [name for name, _ in self._constants]
        names.extend(name for name, group, _ in self._plan if found.group(group) is not None)
        return frozenset(names)

    def facts_of_raw(self, raw: bytes) -> dict[str, FactValue] | None:
        """The facts of a raw line that `RuleSet.match_raw` answered with a BatchMatch of this
        rule."""
        # match_raw answers so only for a line whose body follows a valid "[ts ranks] " prefix
        # or starts the line, with nothing for clean_message() to change.
        end = raw.find(b"] ", 1, _MEMO_PREFIX_MAX) + 2 if raw.startswith(b"[") else 0
        found = self.regex.search(raw[end:].decode("utf-8", "replace"))
        return None if found is None else self.facts_of(found)

    def facts_of(self, found: re.Match[str]) -> dict[str, FactValue] | None:
        """The facts of a regex match of this rule, or None when a value does not convert."""
        facts: dict[str, FactValue] = dict(self._constants)
        groups = found.groupdict()
        try:
            for name, group, converter in self._plan:
                raw = groups[group]
                if raw is not None:  # None: an optional part this line does not have
                    facts[name] = converter(raw)
        except (ValueError, OverflowError, KeyError):  # int() of >4300 digits is a ValueError
            return None
        return facts


# Fact group patterns whose int()/float() cannot fail (int() refuses > 4300 digits, hence
# _DEFERRABLE_SPAN); exact pattern texts, anything else is simply not deferrable.
_FLOAT_SHAPES: Final = frozenset(
    {r"\d+", r"-?\d+", r"\d+(?:\.\d+)?", r"\d+\.\d+", r"-?\d+(?:\.\d+)?"}
)
_NUMBER_SHAPES: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "int": frozenset({r"\d+", r"-?\d+"}),
        "float": _FLOAT_SHAPES,
        "gb": _FLOAT_SHAPES,
    }
)
_DEFERRABLE_SPAN: Final = 4000


def _group_pattern(pattern: str, group: str) -> str | None:
    """The text of named group `group` in `pattern`, or None when it is not found plainly."""
    start = pattern.find(f"(?P<{group}>")
    if start < 0:
        return None
    inner = start + len(group) + 5
    close, _ = _scan_group(pattern, inner)
    return pattern[inner:close] if close is not None else None


def _to_gb(raw: str) -> float:
    return float(raw.removesuffix("GiB").removesuffix("GB").strip())


def _to_bool(raw: str) -> bool:
    return _BOOLS[raw.strip()]  # KeyError for anything else


def _to_item(raw: str) -> tuple[str, ...]:
    return (raw,)


_CONVERTERS: Final[Mapping[str, Callable[[str], FactValue]]] = MappingProxyType(
    {"int": int, "float": float, "gb": _to_gb, "bool": _to_bool, "str": str, "list": _to_item}
)


def convert(kind: str, raw: str) -> FactValue | None:
    """Convert a captured string to a fact type; None when it does not convert (never raises)."""
    converter = _CONVERTERS.get(kind)
    if converter is None:
        return None
    try:
        return converter(raw)
    except (ValueError, OverflowError, KeyError):
        return None


def split_prefix(message: str) -> tuple[str, Rank]:
    """Strip the SGLang `[ts DPn TPn] ` prefix and the pre-logger decoration; return body, rank."""
    if message.startswith("["):
        prefix = _PREFIX_RE.match(message)
        if prefix is not None:
            ranks = prefix.group(1)
            return message[prefix.end() :], _parse_rank(ranks) if ranks else _NO_RANK
    elif message[:1] in _DECORATION_STARTS:
        # Lines logged before configure_logger() can carry the decoration without a prefix.
        decoration = _DECORATION_RE.match(message)
        if decoration is not None:
            return message[decoration.end() :], _NO_RANK
    return message, _NO_RANK


def _parse_rank(ranks: str) -> Rank:
    common = _COMMON_RANKS.get(ranks)
    if common is not None:
        return common
    values: dict[str, int] = {}
    for part in ranks.split():
        parsed = _RANK_PART_RE.match(part)
        if parsed is not None:  # ATTN_CP and MOE_DP have no place in Rank; MOE_DP is not DP
            values[parsed.group(1)] = int(parsed.group(2))
    return Rank(dp=values.get("DP"), pp=values.get("PP"), tp=values.get("TP"), ep=values.get("EP"))


_META: Final = frozenset(".^$*+?{}[]()|\\")


def _anchored_prefix(pattern: str) -> str:
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


# Ranks as most deployments print them, parsed once at import (a frozen mapping, not a cache).
_COMMON_RANKS: Final[Mapping[str, Rank]] = MappingProxyType(
    {
        **{f" TP{t}": Rank(tp=t) for t in range(64)},
        **{f" DP{d} TP{t}": Rank(dp=d, tp=t) for d in range(16) for t in range(16)},
        **{f" TP{t} EP{t}": Rank(tp=t, ep=t) for t in range(64)},
        **{f" DP{d}": Rank(dp=d) for d in range(64)},
    }
)


_DECORATION_WORDS: Final = ("DEBUG ", "INFO ", "WARNING ", "ERROR ", "CRITICAL ")


# --- digit-blind regexes ---------------------------------------------------------------------

# The parser re.compile itself uses (typeshed has no stubs for it; sre_parse is its deprecated
# alias). Only read, to inspect a rule's regex once at load time.
_sre: Any = importlib.import_module("re._parser")
_ALL_DIGITS: Final = frozenset(range(ord("0"), ord("9") + 1))


def digit_blind(pattern: re.Pattern[str]) -> bool:
    """True when `pattern` cannot tell one ASCII digit from another.

    That is: every character test in it accepts all ten ASCII digits or none of them, and it has
    no backreference (the only construct that compares characters with each other). sre then
    runs the very same steps on a line and on any copy of it with other digits in the same
    places, so whether and where it matches, and every group's span, are facts of the line with
    its digits masked. Conservative: a construct not listed below counts as telling them apart.
    """
    try:
        tree = _sre.parse(pattern.pattern, pattern.flags)
    except Exception:  # a pattern re.compile took but this parser version reads differently
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
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
            if not _blind(av[2]):
                return False
        elif op is _sre.ATOMIC_GROUP:
            if not _blind(av):
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


# --- the rule set ----------------------------------------------------------------------------


class _ExactPath:
    """A line verdict: lines with this digit-masked text take the exact path."""


@dataclass(frozen=True, slots=True)
class _Search:
    """A line verdict: at most `rule` (a runtime rule whose regex may tell digits apart) matches;
    its regex decides on the body, which starts at `end`."""

    rule: Rule
    end: int


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: hashed by identity, cheaply
class BatchMatch:
    """`RuleSet.match_raw`'s answer for a batch line that matches `rule`: one match, whose facts
    `rule.facts_of_raw(line)` gives, cannot fail to give, and are exactly `facts`.

    Batch lines only set runtime facts, so of several lines with one BatchMatch only the newest
    can show in the end: the others set the same facts and are overwritten.
    """

    rule: Rule
    facts: frozenset[str]


_EXACT_PATH: Final = _ExactPath()
_UNSEEN: Final = _ExactPath()  # a memo miss (any object that is not a verdict)
_Verdict = BatchMatch | _Search | _ExactPath | None


@dataclass(frozen=True, slots=True)
class RuleSet:
    """An immutable, validated set of rules that turns a journal message into rule matches.

    Rules whose regex is `^`-anchored with a literal start ("head" rules, most of the pack) are
    indexed by their first `_head_len` characters, so a line costs a dict lookup on its body
    head whatever its length; the others are grouped by their required literal, one `in` check
    per literal. Both are necessary conditions only: a candidate's regex decides.
    """

    rules: tuple[Rule, ...]
    _by_id: Mapping[str, Rule] = field(init=False, repr=False, compare=False)
    _head_len: int = field(init=False, repr=False, compare=False)
    _heads: Mapping[str, tuple[tuple[str, Rule], ...]] = field(
        init=False, repr=False, compare=False
    )
    _buckets: tuple[tuple[str, tuple[Rule, ...]], ...] = field(
        init=False, repr=False, compare=False
    )
    _runtime_only: frozenset[str] = field(init=False, repr=False, compare=False)
    # Runtime-only rules whose regex is digit_blind(): match_raw memoises their outcome too.
    _digit_blind: frozenset[str] = field(init=False, repr=False, compare=False)
    # "[ts ranks] " -> its rank, or None when it is not an SGLang prefix. Every line of a second
    # shares one, so this saves the prefix regex on nearly every line; cleared when it grows.
    _prefix_memo: dict[str, Rank | None] = field(init=False, repr=False, compare=False)
    # match_raw: digit-masked raw line -> verdict (see there); None when it cannot be exact.
    _line_memo: dict[bytes, _Verdict] | None = field(init=False, repr=False, compare=False)
    # (rule id, facts) -> its one BatchMatch, so that a memo clear does not make new ones.
    _batches: dict[tuple[str, frozenset[str]], BatchMatch] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        rules = tuple(self.rules)
        by_id: dict[str, Rule] = {}
        for rule in rules:
            if rule.id in by_id:
                raise RuleError([f"{rule.source}:{rule.id}: duplicate rule id in one rule set"])
            by_id[rule.id] = rule
        prefixes = {rule.id: _anchored_prefix(rule.regex.pattern) for rule in rules}
        head_len = min((len(p) for p in prefixes.values() if p), default=0)
        heads: dict[str, list[tuple[str, Rule]]] = {}
        buckets: dict[str, list[Rule]] = {}  # rules sharing a literal share one `in` check
        for rule in rules:
            prefix = prefixes[rule.id]
            if prefix:
                heads.setdefault(prefix[:head_len], []).append((prefix, rule))
            else:
                buckets.setdefault(rule.contains, []).append(rule)
        object.__setattr__(self, "rules", rules)
        object.__setattr__(self, "_by_id", MappingProxyType(by_id))
        object.__setattr__(self, "_head_len", head_len)
        object.__setattr__(
            self, "_heads", MappingProxyType({k: tuple(v) for k, v in heads.items()})
        )
        object.__setattr__(self, "_buckets", tuple((k, tuple(v)) for k, v in buckets.items()))
        runtime_only = frozenset(
            r.id
            for r in rules
            if r.scope == "runtime" and all(f.name in RUNTIME_FACTS for f in r.facts)
        )
        object.__setattr__(self, "_runtime_only", runtime_only)
        object.__setattr__(
            self,
            "_digit_blind",
            frozenset(i for i in runtime_only if digit_blind(by_id[i].regex)),
        )
        object.__setattr__(self, "_prefix_memo", {})
        # The memo is exact only while no literal the candidates depend on has a digit.
        literals = [r.contains for r in rules] + [p for p in prefixes.values() if p]
        digit_free = not any(c in _ASCII_DIGITS for text in literals for c in text)
        object.__setattr__(self, "_line_memo", {} if digit_free else None)
        object.__setattr__(self, "_batches", {})

    def get(self, rule_id: str) -> Rule | None:
        """The rule with this id, or None."""
        return self._by_id.get(rule_id)

    @property
    def ids(self) -> tuple[str, ...]:
        """Every rule id, in load order."""
        return tuple(self._by_id)

    def match(self, message: str) -> list[RuleMatch]:
        """Every rule that matches one journal message, with its typed facts and the line's rank."""
        body, rank = self._split(message)
        return self.match_body(body, rank)

    def match_body(self, body: str, rank: Rank = _NO_RANK) -> list[RuleMatch]:
        """Every rule that matches an already-stripped line body."""
        matches: list[RuleMatch] = []
        for rule in self._candidates(body):
            self._apply(rule, body, rank, matches)
        return matches

    def match_raw(self, raw: bytes) -> list[RuleMatch] | BatchMatch:
        """`match(clean_message(raw))`, except for a batch line (its one candidate is a runtime
        rule with only runtime facts) that matches it and converts: then a `BatchMatch`.

        Nearly every line of a busy unit is a batch or access line of a few layouts, and what
        this returns depends on a line's digits only through where they are. The candidate
        search uses digit-free literals only (a literal is in the line iff it is in the line with
        every digit masked as "0"), the prefix regex and the exactness checks see a digit only as
        a digit, and a digit_blind() regex runs the same steps whatever the digits are. So the
        verdict is computed once per digit-masked line and kept: no rule (nothing to do), a
        BatchMatch, anything else (the exact path, `match()`), or, for a runtime regex that may
        tell digits apart, "run it".
        """
        memo = self._line_memo
        if memo is None or len(raw) > _MEMO_LINE_MAX:
            return self.match(clean_message(raw))
        key = raw.translate(_MASK_DIGITS)
        verdict = memo.get(key, _UNSEEN)
        if verdict is _UNSEEN:
            if len(memo) >= _MEMO_SIZE:
                memo.clear()
            verdict = memo[key] = self._line_verdict(raw)
        if verdict is None:
            return []
        if isinstance(verdict, BatchMatch):
            return verdict
        if isinstance(verdict, _Search):
            rule = verdict.rule
            found = rule.regex.search(raw[verdict.end :].decode("utf-8", "replace"))
            if found is None:
                return []
            batch = self._batch(rule, found)
            if batch is not None:
                return batch
        return self.match(clean_message(raw))

    def _line_verdict(self, raw: bytes) -> _Verdict:
        """What match_raw answers for every line with the digit-masked text of `raw`."""
        if raw.startswith(b"["):
            end = raw.find(b"] ", 1, _MEMO_PREFIX_MAX) + 2
            head = raw[:end].decode("utf-8", "replace")
            if end < 2 or _BRACKET_RE.fullmatch(head) is None:
                return _EXACT_PATH
        else:
            end = 0  # no prefix: the body is the line (unless a decoration starts it, below)
        body = raw[end:].decode("utf-8", "replace")
        if (
            "\x1b" in body  # ANSI codes or a progress bar: the line needs clean_message
            or "\r" in body
            or body.endswith("\n")
            or body.startswith(_DECORATION_WORDS)  # the body starts after the decoration
        ):
            return _EXACT_PATH
        candidates = self._candidates(body)
        if not candidates:
            return None
        rule = candidates[0]
        if len(candidates) > 1 or rule.id not in self._runtime_only:
            return _EXACT_PATH
        if rule.id not in self._digit_blind:
            return _Search(rule, end)
        found = rule.regex.search(body)
        if found is None:
            return None
        return self._batch(rule, found) or _EXACT_PATH

    def _batch(self, rule: Rule, found: re.Match[str]) -> BatchMatch | None:
        """The BatchMatch of a match of a runtime-only rule; None when it may fail to convert."""
        if not rule.deferrable(found):
            return None
        key = (rule.id, rule.fact_names(found))
        batch = self._batches.get(key)
        if batch is None:
            batch = self._batches[key] = BatchMatch(rule, key[1])
        return batch

    def _candidates(self, body: str) -> list[Rule]:
        """The rules whose anchored prefix and required literal `body` has, in match order.

        Only these can match; their regexes decide. The literal checks are `in` on the body
        (a fast substring search).
        """
        found: list[Rule] = []
        heads = self._heads.get(body[: self._head_len])
        if heads is not None:
            for prefix, rule in heads:
                if body.startswith(prefix) and rule.contains in body:
                    found.append(rule)
        for literal, rules in self._buckets:
            if literal in body:
                found.extend(rules)
        return found

    def _split(self, message: str) -> tuple[str, Rank]:
        """`split_prefix`, with the `[ts ranks] ` part looked up in a small memo."""
        if message.startswith("["):
            end = message.find("] ", 1, _MEMO_PREFIX_MAX) + 2
            if end > 1:
                key = message[:end]
                memo = self._prefix_memo
                if key in memo:
                    rank = memo[key]
                else:
                    if len(memo) >= _MEMO_SIZE:
                        memo.clear()
                    bracket = _BRACKET_RE.fullmatch(key)
                    ranks = bracket.group(1) if bracket is not None else ""
                    rank = None if bracket is None else _parse_rank(ranks) if ranks else _NO_RANK
                    memo[key] = rank
                if rank is None:
                    return message, _NO_RANK
                # The pre-logger decoration may follow the prefix (what _PREFIX_RE's tail does).
                if message.startswith(_DECORATION_WORDS, end):
                    decoration = _DECORATION_RE.match(message, end)
                    if decoration is not None:
                        end = decoration.end()
                return message[end:], rank
        return split_prefix(message)

    @staticmethod
    def _apply(rule: Rule, body: str, rank: Rank, matches: list[RuleMatch]) -> None:
        facts = rule.apply(body)
        if facts is not None:
            matches.append(RuleMatch(rule.id, MappingProxyType(facts), rank))


def default_rules_dir() -> Path:
    """The bundled rule pack: `rules/` of a checkout or editable install, else the installed copy."""
    checkout = Path(__file__).resolve().parent.parent / "rules"
    if checkout.is_dir():
        return checkout
    return Path(sys.prefix) / "share" / "sglang-sentinel" / "rules"


def load_rules(dirs: Sequence[Path]) -> RuleSet:
    """Load and validate every `*.yaml` rule file in `dirs`; raise RuleError listing every problem."""
    rules, problems = _load(dirs)
    if problems:
        raise RuleError(problems)
    return RuleSet(tuple(rules))


def check_rules(dirs: Sequence[Path]) -> list[str]:
    """Every problem in the rule files of `dirs` as `file:rule_id: message`; empty when all is fine."""
    return _load(dirs)[1]


# --- loading -------------------------------------------------------------------------------


# libyaml's parser when PyYAML has it: the pure-Python one is most of a short scan's rule load.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """A safe loader that rejects duplicate mapping keys, which PyYAML would silently collapse."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Hashable] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, Hashable):
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _load(dirs: Sequence[Path]) -> tuple[list[Rule], list[str]]:
    problems: list[str] = []
    merged: dict[str, Rule] = {}  # a later file's rule replaces an earlier one with the same id
    for directory in dirs:
        if not directory.is_dir():
            problems.append(f"{directory}:-: rules directory does not exist or is not a directory")
            continue
        files = sorted(
            (p for p in directory.glob("*.yaml") if p.name != POLICY_FILE and p.is_file()),
            key=lambda p: p.name,
        )
        for path in files:
            for rule in _load_file(path, problems):
                merged[rule.id] = rule
    rules = list(merged.values())
    _check_overlaps(rules, problems)
    return rules, problems


def _load_file(path: Path, problems: list[str]) -> list[Rule]:
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{where}:-: cannot read rule file: {exc}")
        return []
    try:
        document = yaml.load(text, Loader=_StrictLoader)  # a (C)SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problems.append(f"{where}:-: invalid YAML{at}: {exc.problem}")
        return []
    except (yaml.YAMLError, RecursionError) as exc:
        problems.append(f"{where}:-: invalid YAML: {exc}")
        return []
    if not isinstance(document, dict):
        problems.append(f"{where}:-: top level must be a mapping with `version: 1` and `rules:`")
        return []
    for key in sorted(set(map(str, document)) - _TOP_KEYS):
        problems.append(f"{where}:-: unknown top-level key {key!r} (allowed: version, rules)")
    version = document.get("version")
    if version != 1 or isinstance(version, bool):
        problems.append(f"{where}:-: `version` must be 1, found {version!r}")
    entries = document.get("rules")
    if not isinstance(entries, list):
        problems.append(f"{where}:-: `rules` must be a list of rules")
        return []
    rules: list[Rule] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        rule = _parse_rule(where, index, entry, seen, problems)
        if rule is not None:
            rules.append(rule)
    return rules


def _parse_rule(
    where: str, index: int, entry: object, seen: set[str], problems: list[str]
) -> Rule | None:
    if not isinstance(entry, dict):
        problems.append(f"{where}:-: rules[{index}] must be a mapping")
        return None
    rule_id = entry.get("id")
    label = rule_id if isinstance(rule_id, str) and rule_id else "-"
    before = len(problems)

    def bad(message: str) -> None:
        problems.append(f"{where}:{label}: {message}")

    if label == "-":
        bad(f"rules[{index}] has no `id`")
    elif not _ID_RE.match(label):
        bad("id must match [a-z][a-z0-9_]*")
    elif label in seen:
        bad("duplicate rule id in this file")
    seen.add(label)
    for key in sorted(set(map(str, entry)) - _RULE_KEYS):
        bad(f"unknown key {key!r} (allowed: {', '.join(sorted(_RULE_KEYS))})")

    description = entry.get("description", "")
    if not isinstance(description, str):
        bad("`description` must be a string")
    contains = entry.get("contains")
    if not isinstance(contains, str) or not contains:
        bad("`contains` must be a non-empty literal string")
    regex = _compile(entry.get("regex"), bad)
    scope = entry.get("scope", "startup")
    if scope not in SCOPES:
        bad(f"`scope` must be startup or runtime, found {scope!r}")
    facts = _parse_facts(entry.get("facts", {}), regex, bad)
    samples, no_match = _parse_samples(entry.get("samples"), bad)
    also = entry.get("also_matches", [])
    if not isinstance(also, list) or not all(isinstance(a, str) for a in also):
        bad("`also_matches` must be a list of rule ids")
        also = []

    if len(problems) > before or regex is None or facts is None:
        return None
    rule = Rule(
        id=label,
        contains=cast(str, contains),
        regex=regex,
        facts=facts,
        scope=cast(Scope, scope),
        description=cast(str, description),
        samples=samples,
        no_match=no_match,
        also_matches=frozenset(also),
        source=where,
    )
    _check_samples(rule, bad)
    return rule if len(problems) == before else None


def _compile(pattern: object, bad: Any) -> re.Pattern[str] | None:
    if not isinstance(pattern, str) or not pattern:
        bad("`regex` must be a non-empty string")
        return None
    try:
        return re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        bad(f"regex does not compile: {exc}")
        return None


def _parse_facts(
    raw: object, regex: re.Pattern[str] | None, bad: Any
) -> tuple[FactSpec, ...] | None:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        bad("`facts` must be a mapping of fact name to type")
        return None
    specs: list[FactSpec] = []
    ok = True
    for name, definition in raw.items():
        if not isinstance(name, str) or not _ID_RE.match(name):
            bad(f"fact name {name!r} must match [a-z][a-z0-9_]*")
            ok = False
            continue
        spec = _parse_fact(name, definition, regex, bad)
        if spec is None:
            ok = False
        else:
            specs.append(spec)
    return tuple(specs) if ok else None


def _parse_fact(
    name: str, definition: object, regex: re.Pattern[str] | None, bad: Any
) -> FactSpec | None:
    if isinstance(definition, str):
        definition = {"type": definition}
    if not isinstance(definition, dict):
        bad(f"fact {name!r} must be a type name or a mapping with `type`")
        return None
    unknown = sorted(set(map(str, definition)) - _FACT_KEYS)
    if unknown:
        bad(f"fact {name!r} has unknown keys {unknown} (allowed: type, group, value)")
        return None
    kind = definition.get("type")
    if kind not in FACT_TYPES:
        bad(f"fact {name!r} has invalid type {kind!r} (one of {', '.join(sorted(FACT_TYPES))})")
        return None
    fact_type = cast(FactType, kind)
    if "value" in definition:
        if "group" in definition:
            bad(f"fact {name!r} has both `group` and `value`; a constant takes no group")
            return None
        constant = _constant(fact_type, definition["value"])
        if constant is None:
            bad(f"fact {name!r}: constant {definition['value']!r} is not a valid {kind}")
            return None
        return FactSpec(name, fact_type, None, constant)
    group = definition.get("group", name)
    if not isinstance(group, str):
        bad(f"fact {name!r}: `group` must be a group name")
        return None
    if regex is not None and group not in regex.groupindex:
        bad(f"fact {name!r} needs the named group (?P<{group}>...) in the regex")
        return None
    return FactSpec(name, fact_type, group)


def _constant(kind: FactType, value: object) -> FactValue | None:
    if kind == "bool":
        return value if isinstance(value, bool) else None
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if kind in ("float", "gb"):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return float(cast(float, value)) if ok else None
    if kind == "list":
        return (value,) if isinstance(value, str) else None
    return value if isinstance(value, str) else None


def _parse_samples(raw: object, bad: Any) -> tuple[tuple[Sample, ...], tuple[str, ...]]:
    if not isinstance(raw, dict):
        bad("`samples` with at least one `match` sample is required")
        return (), ()
    for key in sorted(set(map(str, raw)) - _SAMPLE_KEYS):
        bad(f"samples: unknown key {key!r} (allowed: match, no_match)")
    positives: list[Sample] = []
    raw_match = raw.get("match")
    if not isinstance(raw_match, list) or not raw_match:
        bad("at least one positive sample (`samples.match`) is required")
    else:
        for n, item in enumerate(raw_match, 1):
            if not isinstance(item, dict) or not isinstance(item.get("line"), str):
                bad(f"positive sample {n} must be a mapping with `line` and `facts`")
                continue
            extra = sorted(set(map(str, item)) - {"line", "facts"})
            facts = item.get("facts", {})
            if extra or not isinstance(facts, dict):
                bad(f"positive sample {n}: only `line` and a `facts` mapping are allowed")
                continue
            positives.append(Sample(item["line"], facts))
    negatives: list[str] = []
    raw_no = raw.get("no_match", [])
    if not isinstance(raw_no, list) or not all(isinstance(x, str) for x in raw_no):
        bad("`samples.no_match` must be a list of lines")
    else:
        negatives = list(raw_no)
    return tuple(positives), tuple(negatives)


def _match_line(rule: Rule, line: str) -> dict[str, FactValue] | None:
    """The facts `rule` yields for a full line, through the same path as RuleSet.match."""
    body, _ = split_prefix(line)
    if rule.contains not in body:
        return None
    return rule.apply(body)


def _shown(line: str) -> str:
    return repr(line if len(line) <= _SAMPLE_SHOWN else line[:_SAMPLE_SHOWN] + "...")


def _check_samples(rule: Rule, bad: Any) -> None:
    for n, sample in enumerate(rule.samples, 1):
        got = _match_line(rule, sample.line)
        if got is None:
            bad(
                f"positive sample {n} does not match (is `contains` in the body and does the "
                f"regex match after the prefix is stripped?): {_shown(sample.line)}"
            )
            continue
        diff = _fact_diff(got, sample.facts)
        if diff:
            bad(
                f"positive sample {n} yields wrong facts ({'; '.join(diff)}): {_shown(sample.line)}"
            )
    for n, line in enumerate(rule.no_match, 1):
        if _match_line(rule, line) is not None:
            bad(f"negative sample {n} matches this rule but must not: {_shown(line)}")


def _fact_diff(got: Mapping[str, FactValue], expected: Mapping[str, Any]) -> list[str]:
    diff: list[str] = []
    for name in sorted(set(got) | set(map(str, expected))):
        if name not in expected:
            diff.append(f"{name}={got[name]!r} not listed")
        elif name not in got:
            diff.append(f"{name} expected {expected[name]!r} but not produced")
        elif not _same(got[name], expected[name]):
            diff.append(f"{name}={got[name]!r}, expected {expected[name]!r}")
    return diff


def _same(actual: FactValue, expected: object) -> bool:
    """Type-strict equality; floats compare exactly as both sides parse `20.66`."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual is expected
    if isinstance(actual, float):
        return isinstance(expected, int | float) and float(expected) == actual
    if isinstance(actual, int):
        return isinstance(expected, int) and expected == actual
    if isinstance(actual, tuple):
        if isinstance(expected, str):
            return actual == (expected,)
        return isinstance(expected, list) and tuple(expected) == actual
    return isinstance(expected, str) and expected == actual


def _check_overlaps(rules: list[Rule], problems: list[str]) -> None:
    """A positive sample of one rule must not silently match another rule too.

    Goes through RuleSet.match, so the pre-filters are checked against every sample as well.
    """
    ids = {rule.id for rule in rules}
    for rule in rules:
        for other_id in sorted(rule.also_matches - ids):
            problems.append(
                f"{rule.source}:{rule.id}: also_matches names unknown rule {other_id!r}"
            )
    rule_set = RuleSet(tuple(rules))
    lines_of = {rule.id: {sample.line for sample in rule.samples} for rule in rules}
    for rule in rules:
        for n, sample in enumerate(rule.samples, 1):
            matched = [m.rule_id for m in rule_set.match(sample.line)]
            if rule.id not in matched:
                problems.append(
                    f"{rule.source}:{rule.id}: positive sample {n} is missed by the rule set's "
                    f"pre-filter (please report this bug): {_shown(sample.line)}"
                )
            for other_id in matched:
                if (
                    other_id != rule.id
                    and other_id not in rule.also_matches
                    and sample.line not in lines_of[other_id]
                ):
                    problems.append(
                        f"{rule.source}:{rule.id}: positive sample {n} also matches rule "
                        f"{other_id!r}; tighten one regex, add the line to {other_id}'s samples "
                        f"or list {other_id} in also_matches: {_shown(sample.line)}"
                    )
