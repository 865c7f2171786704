"""How a person is told a startup's outcome: one phrase, said by the report and the page alike.

Each surface brings only its typography: how a failure is made to stand out (the report's
capitals, the page's <strong>) and how a startup still under way is said.
"""

from __future__ import annotations

from collections.abc import Callable

from ..model import StartupRecord
from ..text import duration


def outcome(
    record: StartupRecord, *, loud: Callable[[str], str], under_way: str = "starting"
) -> str:
    """`ready in 3m07s` (`ready` without a time to ready), `failed` made `loud`, or `under_way`."""
    if record.outcome == "ready":
        took = record.time_to_ready
        return f"ready in {duration(took)}" if took is not None else "ready"
    if record.outcome == "failed":
        return loud("failed")
    return under_way
