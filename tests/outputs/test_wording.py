"""One outcome wording: the report's headline and the page's startup line say a startup's
outcome through outputs/wording.py, each adding only its typography."""

from __future__ import annotations

from records import POLICY, record

from sglang_sentinel.compare import UnitStatus, compare
from sglang_sentinel.outputs import render_page
from sglang_sentinel.outputs.report import headline
from sglang_sentinel.outputs.wording import outcome


def test_each_outcome_has_one_phrase() -> None:
    loud = str.upper
    assert outcome(record("ready", startup_seconds=187.0), loud=loud) == "ready in 3m07s"
    assert outcome(record("ready"), loud=loud) == "ready"
    assert outcome(record("failed"), loud=loud) == "FAILED"
    assert outcome(record("starting"), loud=loud) == "starting"
    assert outcome(record("starting"), loud=loud, under_way="pending") == "pending"


def test_the_report_and_the_page_say_the_same_phrase() -> None:
    for r, report_says, page_says in (
        (record("ready", startup_seconds=187.0), "ready in 3m07s", "ready in 3m07s"),
        (record("failed"), "FAILED", "<strong>failed</strong>"),
        (record("starting"), "starting (not ready yet)", "starting"),
    ):
        assert headline(r).endswith("  " + report_says)
        status = UnitStatus(r.unit, compare(r, None, None, POLICY), None, (r,), False)
        assert f"{page_says}</" in render_page([status], generated_at=0.0, version="t")
