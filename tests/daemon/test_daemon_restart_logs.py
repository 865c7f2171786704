"""A restarted daemon logs only what is new: no second startup_recorded / finding_raised for a
startup the state already holds, even when that startup goes on logging batch lines; and it logs
baseline_pinned when it sees a pin made by the CLI (the README's event list)."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

from journaltools import StartupScript, build_journal, write_export
from sentinelproc import Sentinel, Sentinels, clean_env, sentinel_argv, wait_until

UNIT = "sglang-qwen.service"  # the seed journal's unit (journal files, not a live unit)
SEED_1 = "6a1f0c2e9b7d4e3f8a5b1c0d2e4f6a8b"
SEED_2 = "c37e91d04a5b4f6e9d8c7b6a5f4e3d2c"
SEED_2_PID = 418851
GEN = f'sglang_sentinel_generation_throughput_tokens_per_second{{unit="{UNIT}"}}'
DECODE = (
    "[2026-03-09 23:30:00 TP0] Decode batch, #running-req: 3, #full token: 13520, full token "
    "usage: 0.05, mamba num: 6, mamba usage: 0.08, cuda graph: True, gen throughput (token/s): "
    "1234.50, #queue-req: 0"
)


def counts(s: Sentinel) -> Counter[str]:
    return Counter(str(e["event"]) for e in s.events())


def stop(s: Sentinel) -> None:
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=15) == 0, s.stderr()


def test_restart_relogs_nothing_and_logs_the_clis_pin(
    seed_journal_dir: Path, tmp_path: Path
) -> None:
    sentinels = Sentinels(tmp_path)
    state = tmp_path / "state"
    try:
        first = sentinels.start("--journal-dir", str(seed_journal_dir), state=state)
        wait_until(lambda: counts(first)["finding_raised"] == 3, 20, "three findings raised")
        stop(first)
        assert counts(first)["startup_recorded"] == 2
        assert counts(first)["finding_raised"] == 3

        # While the sentinel was down, the second (running) startup logged a decode batch line.
        later = StartupScript(
            invocation_id=SEED_2, pid=SEED_2_PID, start="2026-03-09 23:30:00"
        ).line(DECODE)
        build_journal(write_export(later.entries(), tmp_path / "d.export"), seed_journal_dir, "d")

        second = sentinels.start("--journal-dir", str(seed_journal_dir), state=state)
        # The line is read and its startup re-saved (the gauge comes from the saved record).
        wait_until(second.scrape_with(f"{GEN} 1234.5"), 20, "the decode line on /metrics")

        pin = subprocess.run(
            sentinel_argv("baseline", "--pin", SEED_1[:8], "--state-dir", str(state)),
            capture_output=True,
            text=True,
            timeout=30,
            env=clean_env(),
        )
        assert pin.returncode == 0, pin.stderr
        pinned = second.wait_event("baseline_pinned")
        assert (pinned["unit"], pinned["invocation"]) == (UNIT, SEED_1[:8])
        stop(second)  # every line it was going to log is written now
        seen = counts(second)
        assert seen["startup_recorded"] == 0, second.stderr()
        assert seen["finding_raised"] == 0, second.stderr()
        assert seen["finding_cleared"] == 0, second.stderr()
        assert seen["baseline_pinned"] == 1
    finally:
        sentinels.stop_all()
