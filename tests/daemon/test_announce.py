"""The announcer (daemon/announce.py) alone: what the daemon tells systemd and the log, each
thing once, with no loop, journal or state behind it."""

from __future__ import annotations

from records import POLICY, record
from structlog.testing import capture_logs

from sglang_sentinel.compare import UnitStatus, compare
from sglang_sentinel.daemon.announce import Announcer

UNIT = "sglang-qwen.service"


def _status(comparison_of: str = "drop") -> UnitStatus:
    baseline = record(invocation="a" * 32, max_running_requests=48)
    current = record(max_running_requests=26 if comparison_of == "drop" else 48)
    return UnitStatus(UNIT, compare(current, baseline, "pinned", POLICY), None, (), True)


def test_systemd_hears_ready_stopping_watchdog_and_a_status_only_when_it_changes() -> None:
    sent: list[str] = []
    a = Announcer(notify=sent.append)
    a.ready()
    a.status([_status()])
    a.status([_status()])  # the same summary: not sent again
    a.watchdog()
    a.status([_status("same")])
    a.stopping()
    assert sent == [
        "READY=1",
        f"STATUS={UNIT}: ready, 1 finding(s) vs pinned",
        "WATCHDOG=1",
        f"STATUS={UNIT}: ready, 0 finding(s) vs pinned",
        "STOPPING=1",
    ]


def test_a_startup_and_its_findings_are_logged_once_and_cleared_once() -> None:
    a = Announcer(notify=lambda _: None)
    view = _status()
    with capture_logs() as logs:
        a.recorded([view.comparison] * 2)  # type: ignore[list-item]
        wanted = a.findings([view])
        assert a.findings([view]) == wanted == [view.comparison]
        a.findings([_status("same")])
    assert [(e["event"], e.get("check")) for e in logs] == [
        ("startup_recorded", None),
        ("finding_raised", "max_running_requests_drop"),
        ("finding_cleared", "max_running_requests_drop"),
    ]


def test_what_an_earlier_run_said_is_not_said_again() -> None:
    a = Announcer(notify=lambda _: None)
    view = _status()
    a.remember([("b" * 32, "ready")], [view], {UNIT: "a" * 32})
    with capture_logs() as logs:
        a.recorded([view.comparison])  # type: ignore[list-item]
        a.findings([view])
        a.pin_changes([UNIT], {UNIT: "a" * 32})
        a.pin_changes([UNIT], {})
    assert [(e["event"], e.get("invocation")) for e in logs] == [("baseline_unpinned", "aaaaaaaa")]


def test_a_startup_read_again_that_the_state_already_held_is_not_logged_again() -> None:
    """Read again past what this run remembers (a replay after a cursor reset, another target
    list): stored before with the same outcome, so it was logged when it was stored."""
    a = Announcer(notify=lambda _: None)
    drop, same = _status().comparison, _status("same").comparison
    assert drop is not None and same is not None
    inv = drop.record.invocation_id
    with capture_logs() as logs:
        a.recorded([drop], already_stored={inv})  # held with this outcome: not news
        a.recorded([same], already_stored={inv})  # remembered now: its findings changed
        a.recorded([drop])  # not held before (a new startup): logged
    assert [(e["event"], e["findings"]) for e in logs] == [
        ("startup_recorded", []),
        ("startup_recorded", ["max_running_requests_drop"]),
    ]
