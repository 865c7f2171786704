"""The startup ledger: every line of a startup's window as a template, downgrades apart.

SGLang says what it turns off or falls back from in fixed f-strings ("X is disabled because
...", "falling back to ...", "Performance might be sub-optimal!"), a few hundred of them per
release, far more than rules name. The startup tracker hands every line of the startup window
(start to ready or failure; not batch lines, and not `server_args`, access lines or tqdm bars,
`_NOT_MESSAGES`) to a `LogLedger`, which masks it to a template (`template_of`: numbers, sizes,
hex ids, UUIDs, IPs, paths, URLs, quoted values and lists masked, so another pid, figure or
list length is the same template, while another reason is another one) and keeps one redacted
example line and the ranks that printed it. A line with a word of the rule pack's
`downgrade_words` is of kind `downgrade`; any other is `other` (warnings, errors and the rest
of the startup's shape). `log_diff` (logtemplates.py, with the mask) compares a startup's
templates with its baseline's: templates the baseline never printed are new, and the
`new_downgrade_message` check reports the new downgrade ones; the rest is information.

Bounds per startup: TEMPLATES_KEPT downgrade and OTHER_KEPT other templates, OTHER_LINES
other lines and OTHER_CHARS of their characters masked at most (a startup that never becomes
ready, or one whose ready line no rule knows, must not mask every line of its life: 1,000
lines cost 0.1-0.5 s), RANKS_KEPT ranks per template, EXAMPLE_CHARS of each example.

The mask is deterministic and versioned (`MASK_VERSION`): a baseline stored under another
version is re-masked from its examples, never compared template for template.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..logtemplates import BODY_CHARS, DOWNGRADE, MASK_VERSION, OTHER, template_of
from ..model import Rank, RuleMatch
from ..redact import scrub_head
from ..rules import split_prefix

# Bounds per startup: distinct templates kept (a line of a further one is counted in
# `dropped`, or `other_dropped`, as is an other line past the budgets), ranks remembered per
# template, characters of the example kept.
TEMPLATES_KEPT: Final = 64
OTHER_KEPT: Final = 128
OTHER_LINES: Final = 1_000
OTHER_CHARS: Final = 400_000  # each line counted up to the characters it is redacted in
RANKS_KEPT: Final = 256  # one host's ranks: 8-16 GPUs, each up to one DP, TP and EP label
EXAMPLE_CHARS: Final = 400

# A long line is redacted in its first _SCRUB_CHARS only (`redact.scrub_head`: a 48 KiB line
# costs 12 ms to redact whole, 1 ms so), and only the first BODY_CHARS of that are kept.
_SCRUB_CHARS: Final = 2 * BODY_CHARS
# Startup-window lines that are not a message of the startup: the resolved settings (their
# own diff reads them), batch lines in a layout no batch rule knows (the known ones never
# reach the ledger), uvicorn access lines (a warm-up or health request) and tqdm bars.
_NOT_MESSAGES: Final = (
    "server_args=",
    "ServerArgs(",
    "Decode batch",
    "Prefill batch",
    '" 200 ',
    ' HTTP/1.1" ',
    "it/s]",
    "s/it]",
)


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The downgrade words of the rule pack (`downgrade_words:`), as one case-blind search.

    `text` and `raw` are the case-blind searches (`re.IGNORECASE`). sre runs a case-blind
    alternation 7-12x slower than the same words searched case-sensitively in a lowered line (a
    48 KiB line: 12 ms against 1.8 ms), so the tests below search lowered copies where that gives
    the same answer: raw bytes always (a bytes pattern folds ASCII letters only, as bytes.lower()
    lowers), text when the line and every word are ASCII (other text folds in ways str.lower()
    does not: U+017F, the long s, matches `s`).
    """

    words: tuple[str, ...]
    text: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    raw: re.Pattern[bytes] | None = field(init=False, repr=False, compare=False)
    _raw_lower: re.Pattern[bytes] | None = field(init=False, repr=False, compare=False)
    _text_lower: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        words = sorted(set(self.words), key=len)
        alternation = "|".join(re.escape(w) for w in words)
        ascii_words = all(w.isascii() for w in words)
        set_ = object.__setattr__
        set_(self, "text", re.compile(alternation, re.IGNORECASE) if alternation else None)
        set_(self, "raw", re.compile(alternation.encode(), re.IGNORECASE) if alternation else None)
        set_(
            self,
            "_raw_lower",
            re.compile(b"|".join(re.escape(w.encode().lower()) for w in words)) if words else None,
        )
        set_(
            self,
            "_text_lower",
            re.compile("|".join(re.escape(w.lower()) for w in words))
            if words and ascii_words
            else None,
        )

    @property
    def raw_search(self) -> Callable[[bytes], bool] | None:
        """The test of raw MESSAGE bytes (the tracker's hot path), None without words."""
        return self._raw_hit if self._raw_lower is not None else None

    def _raw_hit(self, line: bytes) -> bool:
        assert self._raw_lower is not None
        return self._raw_lower.search(line.lower()) is not None

    def hits(self, line: str | bytes) -> bool:
        """True when the line has a downgrade word: the cheap test before any masking."""
        if isinstance(line, bytes):
            return self._raw_lower is not None and self._raw_hit(line)
        if self._text_lower is not None and line.isascii():
            return self._text_lower.search(line.lower()) is not None
        return self.text is not None and self.text.search(line) is not None


