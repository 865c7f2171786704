"""A daemon that reads stored startups again logs none of them as recorded.

A replay (a cursor reset, or another target list, whose reader has no cursor yet) reads every
startup of the journal again. The daemon remembers what it logged for the newest ANNOUNCED_KEPT
startups only (256; a crash loop has more); one older than that was logged as new again, as if
it had just happened: a log-based alert on `startup_recorded` fired for a failure of last week.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from daemons import opened_daemon
from structlog.testing import capture_logs

from sglang_sentinel.daemon import announce
from sglang_sentinel.daemon import loop as daemon_module

UNIT = "sglang-qwen.service"  # the seed journal's unit (journal files, not a live unit)


def recorded(journal: Path, state: Path, units: list[str]) -> list[MutableMapping[str, Any]]:
    """Start a daemon on `state`, read the journal to its end once; its startup_recorded events."""
    with opened_daemon(journal, state, units) as daemon:
        daemon._remember_announced()
        with capture_logs() as logs:
            daemon._drain()
    return [e for e in logs if e["event"] == "startup_recorded"]


def test_startups_read_again_under_another_target_list_are_not_logged_again(
    seed_journal_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Remember one startup: the seed journal's two are then more than a restart remembers.
    monkeypatch.setattr(announce, "ANNOUNCED_KEPT", 1)
    monkeypatch.setattr(daemon_module, "ANNOUNCED_KEPT", 1)
    state = tmp_path / "state"
    first = recorded(seed_journal_dir, state, [UNIT])
    assert len(first) == 2
    # A unit added to the list: a reader with no cursor, which reads the journal from its start.
    again = recorded(seed_journal_dir, state, [UNIT, "sglang-other.service"])
    assert again == []
