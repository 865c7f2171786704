"""Log templates: an SGLang line body reduced to its template, and two startups' downgrade
templates compared (the downgrade ledger's mask and diff; startups/ledger.py keeps a startup's).

SGLang prints its messages from fixed f-strings, so a deterministic mask recovers the template:
quoted values, URLs, UUIDs, IPs, paths, hex ids and numbers (with their units, dotted versions
too) are masked, and a bracketed run of masked values is one `<LIST>`, so another pid, figure or
list length is the same template while another reason is another one. The mask is versioned
(`MASK_VERSION`): a ledger stored under another version is re-masked from its examples.

A shared leaf (imports only model.py): the tracker fills ledgers, compare diffs them, and the
commands that only read state never load the tracker.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .model import IMPORTED_PREFIX, StartupRecord

MASK_VERSION: Final = 1
# Characters of a line body masked (the ledger bounds its lines' length before this too).
BODY_CHARS: Final = 2000

# The masks, in order: each replaces what it finds with a placeholder the later ones leave
# alone (placeholders are `<WORD>`; no mask matches `<` or `>` around a word).
_ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_QUOTED: Final = re.compile(r"'[^'\n]{0,400}'|\"[^\"\n]{0,400}\"|`[^`\n]{0,400}`")
_URL: Final = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s,;)\]]+", re.IGNORECASE)
_UUID: Final = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE
)
_PATH: Final = re.compile(r"(?<![\w.<>])(?:~|\.{1,2})?/[^\s'\"`]+")
_IP: Final = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b")
_HEX: Final = re.compile(r"\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*\d)[0-9a-f]{12,64}\b", re.IGNORECASE)
_NUMBER: Final = re.compile(
    r"(?<![A-Za-z0-9_.<])[-+]?\d+(?:\.\d+)*(?:e[-+]?\d+)?(?:\s?(?:[KMGT]i?B|[KMGT]|%|ms|s))?"
    r"(?![A-Za-z0-9_])",
)
# A bracketed run of placeholders and separators (a list, tuple, set or dict of values) is one
# value: `[1, 2, 4]` and `[1, 2, 4, 8]` are the same template.
_LIST: Final = re.compile(
    r"[\[({](?:\s*(?:<[A-Z]+>|None|True|False)\s*(?:[:=]\s*(?:<[A-Z]+>|None|True|False)\s*)?,?)*\s*[\])}]"
)
_SPACES: Final = re.compile(r"\s+")
_MASKS: Final = (
    (_QUOTED, "<S>"),
    (_URL, "<URL>"),
    (_UUID, "<UUID>"),
    (_IP, "<IP>"),
    (_PATH, "<PATH>"),
    (_HEX, "<HEX>"),
    (_NUMBER, "<N>"),
)


def template_of(body: str) -> str:
    """The template of a line body (prefix already stripped): its variable parts masked."""
    text = body[:BODY_CHARS]
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    previous = None
    while previous != text:  # nested lists: the inner one first
        previous, text = text, _LIST.sub("<LIST>", text)
    return _SPACES.sub(" ", text).strip()


# The kinds of a template (startups/ledger.py): a line with a downgrade word, any other line.
DOWNGRADE: Final = "downgrade"
OTHER: Final = "other"


@dataclass(frozen=True, slots=True)
class LogLine:
    """One template of a diff: its example line, how many ranks printed it, the rules that
    matched it."""

    template: str
    example: str
    ranks: int
    rules: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    kind: str = DOWNGRADE

    def to_json(self) -> dict[str, Any]:
        """The JSON contract's form (`log_diff.new[]` / `log_diff.gone[]`)."""
        return {
            "template": self.template,
            "example": self.example,
            "ranks": self.ranks,
            "kind": self.kind,
        }


@dataclass(frozen=True, slots=True)
class LogDiff:
    """The templates a startup printed and its baseline did not (new), and back (gone:
    information only, a fallback that went away), downgrade and other ones (`LogLine.kind`);
    `version_changed` says once that the two ran other SGLang versions, whose rewordings show
    as a new and a gone template."""

    new: tuple[LogLine, ...]
    gone: tuple[LogLine, ...]
    accepted: int = 0  # new templates policy.accepted_messages silenced
    version_changed: str | None = None
    # Downgrade lines of templates the startup's ledger did not keep (past TEMPLATES_KEPT):
    # not compared, so possibly new; said with the new ones ("and N more not kept").
    dropped: int = 0

    @property
    def new_downgrades(self) -> tuple[LogLine, ...]:
        """The new templates of kind downgrade: what the finding, metric and alert count."""
        return tuple(line for line in self.new if line.kind == DOWNGRADE)

    def to_json(self) -> dict[str, Any]:
        return {
            "new": [line.to_json() for line in self.new],
            "gone": [line.to_json() for line in self.gone],
            "version_changed": self.version_changed,
            "dropped": self.dropped,
        }

    def not_kept(self) -> str:
        """`and N more not kept (...)` when the ledger dropped downgrade lines, else ''."""
        return not_kept(self.dropped)


def not_kept(dropped: int) -> str:
    """What a startup's ledger did not keep, said after its new downgrade templates ('' for
    none): `and N more not kept (...)`."""
    if not dropped:
        return ""
    lines = f"line{'s' if dropped != 1 else ''}"
    return (
        f"and {dropped} more not kept (downgrade {lines} of templates past the ledger's "
        "bound per startup, not compared)"
    )


