"""The e2e journey's `make test` step (tests/e2e/journey.py): which suites run it, and what
counts as a pass (every test passed; a skip is a failure, as in CI)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from journey import JourneyError, all_passed, make_test_enabled


@pytest.mark.parametrize(
    ("value", "bookworm", "trixie"),
    [
        ("", False, False),
        ("bookworm", True, False),
        ("trixie bookworm", True, True),
        ("bookworm,trixie", True, True),
        ("all", True, True),
    ],
)
def test_make_test_enabled_per_suite(
    monkeypatch: pytest.MonkeyPatch, value: str, bookworm: bool, trixie: bool
) -> None:
    monkeypatch.setenv("E2E_MAKE_TEST", value)
    assert (make_test_enabled("bookworm"), make_test_enabled("trixie")) == (bookworm, trixie)


def test_make_test_is_off_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2E_MAKE_TEST", raising=False)
    assert not make_test_enabled("bookworm")


def test_all_passed_returns_the_summary() -> None:
    out = "....\n[100%]\nartifact: x.png\n657 passed, 2 warnings in 283.19s (0:04:43)\n"
    assert all_passed(out) == "657 passed, 2 warnings in 283.19s (0:04:43)"


@pytest.mark.parametrize(
    "summary",
    [
        "650 passed, 2 skipped in 3.10s",
        "5 failed, 652 passed in 283.19s (0:04:43)",
        "== 1 passed, 1 error in 2.00s ==",
        "3 passed, 1 xfailed in 1.00s",
        "no tests ran in 0.01s",
    ],
)
def test_all_passed_refuses_anything_else(summary: str) -> None:
    with pytest.raises(JourneyError):
        all_passed(f"....\n{summary}\n")