def rank_label(rank: Rank) -> str:
    """A rank as its prefix spells it (`DP1 TP0`); the main process (no rank) is `main`."""
    parts = [
        f"{name}{value}"
        for name, value in (("DP", rank.dp), ("PP", rank.pp), ("TP", rank.tp), ("EP", rank.ep))
        if value is not None
    ]
    return " ".join(parts) or "main"


@dataclass(slots=True)
class _Entry:
    example: str
    ranks: set[str]
    rules: list[str]  # the rules that matched the line
    facts: list[str]  # the facts they named
    kind: str = DOWNGRADE


@dataclass(slots=True)
class LogLedger:
    """The templates of one startup while it is built; `recorded` is False for a startup whose
    state an older release saved (its ledger is unknown, never empty), `other` False for a
    ledger of downgrade lines only (recorded by a release before the other kind)."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    dropped: int = 0
    recorded: bool = True
    other: bool = True
    other_kept: int = 0  # entries of kind other
    other_lines: int = 0  # other lines offered
    other_chars: int = 0  # and their characters, each up to _SCRUB_CHARS
    other_dropped: int = 0

    def takes_other(self) -> bool:
        """Whether a line without a downgrade word is still worth masking (the cheap test)."""
        return (
            self.recorded
            and self.other
            and self.other_lines < OTHER_LINES
            and self.other_chars < OTHER_CHARS
        )

    def offer(self, message: str, matches: Iterable[RuleMatch] = (), kind: str = DOWNGRADE) -> bool:
        """Add one startup-window line (the whole message, prefix and all) of this kind (a
        downgrade word or not), with the rules that matched it; True when the ledger changed."""
        if not self.recorded or any(marker in message for marker in _NOT_MESSAGES):
            return False
        if kind != DOWNGRADE:
            if not self.other:
                return False
            self.other_lines += 1
            self.other_chars += min(len(message), _SCRUB_CHARS)
            if self.other_lines > OTHER_LINES or self.other_chars > OTHER_CHARS:
                self.other_dropped += 1
                return True
        body, rank = split_prefix(message)
        body = scrub_head(body, BODY_CHARS)  # redacted first: the template is shown too
        template = template_of(body)
        if not template:
            return False
        changed = False
        entry = self.entries.get(template)
        if entry is None:
            if kind == DOWNGRADE and len(self.entries) - self.other_kept >= TEMPLATES_KEPT:
                self.dropped += 1
                return True
            if kind != DOWNGRADE and self.other_kept >= OTHER_KEPT:
                self.other_dropped += 1
                return True
            example = body[:EXAMPLE_CHARS].rstrip()
            entry = self.entries[template] = _Entry(example, set(), [], [], kind)
            if kind != DOWNGRADE:
                self.other_kept += 1
            changed = True
        label = rank_label(rank)
        if label not in entry.ranks and len(entry.ranks) < RANKS_KEPT:
            entry.ranks.add(label)
            changed = True
        for match in matches:
            if match.rule_id not in entry.rules:
                entry.rules.append(match.rule_id)
                entry.facts.extend(f for f in match.facts if f not in entry.facts)
                changed = True
        return changed

    def to_doc(self) -> dict[str, Any] | None:
        """The ledger as the record stores it (None when not recorded)."""
        if not self.recorded:
            return None
        doc: dict[str, Any] = {
            "mask_version": MASK_VERSION,
            "templates": [
                {
                    "template": template,
                    "example": e.example,
                    "ranks": sorted(e.ranks),
                    "rules": list(e.rules),
                    "facts": list(e.facts),
                    "kind": e.kind,
                }
                for template, e in self.entries.items()
            ],
            "dropped": self.dropped,
        }
        if self.other:
            doc["other"] = {
                "lines": self.other_lines,
                "chars": self.other_chars,
                "dropped": self.other_dropped,
            }
        return doc

    @classmethod
    def from_doc(cls, doc: Any) -> LogLedger:
        """A ledger from `to_doc`; None (state saved by an older release) is not recorded, and
        one without `other` (a release before that kind) takes downgrade lines only."""
        if not isinstance(doc, Mapping):
            return cls(recorded=False)
        other = doc.get("other")
        ledger = cls(dropped=int(doc.get("dropped", 0)), other=isinstance(other, Mapping))
        if isinstance(other, Mapping):
            ledger.other_lines = int(other.get("lines", 0))
            ledger.other_chars = int(other.get("chars", 0))
            ledger.other_dropped = int(other.get("dropped", 0))
        for item in doc.get("templates", ()):
            kind = OTHER if item.get("kind") == OTHER else DOWNGRADE
            ledger.entries[str(item["template"])] = _Entry(
                str(item["example"]),
                set(map(str, item["ranks"])),
                list(map(str, item.get("rules", ()))),
                list(map(str, item.get("facts", ()))),
                kind,
            )
            ledger.other_kept += kind == OTHER
        return ledger


__all__ = [
    "EXAMPLE_CHARS",
    "OTHER_CHARS",
    "OTHER_KEPT",
    "OTHER_LINES",
    "RANKS_KEPT",
    "TEMPLATES_KEPT",
    "LogLedger",
    "Vocabulary",
    "rank_label",
]
