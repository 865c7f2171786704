"""The stand-in SGLang server's systemd modes, used by the end-to-end (tests/e2e/)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import standin_sglang

STANDIN = Path(__file__).resolve().parent / "standin_sglang.py"


def test_crash_after_prints_the_first_lines_and_exits_with_the_status() -> None:
    result = subprocess.run(
        [sys.executable, str(STANDIN), "--startup", "2", "--crash-after", "3", "--exit-code", "3"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 3
    assert result.stdout.split(b"\n") == [*standin_sglang.service_lines(2)[:3], b""]


def test_serve_stays_up_after_the_startup_until_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(STANDIN), "--startup", "1", "--delay-ms", "0", "--serve"],
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    want = standin_sglang.service_lines(1)
    got = [proc.stdout.readline().rstrip(b"\n") for _ in want]
    assert got == want
    with pytest.raises(subprocess.TimeoutExpired):  # still up a second after the ready line
        proc.wait(timeout=1.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
