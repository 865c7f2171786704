"""Hand-made startup records and the bundled policy, for tests that compare without a journal."""

from __future__ import annotations

from typing import Any, Literal

from sglang_sentinel.compare import Policy, compare, load_policy
from sglang_sentinel.facts import STARTUP_FACTS
from sglang_sentinel.model import FactValue, Finding, Outcome, StartupRecord

POLICY = load_policy()


def record(
    outcome: Outcome = "ready",
    invocation: str = "b" * 32,
    server_args: dict[str, Any] | None = None,
    flags: tuple[str, ...] = (),
    failure_reason: str | None = None,
    **facts: FactValue,
) -> StartupRecord:
    return StartupRecord(
        unit="sglang-qwen.service",
        invocation_id=invocation,
        started_at=1_700_000_000.0,
        ready_at=1_700_000_100.0 if outcome == "ready" else None,
        outcome=outcome,
        facts={name: facts.get(name) for name in STARTUP_FACTS},
        launch_flags=flags,
        server_args=server_args or {},
        failure_reason=failure_reason,
    )


def base(**facts: Any) -> StartupRecord:
    return record(invocation="a" * 32, **facts)


def checks(
    current: StartupRecord, baseline: StartupRecord | None, policy: Policy = POLICY
) -> dict[str, Finding]:
    kind: Literal["pinned"] | None = "pinned" if baseline is not None else None
    return {f.check: f for f in compare(current, baseline, kind, policy).findings}
