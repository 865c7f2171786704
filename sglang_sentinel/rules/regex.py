"""The rule regex engine: RE2, whose matching time is linear in the line whatever the pattern.

Rules are user-written and run on every journal line, so a pattern must never be able to stall
the daemon: with a backtracking engine `(a+)+$` on one 35-character line pins a core. RE2 (the
engine of mtail and of Go) has no backtracking and so no catastrophic pattern, and its
semantics are its own, not an interpreter's (CPython 3.11.2 never matches a possessive repeat
of a group holding an alternation, gh-106052). What RE2 cannot run (backreferences,
lookarounds, possessive quantifiers, atomic groups) is refused at load time, naming the
construct, so `sentinel rules check` reports it as `file:rule_id: ...`.

The search calls google-re2's engine object (`re2._re2.RE2.Match`) on UTF-8 bytes directly:
its `re`-like wrapper converts every offset back to characters through a generator and costs
about 30 times the engine call per search; the rules need only the named groups' text.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import re2

_engine: Any = re2._re2  # google-re2's compiled module: RE2 objects and their Match()
_UNANCHORED: Final = _engine.RE2.Anchor.UNANCHORED
_NO_SPAN: Final = (-1, -1)

# RE2's parse errors, as a rule author would name the construct.
_POSSESSIVE: Final = "a possessive quantifier (`*+`, `++`, `?+`, `{n,m}+`)"
_UNSUPPORTED: Final = (
    ("invalid perl operator: (?=", "a lookahead `(?=...)`"),
    ("invalid perl operator: (?!", "a negative lookahead `(?!...)`"),
    ("invalid perl operator: (?<=", "a lookbehind `(?<=...)`"),
    ("invalid perl operator: (?<!", "a negative lookbehind `(?<!...)`"),
    ("invalid perl operator: (?>", "an atomic group `(?>...)`"),
    ("invalid perl operator: (?#", "a comment group `(?#...)`"),
    ("invalid perl operator: (?(", "a conditional group `(?(...)...)`"),
    ("invalid perl operator: (?P", "a named backreference `(?P=name)`"),
    ("invalid perl operator: (?x", "verbose mode `(?x)`"),
    ("invalid escape sequence: \\Z", "`\\Z` (RE2 spells the end of the text `\\z`)"),
)


class RegexError(ValueError):
    """A pattern the engine cannot run; the message names the construct."""


def _explain(error: str) -> str:
    construct = next((name for prefix, name in _UNSUPPORTED if error.startswith(prefix)), None)
    if error.startswith("bad repetition operator: ") and error.endswith("+"):
        construct = _POSSESSIVE
    elif error.startswith("invalid escape sequence: \\") and error[-1:].isdigit():
        construct = f"a backreference (`{error.rsplit(' ', 1)[-1]}`)"
    if construct is None:
        return f"regex does not compile: {error} (RE2 syntax, see docs/architecture.md)"
    return (
        f"regex uses {construct}, which the linear-time engine (RE2) cannot run; "
        "rewrite the rule without it"
    )


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # the error comes back as RegexError; nothing goes to stderr
    return options


class RuleRegex:
    """A compiled rule regex: `search` a line body, get the named groups' text."""

    __slots__ = ("_names", "_regexp", "groupindex", "pattern")

    def __init__(self, pattern: str) -> None:
        try:
            encoded = pattern.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RegexError(f"regex is not valid text: {exc}") from None
        regexp = _engine.RE2(encoded, _options())
        if not regexp.ok():
            raise RegexError(_explain(bytes(regexp.error()).decode("utf-8", "replace")))
        self.pattern: Final = pattern
        self._regexp = regexp
        index = {name.decode(): number for name, number in regexp.NamedCapturingGroups()}
        self.groupindex: Final[Mapping[str, int]] = MappingProxyType(index)
        self._names: Final = tuple(index.items())

    def search(self, text: str) -> Found | None:
        """The leftmost match in `text` (Perl's leftmost-first choice of groups), or None."""
        data = text.encode("utf-8", "surrogatepass")
        spans = self._regexp.Match(_UNANCHORED, data, 0, len(data))
        if spans[0] == _NO_SPAN:
            return None
        return Found(data, spans, self._names)

    def __repr__(self) -> str:
        return f"RuleRegex({self.pattern!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RuleRegex) and other.pattern == self.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)


class Found:
    """One match: the named groups' text, and the match's extent in UTF-8 bytes."""

    __slots__ = ("_data", "_names", "_spans")

    def __init__(
        self, data: bytes, spans: list[tuple[int, int]], names: tuple[tuple[str, int], ...]
    ) -> None:
        self._data = data
        self._spans = spans
        self._names = names

    def group(self, name: str) -> str | None:
        """The text of named group `name`, or None when it did not take part in the match."""
        for known, number in self._names:
            if known == name:
                return self._text(number)
        raise IndexError(f"no such group: {name!r}")

    def groupdict(self) -> dict[str, str | None]:
        """Every named group's text (None for one that did not take part)."""
        return {name: self._text(number) for name, number in self._names}

    @property
    def size(self) -> int:
        """The match's length in UTF-8 bytes (at least its length in characters)."""
        start, end = self._spans[0]
        return int(end - start)

    def _text(self, number: int) -> str | None:
        start, end = self._spans[number]
        if start < 0:
            return None
        # RE2 matches whole UTF-8 sequences, so a group's span never splits a character.
        return self._data[start:end].decode("utf-8", "surrogatepass")
