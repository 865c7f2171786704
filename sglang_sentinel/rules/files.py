"""Rule files: find, read and validate the YAML rule files and build a `RuleSet` from them.

A rule file (`rules/*.yaml`, schema in docs/architecture.md) holds rules with a required literal
(`contains`), a regex applied to the line body, typed facts and sample lines. Everything is
validated up front, samples included, and every problem is reported at once as
`file:rule_id: message`; a `RuleSet` is only ever built from rules that passed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

from sglang_sentinel.errors import RuleError
from sglang_sentinel.facts import BY_NAME, FACT_TYPES, FactType
from sglang_sentinel.model import FactValue
from sglang_sentinel.rules.regex import RegexError, RuleRegex
from sglang_sentinel.rules.ruleset import SCOPES, FactSpec, Rule, RuleSet, Sample, Scope
from sglang_sentinel.rules.shapes import split_prefix
from sglang_sentinel.yamlfile import (
    MAX_FILE_BYTES,
    RULES_TOTAL_BYTES,
    FileTooLarge,
    YamlError,
    load_yaml,
    read_text,
)

# The lead's policy file lives beside the rule files but is not a rule file.
POLICY_FILE: Final = "policy.yaml"  # in a rule directory: the policy, not a rule file

_RULE_KEYS: Final = frozenset(
    {"id", "description", "contains", "regex", "scope", "facts", "samples", "also_matches"}
)
_TOP_KEYS: Final = frozenset({"version", "rules", "downgrade_words"})
_FACT_KEYS: Final = frozenset({"type", "group", "value"})
_SAMPLE_KEYS: Final = frozenset({"match", "no_match"})
_ID_RE: Final = re.compile(r"[a-z][a-z0-9_]*\Z")
# A rule id's length: a baseline file names the rules that matched a template, each in at most
# this many characters (state/baseline_file.py NAME_CHARS); a longer id made an export that
# every import refused.
ID_CHARS: Final = 128
_SAMPLE_SHOWN = 90  # characters of a sample line quoted in a problem message


def default_rules_dir() -> Path:
    """The bundled rule pack: the package data `sglang_sentinel/rules/pack/` (the checkout's
    top-level `rules/` links to it), found beside this module's file, never by a guess.

    (What importlib.resources.files() gives for a package on a file system; importing it costs
    every command more than finding the directory.)"""
    here = Path(__file__)
    pack = here.with_name("pack")
    if not here.is_file():  # a zip import: the pack has no directory to read
        raise RuleError([f"{pack}:-: the bundled rule pack is not on a file system"])
    return pack


def default_policy_path() -> Path:
    """The bundled policy: `policy.yaml` of the rule pack."""
    return default_rules_dir() / POLICY_FILE


def load_rules(dirs: Sequence[Path]) -> RuleSet:
    """Load and validate every `*.yaml` rule file in `dirs`; raise RuleError listing every problem."""
    rule_set, problems = _load(dirs)
    if problems:
        raise RuleError(problems)
    return rule_set


def check_rules(dirs: Sequence[Path]) -> list[str]:
    """Every problem in the rule files of `dirs` as `file:rule_id: message`; empty when all is fine.

    A directory without any rule file is a problem here (a mistyped path must not say "ok").
    """
    problems = _load(dirs)[1]
    for directory in dirs:
        if directory.is_dir() and not any(_rule_files(directory)):
            problems.append(f"{directory}:-: no rule files (*.yaml other than {POLICY_FILE})")
    return problems


def _rule_files(directory: Path) -> list[Path]:
    return sorted(
        (p for p in directory.glob("*.yaml") if p.name != POLICY_FILE and p.is_file()),
        key=lambda p: p.name,
    )


# --- loading -------------------------------------------------------------------------------


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # _load_file says why it cannot be read


def _load(dirs: Sequence[Path]) -> tuple[RuleSet, list[str]]:
    """The rule set of `dirs` and every problem found in it; built once, and the overlap check
    runs on that same set (building a rule set indexes every rule's regex)."""
    problems: list[str] = []
    words: list[str] = []
    merged: dict[str, Rule] = {}  # a later file's rule replaces an earlier one with the same id
    total = 0
    for directory in dirs:
        if not directory.is_dir():
            problems.append(f"{directory}:-: rules directory does not exist or is not a directory")
            continue
        for path in _rule_files(directory):
            size = _size(path)
            # A file over the per-file limit is named as such (by _load_file), not counted.
            total += size if size <= MAX_FILE_BYTES else 0
            if total > RULES_TOTAL_BYTES:
                problems.append(
                    f"{path}:-: the rule files come to more than {RULES_TOTAL_BYTES >> 20} MiB"
                    " with this one, the most loaded at once; remove rule files"
                )
                return RuleSet(tuple(merged.values()), tuple(words)), problems
            for rule in _load_file(path, problems, words):
                merged[rule.id] = rule
    rule_set = RuleSet(tuple(merged.values()), tuple(words))
    _check_overlaps(rule_set, problems)
    return rule_set, problems


def _load_file(path: Path, problems: list[str], words: list[str]) -> list[Rule]:
    where = str(path)
    try:
        text = read_text(path)
    except FileTooLarge as exc:
        problems.append(f"{where}:-: {exc}")
        return []
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{where}:-: cannot read rule file: {exc}")
        return []
    try:
        document = load_yaml(text)
    except YamlError as exc:
        problems.extend(
            f"{where}:-: invalid YAML at {p.where}: {p.problem}"
            if p.where
            else f"{where}:-: invalid YAML: {p.problem}"
            for p in exc.problems
        )
        return []
    if not isinstance(document, dict):
        problems.append(f"{where}:-: top level must be a mapping with `version: 1` and `rules:`")
        return []
    for key in sorted(set(map(str, document)) - _TOP_KEYS):
        problems.append(
            f"{where}:-: unknown top-level key {key!r} (allowed: version, rules, downgrade_words)"
        )
    _parse_words(where, document.get("downgrade_words", []), words, problems)
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


def _parse_words(where: str, raw: object, words: list[str], problems: list[str]) -> None:
    """`downgrade_words:`: the ledger's vocabulary (ledger.py), a list of plain phrases."""
    if not isinstance(raw, list):
        problems.append(f"{where}:-: `downgrade_words` must be a list of phrases")
        return
    for word in raw:
        if not isinstance(word, str) or len(word.strip()) < 3:
            problems.append(
                f"{where}:-: downgrade_words: {word!r} is not a phrase of 3 characters or more"
            )
        elif word not in words:
            words.append(word)


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
    elif len(label) > ID_CHARS:
        bad(f"id has {len(label)} characters, more than {ID_CHARS}")
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


def _compile(pattern: object, bad: Any) -> RuleRegex | None:
    if not isinstance(pattern, str) or not pattern:
        bad("`regex` must be a non-empty string")
        return None
    try:
        return RuleRegex(pattern)
    except RegexError as exc:
        bad(str(exc))
        return None


def _parse_facts(raw: object, regex: RuleRegex | None, bad: Any) -> tuple[FactSpec, ...] | None:
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
        known = BY_NAME.get(name)
        if known is None:
            bad(
                f"fact {name!r} is not a fact the sentinel knows; it would never reach a report"
                " (the fact names are listed in docs/architecture.md, from sglang_sentinel/facts.py)"
            )
            ok = False
            continue
        if known.derived:
            bad(f"fact {name!r} is set by the startup tracker; a rule cannot produce it")
            ok = False
            continue
        spec = _parse_fact(name, definition, regex, bad)
        if spec is not None and spec.type != known.type:
            bad(
                f"fact {name!r} is a {known.type} (sglang_sentinel/facts.py), not a {spec.type};"
                f" declare it `{name}: {known.type}`"
            )
            spec = None
        if spec is None:
            ok = False
        else:
            specs.append(spec)
    return tuple(specs) if ok else None


def _parse_fact(
    name: str, definition: object, regex: RuleRegex | None, bad: Any
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


def _check_overlaps(rule_set: RuleSet, problems: list[str]) -> None:
    """A positive sample of one rule must not silently match another rule too.

    Goes through RuleSet.match, so the pre-filters are checked against every sample as well.
    """
    rules = rule_set.rules
    ids = {rule.id for rule in rules}
    for rule in rules:
        for other_id in sorted(rule.also_matches - ids):
            problems.append(
                f"{rule.source}:{rule.id}: also_matches names unknown rule {other_id!r}"
            )
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
