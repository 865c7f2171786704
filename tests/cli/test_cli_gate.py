"""The deploy gate (`check`: pending vs pass, `--wait`) and the small CLI contracts around it."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from journaltools import StartupScript, build_journal, ready_startup
from sentinelproc import wait_until

from sglang_sentinel.cli import EXIT_PENDING, main, parse_since
from sglang_sentinel.errors import UsageError

UNIT = "sglang-qwen.service"


def _starting_then_ready(tmp_path: Path) -> tuple[Path, Path]:
    """Two journals of one invocation: up to the summary line, and the whole startup."""
    first = ready_startup("2026-01-02 10:00:00", 48).write(tmp_path / "base.export")

    # A minute ago: well inside the stall time (15 minutes), so "starting" means pending.
    start = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=60)

    def script() -> StartupScript:
        s = StartupScript(start=start, boot_at="2026-01-01 00:00:00", invocation_id="ab" * 16)
        s.started(start)
        s.line(
            f"[{start + timedelta(seconds=5):%Y-%m-%d %H:%M:%S} TP0] max_total_num_tokens=1000, "
            "chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, "
            "context_len=4096, available_gpu_mem=10.00 GB"
        )
        return s

    starting = build_journal([first, script().write(tmp_path / "s.export")], tmp_path / "j1")
    done = script().line(
        f"[{start + timedelta(seconds=9):%Y-%m-%d %H:%M:%S}] The server is fired up and ready to roll!"
    )
    ready = build_journal([first, done.write(tmp_path / "r.export")], tmp_path / "j2")
    return starting, ready


# `sentinel check` (cli.main) with each sleep between two reads of the state said on stderr: a
# test can see the gate waiting on a startup it has read as starting (it prints nothing else
# before its verdict).
_GATE = """\
import sys, time
from sglang_sentinel import cli
sleep = time.sleep
def polling(seconds):
    print("gate: still starting, polling", file=sys.stderr, flush=True)
    sleep(seconds)
time.sleep = polling
raise SystemExit(cli.main(sys.argv[1:]))
"""


def _scan(journal: Path, state: Path) -> None:
    assert main(["scan", "--journal-dir", str(journal), "--state-dir", str(state)]) == 0


def test_check_on_a_startup_still_starting_exits_pending_not_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    starting, _ = _starting_then_ready(tmp_path)
    _scan(starting, tmp_path / "state")
    capsys.readouterr()
    code = main(["check", "--unit", UNIT, "--state-dir", str(tmp_path / "state")])
    out = capsys.readouterr().out
    assert code == EXIT_PENDING == 4
    assert "pending" in out


def test_check_wait_returns_the_verdict_once_the_startup_is_decided(tmp_path: Path) -> None:
    starting, ready = _starting_then_ready(tmp_path)
    state = tmp_path / "state"
    _scan(starting, state)
    argv = [sys.executable, "-c", _GATE, "check", "--unit", UNIT]
    err_path = tmp_path / "gate.stderr"
    with err_path.open("wb") as err_file:
        gate = subprocess.Popen(
            [*argv, "--state-dir", str(state), "--wait", "60"],
            stdout=subprocess.PIPE,
            stderr=err_file,
        )
    try:
        # The gate is waiting: it has read "starting" at least once (a fixed pause was shorter
        # than the interpreter's start on a busy machine).
        wait_until(
            lambda: gate.poll() is not None or b"polling" in err_path.read_bytes(),
            30,
            "the gate polling a startup still starting",
        )
        assert gate.poll() is None, err_path.read_text()
        began = time.monotonic()
        _scan(ready, state)
        out, _ = gate.communicate(timeout=30)
        took = time.monotonic() - began
    finally:
        if gate.poll() is None:
            gate.kill()
            gate.wait()
    err = err_path.read_text()
    assert gate.returncode == 0, err
    assert b"pending" not in out
    assert took < 5  # polls every 0.5 s; far below the 60 s it was allowed


def test_check_wait_times_out_as_pending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    starting, _ = _starting_then_ready(tmp_path)
    _scan(starting, tmp_path / "state")
    began = time.monotonic()
    code = main(["check", "--unit", UNIT, "--state-dir", str(tmp_path / "state"), "--wait", "1.2"])
    took = time.monotonic() - began
    assert code == EXIT_PENDING
    assert 1.2 <= took < 5


def test_check_wait_rejects_a_bad_duration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--state-dir", str(tmp_path), "--wait", "soon"]) == 2
    assert "not a number of seconds" in capsys.readouterr().err


def test_since_with_a_leading_dash_as_a_separate_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--since -2h` (as the README writes it) is a value, not an unknown option."""
    journal = build_journal(
        ready_startup("2026-01-02 10:00:00", 48).write(tmp_path / "a.export"), tmp_path / "j"
    )
    state = tmp_path / "state"
    base = ["scan", "--journal-dir", str(journal), "--state-dir", str(state), "--json"]
    assert main([*base, "--since", "-2h"]) == 0
    assert '"startups": []' in capsys.readouterr().out  # 2026-01-02 is long before 2 h ago
    assert main([*base, "--since", "2026-01-01"]) == 0
    assert '"outcome": "ready"' in capsys.readouterr().out


def test_since_before_1970_is_a_clear_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UsageError, match="before 1970"):
        parse_since("1969-12-31 23:00", now=1_800_000_000)
    with pytest.raises(UsageError, match="before 1970"):
        parse_since("-100000d", now=1_800_000_000)
    assert parse_since("-2h", now=1_800_000_000) == 1_800_000_000 - 7200
    code = main(["scan", "--state-dir", str(tmp_path / "s"), "--since", "1900-01-01"])
    assert code == 2
    assert "before 1970" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()  # refused before any work


def test_rules_check_of_a_directory_without_rule_files_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "policy.yaml").write_text("version: 1\nchecks: {}\n")
    (tmp_path / "notes.txt").write_text("not a rule file\n")
    code = main(["rules", "check", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"{tmp_path}:-: no rule files" in out
    assert "rules ok" not in out


def test_unicode_digits_are_not_numbers() -> None:
    """`\\d` and int() accept "٤٨" (Arabic-Indic 48); a fact or a server_args value must not."""
    from sglang_sentinel.rules import default_rules_dir, load_rules
    from sglang_sentinel.rules.ruleset import convert
    from sglang_sentinel.serverargs import parse_server_args

    assert convert("int", "٤٨") is None
    assert convert("float", "١٢.٥") is None
    assert convert("gb", "١٢.٥ GB") is None
    assert convert("int", "48") == 48
    rules = load_rules([default_rules_dir()])
    line = (
        "[2026-01-03 10:00:50 TP0] max_total_num_tokens=١٠٠٠, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=٤٨, context_len=4096, "
        "available_gpu_mem=10.00 GB"
    )
    for match in rules.match(line):
        assert match.facts.get("max_running_requests") != 48
        assert match.facts.get("max_total_num_tokens") != 1000
    args = parse_server_args("ServerArgs(tp_size=٤, dp_size=2)").args
    assert args["dp_size"] == 2 and args["tp_size"] != 4
