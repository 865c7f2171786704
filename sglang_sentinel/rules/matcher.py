"""Matchers: a raw journal line -> what the rules say about it. One interface, two paths.

The pipeline asks every line of a unit what the rules make of it, so this is the hot path.

- `ExactMatcher` is the definition: `RuleSet.match(clean_message(raw))`, every candidate's regex
  run on every line.
- `MemoMatcher` gives the same answers, memoised per digit-masked line. Nearly every line of a
  busy unit is a batch or access line of a few layouts, and what the rules make of a line depends
  on its digits only through where they are (see `MemoMatcher.match_line`). It also answers a
  batch line (one runtime rule, only runtime facts, conversion cannot fail) with a `BatchMatch`,
  whose facts the caller converts only if that line is still the newest of its kind.

tests/rules/test_matcher.py checks, property-based, that the two agree on any line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from sglang_sentinel.model import Rank, RuleMatch
from sglang_sentinel.rules.regex import Found
from sglang_sentinel.rules.ruleset import BatchMatch, Rule, RuleSet
from sglang_sentinel.rules.shapes import (
    BRACKET_RE,
    DECORATION_RE,
    DECORATION_WORDS,
    NO_RANK,
    PREFIX_MAX,
    parse_rank,
    split_prefix,
    wrapper_end,
)
from sglang_sentinel.text import clean_message

# What a matcher answers for a raw line: the rule matches, or one deferred batch-line match.
Verdict = list[RuleMatch] | BatchMatch

# Entries per memo before it is cleared (a few MB at most).
_MEMO_SIZE: Final = 4096
# Longer lines (server_args, tracebacks) are neither batch lines nor frequent; not memoising them
# keeps the memo small.
_MEMO_LINE_MAX: Final = 1024
# bytes.translate table: every ASCII digit becomes "0" (the memo key).
MASK_DIGITS: Final = bytes.maketrans(b"0123456789", b"0000000000")


class Matcher(Protocol):
    """What the startup tracker needs of the rules."""

    @property
    def rules(self) -> RuleSet: ...

    def match(self, message: str) -> list[RuleMatch]:
        """The matches of a cleaned message (a JournalEntry's)."""
        ...

    def match_line(self, raw: bytes) -> Verdict:
        """The matches of a raw MESSAGE, or a BatchMatch for a batch line."""
        ...

    def known(self) -> tuple[Mapping[bytes, object], bytes] | None:
        """A read-only view of answers already known, keyed by the line translated with the
        returned table: a key mapped to None means "no rule matches", to a BatchMatch means
        `match_line`'s answer is that BatchMatch. None when there is no such view."""
        ...


@dataclass(frozen=True, slots=True)
class ExactMatcher:
    """The definition: every line cleaned, split and tried against every candidate rule."""

    rules: RuleSet

    def match(self, message: str) -> list[RuleMatch]:
        return self.rules.match(message)

    def match_line(self, raw: bytes) -> Verdict:
        return self.rules.match(clean_message(raw))

    def known(self) -> None:
        return None


class _ExactPath:
    """A line verdict: lines with this digit-masked text take the exact path."""


@dataclass(frozen=True, slots=True)
class _Search:
    """A line verdict: at most `rule` (a runtime rule whose regex may tell digits apart) matches;
    its regex decides on the body, which starts at `end`."""

    rule: Rule
    end: int


_EXACT_PATH: Final = _ExactPath()
_UNSEEN: Final = _ExactPath()  # a memo miss (any object that is not a verdict)
_LineVerdict = BatchMatch | _Search | _ExactPath | None


class MemoMatcher:
    """`ExactMatcher`'s answers, memoised: per digit-masked line, and per `[ts ranks] ` prefix."""

    __slots__ = ("_batches", "_line_memo", "_prefix_memo", "rules")

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        # "[ts ranks] " -> its rank, or None when it is not an SGLang prefix. Every line of a
        # second shares one, so this saves the prefix regex on nearly every line.
        self._prefix_memo: dict[str, Rank | None] = {}
        # digit-masked raw line -> verdict; None when the rules make it inexact (a literal with
        # a digit: the candidates of a line are then not those of its masked copy).
        self._line_memo: dict[bytes, _LineVerdict] | None = {} if rules.digit_free else None
        # (rule id, facts) -> its one BatchMatch, so that a memo clear does not make new ones.
        self._batches: dict[tuple[str, frozenset[str]], BatchMatch] = {}

    def known(self) -> tuple[Mapping[bytes, object], bytes] | None:
        if self._line_memo is None:
            return None
        return self._line_memo, MASK_DIGITS

    def match(self, message: str) -> list[RuleMatch]:
        body, rank = self._split(message)
        return self.rules.match_body(body, rank)

    def match_line(self, raw: bytes) -> Verdict:
        """`ExactMatcher.match_line`, except for a batch line (its one candidate is a runtime
        rule with only runtime facts) that matches it and converts: then a `BatchMatch`.

        The candidate search uses digit-free literals only (a literal is in the line iff it is
        in the line with every digit masked as "0"), the prefix regex and the exactness checks
        see a digit only as a digit, and a digit_blind() regex runs the same steps whatever the
        digits are. So the verdict is computed once per digit-masked line and kept: no rule
        (nothing to do), a BatchMatch, anything else (the exact path), or, for a runtime regex
        that may tell digits apart, "run it".
        """
        memo = self._line_memo
        if memo is None or len(raw) > _MEMO_LINE_MAX:
            return self.match(clean_message(raw))
        key = raw.translate(MASK_DIGITS)
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

    def _line_verdict(self, raw: bytes) -> _LineVerdict:
        """What match_line answers for every line with the digit-masked text of `raw`."""
        start = wrapper_end(raw)  # after what split_prefix strips (docker -t, CRI, Ray, compose)
        if raw.startswith(b"[", start):
            end = raw.find(b"] ", start + 1, start + PREFIX_MAX) + 2
            head = raw[start:end].decode("utf-8", "replace")
            if end < start + 2 or BRACKET_RE.fullmatch(head) is None:
                return _EXACT_PATH
        else:
            end = start  # no prefix: the body is the line (unless a decoration starts it, below)
        body = raw[end:].decode("utf-8", "replace")
        if (
            "\x1b" in body  # ANSI codes or a progress bar: the line needs clean_message
            or "\r" in body
            or body.endswith("\n")
            or body.startswith(DECORATION_WORDS)  # the body starts after the decoration
        ):
            return _EXACT_PATH
        candidates = self.rules.candidates(body)
        if not candidates:
            return None
        rule = candidates[0]
        if len(candidates) > 1 or rule.id not in self.rules.runtime_only:
            return _EXACT_PATH
        if rule.id not in self.rules.digit_blind:
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
                # The pre-logger decoration may follow the prefix (what split_prefix's does).
                if message.startswith(DECORATION_WORDS, end):
                    decoration = DECORATION_RE.match(message, end)
                    if decoration is not None:
                        end = decoration.end()
                return message[end:], rank
        return split_prefix(message)
