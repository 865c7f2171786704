"""Rules and rule sets: the regex rules that turn SGLang log lines into facts, and matching.

A `Rule` has a required literal (`contains`), a regex applied to the line *body* (the SGLang
`[ts TPn] ` prefix and the pre-logger `INFO server_args.py:1835: ` decoration stripped) and typed
facts. A `RuleSet` matches a journal message against every rule: `match` for a message,
`match_raw` for a raw journal line, the pipeline's hot path.

The pipeline calls `RuleSet.match_raw` on nearly every journal line; almost no line matches a
startup rule and nearly all the rest are batch lines of a few layouts, so what a line gets is
memoised per digit-masked line (see `match_raw`).

Rule files are read and validated by `rule_files` (`load_rules`, `check_rules`), which builds
on this module; the prefix and regex analysis the matcher relies on is in `rule_shapes`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from sglang_sentinel.errors import RuleError
from sglang_sentinel.model import RUNTIME_FACTS, FactValue, Rank, RuleMatch
from sglang_sentinel.rules.regex import Found, RuleRegex
from sglang_sentinel.rules.shapes import (
    BRACKET_RE,
    DECORATION_RE,
    DECORATION_WORDS,
    DEFERRABLE_SPAN,
    NO_RANK,
    NUMBER_SHAPES,
    PREFIX_MAX,
    anchored_prefix,
    digit_blind,
    group_pattern,
    parse_rank,
    split_prefix,
)
from sglang_sentinel.text import clean_message

__all__ = [
    "FACT_TYPES",
    "SCOPES",
    "BatchMatch",
    "FactSpec",
    "FactType",
    "Rule",
    "RuleSet",
    "Sample",
    "Scope",
    "convert",
]

FactType = Literal["int", "float", "gb", "bool", "str", "list"]
Scope = Literal["startup", "runtime"]

FACT_TYPES: Final[frozenset[str]] = frozenset({"int", "float", "gb", "bool", "str", "list"})
SCOPES: Final[frozenset[str]] = frozenset({"startup", "runtime"})
_MEMO_SIZE: Final = 4096
# Longer lines (server_args, tracebacks) are neither batch lines nor frequent; not memoising them
# keeps the memo a few MB at most.
_MEMO_LINE_MAX: Final = 1024
_ASCII_DIGITS: Final = "0123456789"
# bytes.translate table: every ASCII digit becomes "0" (match_raw's memo key).
_MASK_DIGITS: Final = bytes.maketrans(b"0123456789", b"0000000000")
_BOOLS: Final[Mapping[str, bool]] = MappingProxyType(
    {"True": True, "true": True, "1": True, "False": False, "false": False, "0": False}
)


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
    regex: RuleRegex
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
    # than DEFERRABLE_SPAN. See `deferrable`.
    _numbers_only: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        constants = tuple((f.name, f.constant) for f in self.facts if f.group is None)
        plan = tuple(
            (f.name, f.group, _CONVERTERS[f.type]) for f in self.facts if f.group is not None
        )
        object.__setattr__(self, "_constants", constants)
        object.__setattr__(self, "_plan", plan)
        numbers_only = bool(plan) and all(
            group_pattern(self.regex.pattern, group) in NUMBER_SHAPES.get(spec.type, ())
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

    def deferrable(self, found: Found) -> bool:
        """True when `facts_of(found)` cannot fail, so a caller may keep the line and convert it
        later (or never, when a newer line replaces it)."""
        return self._numbers_only and found.size <= DEFERRABLE_SPAN

    def fact_names(self, found: Found) -> frozenset[str]:
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
        end = raw.find(b"] ", 1, PREFIX_MAX) + 2 if raw.startswith(b"[") else 0
        found = self.regex.search(raw[end:].decode("utf-8", "replace"))
        return None if found is None else self.facts_of(found)

    def facts_of(self, found: Found) -> dict[str, FactValue] | None:
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


def _to_int(raw: str) -> int:
    # int() and float() accept any Unicode digit ("٤٨" is 48); a number in a log line is ASCII.
    if not raw.isascii():
        raise ValueError(f"non-ASCII digits in {raw!r}")
    return int(raw)


def _to_float(raw: str) -> float:
    if not raw.isascii():
        raise ValueError(f"non-ASCII digits in {raw!r}")
    return float(raw)


def _to_gb(raw: str) -> float:
    return _to_float(raw.removesuffix("GiB").removesuffix("GB").strip())


def _to_bool(raw: str) -> bool:
    return _BOOLS[raw.strip()]  # KeyError for anything else


def _to_item(raw: str) -> tuple[str, ...]:
    return (raw,)


_CONVERTERS: Final[Mapping[str, Callable[[str], FactValue]]] = MappingProxyType(
    {
        "int": _to_int,
        "float": _to_float,
        "gb": _to_gb,
        "bool": _to_bool,
        "str": str,
        "list": _to_item,
    }
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
        prefixes = {rule.id: anchored_prefix(rule.regex.pattern) for rule in rules}
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
            frozenset(i for i in runtime_only if digit_blind(by_id[i].regex.pattern)),
        )
        object.__setattr__(self, "_prefix_memo", {})
        # The memo is exact only while no literal the candidates depend on has a digit.
        literals = [r.contains for r in rules] + [p for p in prefixes.values() if p]
        digit_free = not any(c in _ASCII_DIGITS for text in literals for c in text)
        object.__setattr__(self, "_line_memo", {} if digit_free else None)
        object.__setattr__(self, "_batches", {})

    @property
    def ids(self) -> tuple[str, ...]:
        """Every rule id, in load order."""
        return tuple(self._by_id)

    def match(self, message: str) -> list[RuleMatch]:
        """Every rule that matches one journal message, with its typed facts and the line's rank."""
        body, rank = self._split(message)
        return self.match_body(body, rank)

    def match_body(self, body: str, rank: Rank = NO_RANK) -> list[RuleMatch]:
        """Every rule that matches an already-stripped line body."""
        matches: list[RuleMatch] = []
        for rule in self._candidates(body):
            self._apply(rule, body, rank, matches)
        return matches

    def line_memo(self) -> tuple[Mapping[bytes, object], bytes] | None:
        """`match_raw`'s memo (digit-masked line -> verdict) and its mask table, or None when
        it has none: a caller that finds a line's key mapped to a BatchMatch or to None may take
        that as `match_raw`'s answer (a BatchMatch, or no match) without the call."""
        if self._line_memo is None:
            return None
        return self._line_memo, _MASK_DIGITS

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
            end = raw.find(b"] ", 1, PREFIX_MAX) + 2
            head = raw[:end].decode("utf-8", "replace")
            if end < 2 or BRACKET_RE.fullmatch(head) is None:
                return _EXACT_PATH
        else:
            end = 0  # no prefix: the body is the line (unless a decoration starts it, below)
        body = raw[end:].decode("utf-8", "replace")
        if (
            "\x1b" in body  # ANSI codes or a progress bar: the line needs clean_message
            or "\r" in body
            or body.endswith("\n")
            or body.startswith(DECORATION_WORDS)  # the body starts after the decoration
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

    def _batch(self, rule: Rule, found: Found) -> BatchMatch | None:
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
            end = message.find("] ", 1, PREFIX_MAX) + 2
            if end > 1:
                key = message[:end]
                memo = self._prefix_memo
                if key in memo:
                    rank = memo[key]
                else:
                    if len(memo) >= _MEMO_SIZE:
                        memo.clear()
                    bracket = BRACKET_RE.fullmatch(key)
                    ranks = bracket.group(1) if bracket is not None else ""
                    rank = None if bracket is None else parse_rank(ranks) if ranks else NO_RANK
                    memo[key] = rank
                if rank is None:
                    return message, NO_RANK
                # The pre-logger decoration may follow the prefix (what _PREFIX_RE's tail does).
                if message.startswith(DECORATION_WORDS, end):
                    decoration = DECORATION_RE.match(message, end)
                    if decoration is not None:
                        end = decoration.end()
                return message[end:], rank
        return split_prefix(message)

    @staticmethod
    def _apply(rule: Rule, body: str, rank: Rank, matches: list[RuleMatch]) -> None:
        facts = rule.apply(body)
        if facts is not None:
            matches.append(RuleMatch(rule.id, MappingProxyType(facts), rank))
