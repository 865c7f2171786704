"""Golden cases: a journal in, the JSON contract, the report, the metrics and the alerts pushed
to Alertmanager out, byte for byte.

Each `tests/golden/<case>/` holds `journal.export` (or the seed fixture's, for `seed-flag-change`)
and the expected outputs; a case with a `baseline.json` (as `sentinel baseline --export` writes
it) has it imported as the unit's pinned baseline before anything reads the journal. A
deliberate change of output: `pytest tests/golden/test_golden.py --update-golden`, then review
`git diff tests/golden`. The synthetic exports and baselines come from
`tests/golden/make_cases.py`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from journaltools import build_journal, seed_fixture_dir
from sentinelproc import alerts_in_process, scrape_in_process

from sglang_sentinel.cli import main

GOLDEN = Path(__file__).resolve().parent
CASES = sorted(["seed-flag-change", *(p.parent.name for p in GOLDEN.glob("*/journal.export"))])
# Series that depend on when the test runs, not on the journal.
_VOLATILE = re.compile(
    r"^sglang_sentinel_(journal_last_entry_age_seconds|processing_lag_seconds)\b"
)
# The build info names the journal and file readers this install runs (c or python); either
# reads the same.
_READER = re.compile(r'\b(reader|file_reader)="(c|python)"')


def _export(case: str) -> Path:
    if case == "seed-flag-change":
        return seed_fixture_dir() / "journal.export"
    return GOLDEN / case / "journal.export"


def _units(journal: Path, tmp_path: Path) -> list[str]:
    """Every sglang unit in the case (the seed journal's other units are noise)."""
    text = _export_text(journal)
    return sorted(set(re.findall(r"^_SYSTEMD_UNIT=(sglang[^\n]*)$", text, re.M)))


def _export_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def _scan(capsys: pytest.CaptureFixture[str], journal: Path, state: Path, *extra: str) -> str:
    code = main(["scan", "--journal-dir", str(journal), "--state-dir", str(state), *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out.replace(str(journal), "<journal>").replace(str(state), "<state>")


def _pinned(capsys: pytest.CaptureFixture[str], case: str, state: Path, units: list[str]) -> Path:
    """`state`, with the case's baseline.json pinned for its unit when it has one."""
    baseline = GOLDEN / case / "baseline.json"
    if baseline.exists():
        (unit,) = units
        argv = ["baseline", "--state-dir", str(state), "--unit", unit, "--import", str(baseline)]
        # --force: no startup of the unit is recorded yet to check the model and TP against.
        code = main([*argv, "--force"])
        _, err = capsys.readouterr()
        assert code == 0, err
    return state


def _metrics(journal: Path, state: Path, units: list[str]) -> str:
    text = scrape_in_process(journal, state, units)
    text = _READER.sub(r'\1="<reader>"', text)
    return "".join(line + "\n" for line in text.splitlines() if not _VOLATILE.match(line))


@pytest.mark.parametrize("case", CASES)
def test_golden(
    case: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    journal = build_journal(_export(case), tmp_path / "journal", case)
    units = _units(_export(case), tmp_path)
    unit_args = [a for u in units for a in ("--unit", u)]
    s1, s2, s3, s4 = (_pinned(capsys, case, tmp_path / f"s{n}", units) for n in range(1, 5))
    outputs = {
        "expected-scan.json": _scan(capsys, journal, s1, "--json", *unit_args),
        "expected-report.txt": _scan(capsys, journal, s2, *unit_args),
        "expected-metrics.prom": _metrics(journal, s3, units),
        "expected-alerts.json": alerts_in_process(journal, s4, units),
    }
    directory = GOLDEN / case
    if request.config.getoption("--update-golden"):
        directory.mkdir(exist_ok=True)
        for name, text in outputs.items():
            (directory / name).write_text(text, encoding="utf-8")
        return
    for name, text in outputs.items():
        expected = directory / name
        assert expected.exists(), f"{expected} missing: run pytest {__file__} --update-golden"
        assert text == expected.read_text(encoding="utf-8"), (
            f"{case}/{name} differs from the golden output; if the change is intended, run "
            f"`pytest tests/golden/test_golden.py --update-golden` and review `git diff tests/golden`"
        )
