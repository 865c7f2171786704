"""startup_stalled: a startup neither ready nor failed past its policy time raises a finding, on a
timer (no new journal entry needed), and clears when the startup ends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from journaltools import StartupScript, build_journal
from pushcapture import PushCapture
from sentinelproc import Sentinels, wait_until

from sglang_sentinel.cli import main
from sglang_sentinel.compare import Policy, compare, load_policy, stall_after
from sglang_sentinel.facts import STARTUP_FACTS
from sglang_sentinel.model import StartupRecord

UNIT = "sglang-stall-test.service"
INV = "5a" * 16
STALLED = f'sglang_sentinel_regression{{check="startup_stalled",severity="warning",unit="{UNIT}"}}'


def _record(outcome: str, started_at: float, startup_seconds: float | None = None) -> StartupRecord:
    facts: dict[str, object] = dict.fromkeys(STARTUP_FACTS)
    facts["startup_seconds"] = startup_seconds
    return StartupRecord(
        unit=UNIT,
        invocation_id=INV,
        started_at=started_at,
        ready_at=None if outcome != "ready" else started_at + (startup_seconds or 1),
        outcome=outcome,  # type: ignore[arg-type]
        facts=facts,  # type: ignore[arg-type]
    )


def test_policy_time_is_three_baselines_but_at_least_fifteen_minutes() -> None:
    policy = load_policy()
    assert stall_after(None, policy) == 900
    assert stall_after(_record("ready", 0, 120.0), policy) == 900
    assert stall_after(_record("ready", 0, 600.0), policy) == 1800
    custom = Policy(checks={"startup_stalled": {"baseline_multiple": 2, "min_seconds": 10}})
    assert stall_after(_record("ready", 0, 100.0), custom) == 200


def test_only_a_startup_still_starting_past_its_time_is_stalled() -> None:
    policy = load_policy()
    baseline = _record("ready", 0, 600.0)
    starting = _record("starting", 1000.0)
    assert compare(starting, baseline, "previous", policy, now=1000.0 + 1799).findings == ()
    (finding,) = compare(starting, baseline, "previous", policy, now=1000.0 + 1800).findings
    assert (finding.check, finding.severity, finding.current) == (
        "startup_stalled",
        "warning",
        1800,
    )
    assert "(limit 30m00s; the baseline was ready in 10m00s)" in finding.message
    # Without `now` (a stored comparison) nothing is judged; a decided startup never stalls.
    assert compare(starting, baseline, "previous", policy).findings == ()
    ready = _record("ready", 1000.0, 50.0)
    assert compare(ready, baseline, "previous", policy, now=1e12).findings == ()


def _script(start: datetime) -> StartupScript:
    s = StartupScript(
        unit=UNIT,
        start=start,
        boot_at=start - timedelta(hours=1),
        invocation_id=INV,
    )
    s.started(start)
    return s


def test_check_fails_a_stalled_startup_instead_of_pending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    start = datetime.now(timezone.utc) - timedelta(hours=1)
    journal = build_journal(_script(start).write(tmp_path / "a.export"), tmp_path / "j")
    state = ["--state-dir", str(tmp_path / "state"), "--unit", UNIT]
    assert main(["scan", "--journal-dir", str(journal), *state]) == 0
    capsys.readouterr()
    assert main(["check", *state, "--wait", "30"]) == 1  # a verdict: no waiting 30 s
    assert "still starting after 1h00m (limit 15m00s; no baseline time)" in capsys.readouterr().out


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    s = Sentinels(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


def test_daemon_raises_the_stall_on_a_timer_and_clears_it_when_ready(
    tmp_path: Path, sentinels: Sentinels
) -> None:
    """No entry arrives after "Started": the stall still fires at its time (metric, log and an
    Alertmanager push), then a ready clears it."""
    pushes = PushCapture()
    try:
        _stall_then_ready(tmp_path, sentinels, pushes)
    finally:
        pushes.close()


def _stall_then_ready(tmp_path: Path, sentinels: Sentinels, pushes: PushCapture) -> None:
    start = datetime.now(timezone.utc).replace(microsecond=0)
    journal_dir = tmp_path / "journal"
    build_journal(_script(start).write(tmp_path / "a.export"), journal_dir, name="a")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"units: [{UNIT}]\npolicy:\n  checks:\n    startup_stalled: {{min_seconds: 4}}\n"
        f"alertmanager:\n  urls: ['{pushes.url}']\n  resend_interval_seconds: 5\n"
    )
    s = sentinels.start(
        "--config", str(config), "--journal-dir", str(journal_dir), state=tmp_path / "state"
    )
    # The series are there (at 0) from the first scrape, before the journal is read: wait for
    # the startup itself to be under way, then for the stall.
    starting = f'sglang_sentinel_startup_in_progress{{unit="{UNIT}"}} 1.0'
    body = wait_until(
        s.scrape_when(lambda text: starting in text and f"{STALLED} 0.0" in text),
        15,
        "the startup under way, the stall series at 0",
    )
    assert f'sglang_sentinel_startup_in_progress_timestamp_seconds{{unit="{UNIT}"}}' in body
    wait_until(s.scrape_with(f"{STALLED} 1.0"), 20, "the stall series at 1")
    raised = s.wait_event("finding_raised")
    assert raised["check"] == "startup_stalled" and raised["unit"] == UNIT
    assert datetime.now(timezone.utc) - start >= timedelta(seconds=4)
    pushed = wait_until(
        lambda: [a for b in pushes.bodies for a in json.loads(b)], 15, "an Alertmanager push"
    )
    assert {a["labels"]["alertname"] for a in pushed} == {"SGLangStartupStalled"}
    assert pushed[0]["labels"]["check"] == "startup_stalled"
    # The startup ends: a second journal file in the followed directory says ready.
    done = StartupScript(
        unit=UNIT,
        start=start + timedelta(seconds=1),
        boot_at=start - timedelta(hours=1),
        invocation_id=INV,
    )
    done.line(f"[{start:%Y-%m-%d %H:%M:%S}] The server is fired up and ready to roll!")
    build_journal(done.write(tmp_path / "b.export"), journal_dir, name="b")
    wait_until(s.scrape_with(f"{STALLED} 0.0"), 20, "the stall series back at 0")
    cleared = s.wait_event("finding_cleared")
    assert cleared["check"] == "startup_stalled"


def test_scan_gives_the_verdict_check_gives_for_a_startup_silent_past_its_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Started 2.5 h ago, summary logged, then nothing: `check` says stalled (exit 1), and so
    does the `scan` that recorded it, text and JSON (before: the scan printed "pending"), and
    neither text says "pending" beside the finding."""
    start = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=2, minutes=30)
    s = StartupScript(unit=UNIT, start=start, boot_at="2026-01-01 00:00:00", invocation_id=INV)
    s.started(start)
    s.line(
        f"[{start + timedelta(seconds=50):%Y-%m-%d %H:%M:%S} TP0] max_total_num_tokens=1000, "
        "chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, "
        "context_len=4096, available_gpu_mem=10.00 GB"
    )
    journal = build_journal(s.write(tmp_path / "s.export"), tmp_path / "j")
    state = ["--state-dir", str(tmp_path / "state"), "--unit", UNIT]
    assert main(["scan", "--journal-dir", str(journal), *state]) == 0
    text = capsys.readouterr().out
    assert main(["scan", "--journal-dir", str(journal), *state, "--json"]) == 0
    [scanned] = json.loads(capsys.readouterr().out)["startups"]
    assert main(["check", *state, "--json"]) == 1
    [checked] = json.loads(capsys.readouterr().out)["startups"]
    assert [f["check"] for f in scanned["findings"]] == ["startup_stalled"]
    assert [f["check"] for f in checked["findings"]] == ["startup_stalled"]
    assert "pending" not in text and "WARNING   still starting after 2h30m" in text
