"""Rules and rule sets: the regex rules that turn SGLang log lines into facts, and matching.

A `Rule` has a required literal (`contains`), a regex applied to the line *body* (the SGLang
`[ts TPn] ` prefix and the pre-logger `INFO server_args.py:1835: ` decoration stripped) and typed
facts. A `RuleSet` (immutable) matches a journal message against every rule.

Rule files are read and validated by `files.py` (`load_rules`, `check_rules`); the pipeline's
per-line hot path, memoised, is a matcher (`matcher.py`); the prefix and regex analysis both
rely on is in `shapes.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from sglang_sentinel.errors import RuleError
from sglang_sentinel.facts import RUNTIME_FACTS, FactType
from sglang_sentinel.model import FactValue, Rank, RuleMatch
from sglang_sentinel.rules.regex import Found, RuleRegex
from sglang_sentinel.rules.shapes import (
    DEFERRABLE_SPAN,
    NO_RANK,
    NUMBER_SHAPES,
    PREFIX_MAX,
    anchored_prefix,
    digit_blind,
    group_pattern,
    split_prefix,
    wrapper_end,
)

__all__ = [
    "SCOPES",
    "BatchMatch",
    "FactSpec",
    "Rule",
    "RuleSet",
    "Sample",
    "Scope",
    "convert",
]

Scope = Literal["startup", "runtime"]

SCOPES: Final[frozenset[str]] = frozenset({"startup", "runtime"})
_ASCII_DIGITS: Final = "0123456789"
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
        """The facts of a raw line that `MemoMatcher.match_line` answered with a BatchMatch of this
        rule."""
        # It answers so only for a line whose body follows a valid "[ts ranks] " prefix or
        # starts the line (after any wrappers), with nothing for clean_message() to change.
        start = wrapper_end(raw)
        if raw.startswith(b"[", start):
            end = raw.find(b"] ", start + 1, start + PREFIX_MAX) + 2
        else:
            end = start
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


@dataclass(frozen=True, slots=True, eq=False)  # eq=False: hashed by identity, cheaply
class BatchMatch:
    """A matcher's answer for a batch line that matches `rule`: one match, whose facts
    `rule.facts_of_raw(line)` gives, cannot fail to give, and are exactly `facts`.

    Batch lines only set runtime facts, so of several lines with one BatchMatch only the newest
    can show in the end: the others set the same facts and are overwritten.
    """

    rule: Rule
    facts: frozenset[str]


@dataclass(frozen=True, slots=True)
class RuleSet:
    """An immutable, validated set of rules that turns a journal message into rule matches.

    Rules whose regex is `^`-anchored with a literal start ("head" rules, most of the pack) are
    indexed by their first `_head_len` characters, so a line costs a dict lookup on its body
    head whatever its length; the others are grouped by their required literal, one `in` check
    per literal. Both are necessary conditions only: a candidate's regex decides.

    Everything here is computed once from the rules; the memos of the hot path live in a
    matcher (rules/matcher.py), never in the rule set.
    """

    rules: tuple[Rule, ...]
    # The words that make a startup line a downgrade message for the ledger (ledger.py): the
    # rule files' `downgrade_words:`, merged.
    downgrade_words: tuple[str, ...] = ()
    _by_id: Mapping[str, Rule] = field(init=False, repr=False, compare=False)
    _head_len: int = field(init=False, repr=False, compare=False)
    _heads: Mapping[str, tuple[tuple[str, Rule], ...]] = field(
        init=False, repr=False, compare=False
    )
    _buckets: tuple[tuple[str, tuple[Rule, ...]], ...] = field(
        init=False, repr=False, compare=False
    )
    # Rules whose facts are all runtime facts (a batch line's rule), and those of them whose
    # regex is digit_blind(): the ones a matcher may answer per digit-masked line.
    runtime_only: frozenset[str] = field(init=False, repr=False, compare=False)
    digit_blind: frozenset[str] = field(init=False, repr=False, compare=False)
    # No literal a candidate search depends on has a digit: the candidates of a line are those
    # of the line with its digits masked.
    digit_free: bool = field(init=False, repr=False, compare=False)

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
        object.__setattr__(self, "runtime_only", runtime_only)
        object.__setattr__(
            self,
            "digit_blind",
            frozenset(i for i in runtime_only if digit_blind(by_id[i].regex.pattern)),
        )
        literals = [r.contains for r in rules] + [p for p in prefixes.values() if p]
        digit_free = not any(c in _ASCII_DIGITS for text in literals for c in text)
        object.__setattr__(self, "digit_free", digit_free)

    @property
    def ids(self) -> tuple[str, ...]:
        """Every rule id, in load order."""
        return tuple(self._by_id)

    def match(self, message: str) -> list[RuleMatch]:
        """Every rule that matches one journal message, with its typed facts and the line's rank."""
        body, rank = split_prefix(message)
        return self.match_body(body, rank)

    def match_body(self, body: str, rank: Rank = NO_RANK) -> list[RuleMatch]:
        """Every rule that matches an already-stripped line body."""
        matches: list[RuleMatch] = []
        for rule in self.candidates(body):
            facts = rule.apply(body)
            if facts is not None:
                matches.append(RuleMatch(rule.id, MappingProxyType(facts), rank))
        return matches

    def candidates(self, body: str) -> list[Rule]:
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