def _lines(doc: Mapping[str, Any], other: bool) -> dict[str, LogLine]:
    """template -> line of a stored ledger (the other kind too when `other`); one stored under
    another mask version is re-masked from its examples (redacted text masks to the same
    template as the line it came from)."""
    same = doc.get("mask_version") == MASK_VERSION
    out: dict[str, LogLine] = {}
    for item in doc.get("templates", ()):
        kind = OTHER if item.get("kind") == OTHER else DOWNGRADE
        if kind == OTHER and not other:
            continue
        example = str(item.get("example", ""))
        template = str(item["template"]) if same else template_of(example)
        if template not in out:
            out[template] = LogLine(
                template,
                example,
                len(item.get("ranks", ())),
                tuple(item.get("rules", ())),
                tuple(item.get("facts", ())),
                kind,
            )
    return out


def log_diff(
    record: StartupRecord,
    baseline: StartupRecord | None,
    accepted: Sequence[re.Pattern[str]] = (),
) -> LogDiff | None:
    """New and gone downgrade templates of `record` against `baseline`; None when either has no
    ledger (no baseline, or one recorded by a release before the ledger: no false alarm)."""
    if baseline is None or baseline is record or record.ledger is None or baseline.ledger is None:
        return None
    # The other kind only when both ledgers hold it: a baseline recorded by a release that kept
    # downgrade lines only has no other lines to compare with, which is no news.
    other = "other" in record.ledger and "other" in baseline.ledger
    now, before = _lines(record.ledger, other), _lines(baseline.ledger, other)
    new: list[LogLine] = []
    silenced = 0
    for template, line in now.items():
        if template in before or _reworded(line, record, baseline):
            continue
        if any(p.search(template) or p.search(line.example) for p in accepted):
            silenced += 1
            continue
        new.append(line)
    # Gone only from a startup that became ready: one that failed ended its window early, so
    # what it did not print says nothing (a crash loop would list the whole startup as gone).
    # Nor of a kind whose ledger was full: it dropped templates it did print.
    other_doc = record.ledger.get("other")
    full = {
        DOWNGRADE: bool(record.ledger.get("dropped")),
        OTHER: isinstance(other_doc, Mapping) and bool(other_doc.get("dropped")),
    }
    gone = tuple(
        line
        for template, line in before.items()
        if template not in now
        and record.outcome == "ready"
        and not full[line.kind]
        and not _reworded(line, baseline, record)
    )
    dropped = int(record.ledger.get("dropped", 0))
    return LogDiff(tuple(new), gone, silenced, version_change(record, baseline), dropped)


def no_ledger_reason(record: StartupRecord) -> str:
    """Why a startup has no ledger to compare with: an imported baseline file of the version
    before it carried the log templates, or a startup recorded by a release before the ledger."""
    if record.unit.startswith(IMPORTED_PREFIX):
        return (
            "the baseline file has no log templates (exported by an older sentinel; "
            "export it again and import it)"
        )
    return (
        "it has no log templates (recorded by a release before the downgrade ledger; "
        "pin a newer startup)"
    )


def unledgered_baseline(record: StartupRecord, baseline: StartupRecord | None) -> str | None:
    """The reason the startup's downgrade lines were not compared because its baseline has no
    ledger, None when they were (or when nothing was to be compared: no baseline, the startup
    still starting or recorded without a ledger itself)."""
    if (
        baseline is None
        or baseline is record
        or record.outcome == "starting"
        or record.ledger is None
        or baseline.ledger is not None
    ):
        return None
    return no_ledger_reason(baseline)


def version_change(record: StartupRecord, baseline: StartupRecord) -> str | None:
    """What says the two startups ran other SGLang versions, None when nothing does.

    SGLang logs no version line; what a startup shows of its version is its resolved
    server_args, whose fields change with nearly every release (0.5.10 added
    `disable_piecewise_cuda_graph`, 0.5.23 `cuda_graph_config`). A field added or removed is
    another release; a startup without server_args (the line lost) tells nothing.
    """
    if not record.server_args or not baseline.server_args:
        return None
    now, before = set(record.server_args), set(baseline.server_args)
    added, removed = len(now - before), len(before - now)
    if not added and not removed:
        return None
    return (
        f"SGLang version changed (server_args fields: {added} added, {removed} removed): "
        "a message the new release rewords shows as one new and one gone template"
    )


def _reworded(line: LogLine, record: StartupRecord, other: StartupRecord) -> bool:
    """The line's rule named facts that the other startup has with the same values: the same
    downgrade in another release's wording (`Custom allreduce` -> `CustomAllreduce`)."""
    named = [f for f in line.facts if record.facts.get(f) is not None]
    return bool(named) and all(record.facts.get(f) == other.facts.get(f) for f in named)


__all__ = [
    "BODY_CHARS",
    "DOWNGRADE",
    "MASK_VERSION",
    "OTHER",
    "LogDiff",
    "LogLine",
    "log_diff",
    "no_ledger_reason",
    "not_kept",
    "template_of",
    "unledgered_baseline",
    "version_change",
]
