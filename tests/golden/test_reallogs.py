"""The real-log corpus: startups users pasted in public, read by the sentinel as a new user would.

Each `tests/fixtures/reallogs/<case>/` holds `startup.log` (the startup's lines as pasted,
trimmed to the startup), `source.md` (where it was published, the SGLang version, the hardware)
and `expected.yaml`: what a careful person reads from the log, written by hand and not from the
sentinel's output. Every case becomes one unit of one real journal file; one `sentinel scan`
reads them all, and every expected fact is compared with the one recorded.

The corpus of record is `tests/fixtures/reallogs/`: every case there names the public URL it
was published at (issue 19). `tests/fixtures/reallogs-untraced/` holds real startups whose
public source could not be traced to a URL (the search index that found them gave only a
file id): they run as regression fixtures with the same checks, but the corpus score and its
counts leave them out.

A fact the sentinel cannot read yet is listed under `known_misses` with the reason; the test
fails when a miss is not listed, when a listed miss is read after all (the list must shrink with
the code), when a fact comes out different, and when a fact comes out that the log does not show
(an invented fact). `pytest -s tests/golden/test_reallogs.py` prints the corpus score.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from journaltools import StartupScript, build_journal, read_fixture_log

from sglang_sentinel.cli import main
from sglang_sentinel.rules import default_rules_dir, load_rules
from sglang_sentinel.rules.shapes import strip_wrappers

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = FIXTURES / "reallogs"
UNTRACED = FIXTURES / "reallogs-untraced"


def _cases(root: Path) -> list[str]:
    # reallogs-untraced/ may one day be empty, and git keeps no empty folder.
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "startup.log").is_file())


# The corpus of record (each case names its public URL) and the untraced regression fixtures.
CASES = _cases(CORPUS)
UNTRACED_CASES = _cases(UNTRACED)
ALL_CASES = CASES + UNTRACED_CASES
_DIRS = {**{c: CORPUS / c for c in CASES}, **{c: UNTRACED / c for c in UNTRACED_CASES}}
# Facts a person does not read off a line: the time to ready is the sentinel's own arithmetic.
_DERIVED = frozenset({"startup_seconds"})
_OUTCOMES = frozenset({"ready", "failed", "starting"})


def _expected(case: str) -> dict[str, Any]:
    data = yaml.safe_load((_DIRS[case] / "expected.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{case}/expected.yaml is not a mapping"
    assert data.get("outcome") in _OUTCOMES, f"{case}: outcome must be one of {sorted(_OUTCOMES)}"
    assert (data.get("outcome") == "failed") == ("failure_reason" in data), (
        f"{case}: a failed startup names its failure_reason, and only a failed one"
    )
    return data


def _unit(case: str) -> str:
    return f"sglang-{case}.service"


_STAMP = re.compile(rb"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every case's startup (corpus and untraced) as `sentinel scan --json` records it, by case."""
    tmp = tmp_path_factory.mktemp("reallogs")
    exports = []
    for number, case in enumerate(ALL_CASES):
        lines = read_fixture_log(_DIRS[case] / "startup.log")
        stamps = (_STAMP.search(raw) for _, raw in lines)
        first = next((m.group(1).decode() for m in stamps if m is not None), None)
        start = datetime.fromisoformat(first) - timedelta(seconds=2) if first else None
        script = StartupScript(
            unit=_unit(case),
            description=f"real log {case}",
            invocation_id=f"{number + 1:032x}",
            start=start,
            boot_at="2024-01-01 00:00:00",
        )
        script.started()
        script.log(lines)
        exports.append(script.write(tmp / f"{case}.export"))
    journal = build_journal(exports, tmp / "journal", "reallogs")
    units = [a for case in ALL_CASES for a in ("--unit", _unit(case))]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        argv = ["scan", "--journal-dir", str(journal), "--state-dir", str(tmp / "state")]
        code = main([*argv, "--json", *units])
    assert code == 0
    by_unit = {s["unit"]: s for s in json.loads(out.getvalue())["startups"]}
    return {case: by_unit[_unit(case)] for case in ALL_CASES if _unit(case) in by_unit}


def _same(want: object, got: object) -> bool:
    if isinstance(want, list):
        return isinstance(got, list) and sorted(map(str, want)) == sorted(map(str, got))
    if isinstance(want, float) and isinstance(got, int | float) and not isinstance(got, bool):
        return abs(want - got) < 1e-9
    return bool(want == got)


