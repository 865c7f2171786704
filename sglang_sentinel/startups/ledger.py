"""The downgrade ledger: every downgrade line of a startup as a template.

SGLang says what it turns off or falls back from in fixed f-strings ("X is disabled because
...", "falling back to ...", "Performance might be sub-optimal!"), a few hundred of them per
release, far more than rules name. The startup tracker hands every line of the startup window
(start to ready or failure) that has a word of the rule pack's `downgrade_words` to a
`LogLedger`, which masks it to a template (`template_of`: numbers, sizes, hex ids, UUIDs, IPs,
paths, URLs, quoted values and lists masked, so another pid, figure or list length is the
same template, while another reason is another one) and keeps one redacted example line and
the ranks that printed it. `log_diff` (logtemplates.py, with the mask) compares a startup's templates with its baseline's:
templates the baseline never printed are new, and the `new_downgrade_message` check reports
them.

The mask is deterministic and versioned (`MASK_VERSION`): a baseline stored under another
version is re-masked from its examples, never compared template for template.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ..logtemplates import MASK_VERSION, template_of
from ..model import Rank, RuleMatch
from ..redact import scrub_text
from ..rules import split_prefix

# Bounds per startup: distinct templates kept (a line of a further one is counted in
# `dropped`), ranks remembered per template, characters of a line body masked and of the
# example kept.
TEMPLATES_KEPT: Final = 64
RANKS_KEPT: Final = 1024
EXAMPLE_CHARS: Final = 400

# Lines that have a downgrade word but are not a message about one: the resolved settings
# (their own diff reads them), uvicorn access lines and tqdm bars.
_NOT_MESSAGES: Final = ("server_args=", "ServerArgs(", '" 200 ', "it/s]", "s/it]")


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The downgrade words of the rule pack (`downgrade_words:`), as one case-blind search."""

    words: tuple[str, ...]
    text: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    raw: re.Pattern[bytes] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        alternation = "|".join(re.escape(w) for w in sorted(set(self.words), key=len))
        object.__setattr__(
            self, "text", re.compile(alternation, re.IGNORECASE) if alternation else None
        )
        object.__setattr__(
            self,
            "raw",
            re.compile(alternation.encode(), re.IGNORECASE) if alternation else None,
        )

    @property
    def raw_search(self) -> Callable[[bytes], object] | None:
        """The search of raw MESSAGE bytes (the tracker's hot path), None without words."""
        return self.raw.search if self.raw is not None else None

    def hits(self, line: str | bytes) -> bool:
        """True when the line has a downgrade word: the cheap test before any masking."""
        if isinstance(line, bytes):
            return self.raw is not None and self.raw.search(line) is not None
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


@dataclass(slots=True)
class LogLedger:
    """The downgrade templates of one startup while it is built; `recorded` is False for a
    startup whose state an older release saved (its ledger is unknown, never empty)."""

    entries: dict[str, _Entry] = field(default_factory=dict)
    dropped: int = 0
    recorded: bool = True

    def offer(self, message: str, matches: Iterable[RuleMatch] = ()) -> bool:
        """Add one startup-window line (the whole message, prefix and all) that has a word,
        with the rules that matched it; True when the ledger changed."""
        if not self.recorded or any(marker in message for marker in _NOT_MESSAGES):
            return False
        body, rank = split_prefix(message)
        # Redacted before anything else: the template is shown too, and a secret cut in two
        # by a length bound might no longer look like one.
        body = scrub_text(body)
        template = template_of(body)
        if not template:
            return False
        changed = False
        entry = self.entries.get(template)
        if entry is None:
            if len(self.entries) >= TEMPLATES_KEPT:
                self.dropped += 1
                return True
            example = body[:EXAMPLE_CHARS].rstrip()
            entry = self.entries[template] = _Entry(example, set(), [], [])
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
        return {
            "mask_version": MASK_VERSION,
            "templates": [
                {
                    "template": template,
                    "example": e.example,
                    "ranks": sorted(e.ranks),
                    "rules": list(e.rules),
                    "facts": list(e.facts),
                }
                for template, e in self.entries.items()
            ],
            "dropped": self.dropped,
        }

    @classmethod
    def from_doc(cls, doc: Any) -> LogLedger:
        """A ledger from `to_doc`; None (state saved by an older release) is not recorded."""
        if not isinstance(doc, Mapping):
            return cls(recorded=False)
        ledger = cls(dropped=int(doc.get("dropped", 0)))
        for item in doc.get("templates", ()):
            ledger.entries[str(item["template"])] = _Entry(
                str(item["example"]),
                set(map(str, item["ranks"])),
                list(map(str, item.get("rules", ()))),
                list(map(str, item.get("facts", ()))),
            )
        return ledger


__all__ = [
    "EXAMPLE_CHARS",
    "TEMPLATES_KEPT",
    "LogLedger",
    "Vocabulary",
    "rank_label",
]