def score(case: str, startup: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """right / missed / wrong / invented, each a list of `fact` or `fact: detail`."""
    want = _expected(case)
    out: dict[str, list[str]] = {"right": [], "missed": [], "wrong": [], "invented": []}
    if startup is None:
        out["missed"].append("startup: no startup recorded")
        return out
    checks: dict[str, object] = {"outcome": want["outcome"], **(want.get("facts") or {})}
    got_all: dict[str, object] = {
        "outcome": startup["outcome"],
        "failure_reason": startup["failure_reason"],
        **startup["facts"],
    }
    if "failure_reason" in want:
        checks["failure_reason"] = want["failure_reason"]
    for name, value in checks.items():
        got = got_all.get(name)
        if _same(value, got):
            out["right"].append(name)
        elif got is None or (name == "outcome" and got == "starting"):
            out["missed"].append(name)
        else:
            out["wrong"].append(f"{name}: expected {value!r}, recorded {got!r}")
    for name, got in startup["facts"].items():
        if got is not None and got != [] and name not in checks and name not in _DERIVED:
            out["invented"].append(f"{name}: {got!r}")
    if "failure_reason" not in want and startup["failure_reason"] is not None:
        out["invented"].append(f"failure_reason: {startup['failure_reason']!r}")
    return out


def test_corpus_cases_are_complete() -> None:
    """Every case has its log, its source and a well-formed expected.yaml."""
    assert len(CASES) >= 40, f"{len(CASES)} cases"
    assert not set(CASES) & set(UNTRACED_CASES), "a case is in both the corpus and the untraced set"
    for case in ALL_CASES:
        source = (_DIRS[case] / "source.md").read_text(encoding="utf-8")
        assert "SGLang:" in source and "Hardware:" in source, case
        want = _expected(case)
        assert set(want) <= {"outcome", "failure_reason", "facts", "known_misses"}, case
        assert set(want.get("known_misses") or {}) <= {
            "outcome",
            "failure_reason",
            *(want.get("facts") or {}),
        }, case


_URL_LINE = re.compile(r"^- URL: https://\S+", re.MULTILINE)


def test_corpus_sources_are_traced() -> None:
    """Every startup of the corpus names the public URL it was published at, and there are at
    least 40 of them (issue 19); a startup that could not be traced sits in reallogs-untraced/,
    says so and claims no URL. Before: 41 of the 55 cases named one, 14 said "Not traced"."""
    untraced = [
        case
        for case in CASES
        if not _URL_LINE.search(text := (CORPUS / case / "source.md").read_text(encoding="utf-8"))
        or "not traced" in text.lower()
    ]
    assert untraced == [], "corpus cases without their URL (move them to reallogs-untraced/)"
    assert len(CASES) >= 40, f"{len(CASES)} traced startups in the corpus"
    claims = [
        case
        for case in UNTRACED_CASES
        if _URL_LINE.search(text := (UNTRACED / case / "source.md").read_text(encoding="utf-8"))
        or "not traced" not in text.lower()
    ]
    assert claims == [], "untraced fixtures that name a URL (move them to reallogs/)"


def test_every_rule_that_reads_a_corpus_line_has_a_real_sample() -> None:
    """A rule that matches a line of the corpus keeps at least one real line among its samples
    (issue 19), so a rewording that the corpus shows is checked by `rules check` too. Before:
    6 rules read corpus lines with only made-up samples. The untraced fixtures' lines count too:
    they are real lines, only their URL is unknown."""
    pack = load_rules([default_rules_dir()])
    lines = [
        strip_wrappers(raw)
        for case in ALL_CASES
        for raw in (_DIRS[case] / "startup.log").read_text(errors="replace").splitlines()
    ]
    without = []
    for rule in pack.rules:
        hits = [line for line in lines if any(m.rule_id == rule.id for m in pack.match(line))]
        if hits and not any(s.line in line for s in rule.samples for line in hits):
            without.append(f"{rule.id}: {hits[0][:120]}")
    assert without == []


def _score_all(
    cases: list[str], recorded: dict[str, dict[str, Any]]
) -> tuple[dict[str, int], int, list[str]]:
    """Totals by kind, the startups fully right, and every problem (a check that fails)."""
    totals = {"right": 0, "missed": 0, "wrong": 0, "invented": 0}
    fully_right = 0
    problems: list[str] = []
    for case in cases:
        result = score(case, recorded.get(case))
        for kind, items in result.items():
            totals[kind] += len(items)
        if not (result["missed"] or result["wrong"] or result["invented"]):
            fully_right += 1
        known = _expected(case).get("known_misses") or {}
        missed = {m.split(":")[0] for m in result["missed"]}
        problems += [f"{case}: missed {m} (not a known miss)" for m in sorted(missed - set(known))]
        problems += [
            f"{case}: {m} is read now; drop it from known_misses"
            for m in sorted(set(known) - missed)
        ]
        problems += [f"{case}: wrong {w}" for w in result["wrong"]]
        problems += [f"{case}: invented {i}" for i in result["invented"]]
    return totals, fully_right, problems


def _summary(label: str, cases: list[str], totals: dict[str, int], fully_right: int) -> str:
    facts = totals["right"] + totals["missed"] + totals["wrong"]
    return (
        f"{label}: {fully_right} of {len(cases)} startups fully right; "
        f"{totals['right']} of {facts} facts right, {totals['missed']} missed, "
        f"{totals['wrong']} wrong, {totals['invented']} invented"
    )


def test_corpus_score(recorded: dict[str, dict[str, Any]]) -> None:
    """Every fact a person reads from a real log is read, or named as a known miss with why;
    the untraced regression fixtures are held to the same checks but not counted as corpus."""
    totals, fully_right, problems = _score_all(CASES, recorded)
    u_totals, u_fully_right, u_problems = _score_all(UNTRACED_CASES, recorded)
    print("\n" + _summary("real-log corpus", CASES, totals, fully_right))
    print(_summary("untraced regression fixtures", UNTRACED_CASES, u_totals, u_fully_right))
    assert not problems + u_problems, "\n".join(problems + u_problems)
