"""The test journal tools produce what systemd itself produces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from journaltools import (
    UNIT_STARTED,
    LiveJournald,
    StartupScript,
    build_journal,
    read_fixture_log,
    seed_fixture_dir,
    unique_unit,
    write_export,
)
from systemd import journal

from tools.demo_files import parse_export

BOOT = "5d1b2a0c9e8f4f7a8b6c5d4e3f2a1b0c"
TEST_UNIT = unique_unit("sentinel-test")


def _entry(n: int, message: bytes | str) -> dict[str, str | bytes]:
    return {
        "__REALTIME_TIMESTAMP": str(1_773_091_867_000_000 + n),
        "__MONOTONIC_TIMESTAMP": str(48_667_000_000 + n),
        "_BOOT_ID": BOOT,
        "_SYSTEMD_UNIT": "sglang-test.service",
        "MESSAGE": message,
    }


def _read_messages(directory: Path) -> list[bytes]:
    reader = journal.Reader(path=str(directory))
    reader.data_threshold = 0  # full fields, not the 64 KiB default
    messages = []
    while reader._next():
        messages.append(reader._get("MESSAGE"))
    reader.close()
    return messages


def test_export_roundtrips_exact_message_bytes_through_a_real_journal(tmp_path: Path) -> None:
    """CR, ESC, invalid UTF-8, a newline and a 60 KB value come back byte for byte."""
    messages: list[bytes | str] = [
        b"plain line",
        b"progress 0%\rprogress 50%\rprogress 100%",
        b"\x1b[1;33mwarning\x1b[0m",
        b"bad utf-8 \xff\xfe here",
        b"two\nlines",
        b"[2026-03-09 21:31:11] server_args=ServerArgs(" + b"x" * 60_000 + b")",
        "unicode ✓ ünits",
    ]
    export = write_export([_entry(n, m) for n, m in enumerate(messages)], tmp_path / "t.export")
    directory = build_journal(export, tmp_path / "journal")
    expected = [m.encode() if isinstance(m, str) else m for m in messages]
    assert _read_messages(directory) == expected


def test_export_uses_binary_form_only_where_systemd_does(tmp_path: Path) -> None:
    data = write_export([_entry(0, b"ok"), _entry(1, b"a\rb")], tmp_path / "t.export").read_bytes()
    assert b"MESSAGE=ok\n" in data
    assert b"MESSAGE\n\x03\x00\x00\x00\x00\x00\x00\x00a\rb\n" in data
    assert parse_export(data)[1]["MESSAGE"] == b"a\rb"


def test_seed_journal_has_206_service_entries(seed_journal_dir: Path) -> None:
    def count(*args: str) -> int:
        out = subprocess.run(
            ["journalctl", "-D", str(seed_journal_dir), "-o", "export", *args],
            capture_output=True,
            check=True,
        ).stdout
        return len(parse_export(out))

    assert count("_SYSTEMD_UNIT=sglang-qwen.service") == 206
    # -u adds PID 1's lines about the unit (Started x2, Stopping, Deactivated, Stopped, Consumed).
    assert count("-u", "sglang-qwen.service") == 206 + 6
    assert count() == 254


def test_read_fixture_log_converts_escapes_and_time_markers() -> None:
    lines = read_fixture_log(seed_fixture_dir() / "startup-1-baseline.log")
    assert lines[0] == (None, b"Started sglang-qwen.service - SGLang Qwen3.5-122B-A10B (TP4).")
    assert lines[-1] == (
        "2026-03-09 23:02:36",
        b"sglang-qwen.service: Consumed 1h 12min 40.311s CPU time.",
    )
    assert any(b"\r" in raw for _, raw in lines)
    assert not any(b"\\r" in raw for _, raw in lines)
    second = read_fixture_log(seed_fixture_dir() / "startup-2-flags-added.log")
    assert any(b"\x1b[1;33m" in raw for _, raw in second)


def test_startup_script_reproduces_the_seed_export() -> None:
    """Replaying each startup's .log gives the export's entries for it, field for field."""
    fixture = seed_fixture_dir()
    seed = parse_export((fixture / "journal.export").read_bytes())
    scenario = json.loads((fixture / "scenario.json").read_text())
    for startup in scenario["startups"]:
        inv = startup["invocation_id"].encode()
        expected = [
            e for e in seed if inv in (e.get("_SYSTEMD_INVOCATION_ID"), e.get("INVOCATION_ID"))
        ]
        script = StartupScript(
            unit=startup["unit"],
            invocation_id=startup["invocation_id"],
            pid=startup["pid"],
            cmdline=startup["cmdline"],
            stream_id=expected[1]["_STREAM_ID"].decode(),
        )
        script.log(read_fixture_log(fixture / startup["log"]))
        built = parse_export(_export_of(script))
        assert built[0]["MESSAGE_ID"] == UNIT_STARTED.encode()
        # The .log abbreviates long CR progress bars ("... (one \\r-separated update ...) ...").
        for got, want in zip(built, expected, strict=True):
            if b"\r" not in got["MESSAGE"]:
                assert got["MESSAGE"] == want["MESSAGE"]
        assert [{**e, "MESSAGE": b""} for e in built] == [{**e, "MESSAGE": b""} for e in expected]


def _export_of(script: StartupScript) -> bytes:
    from journaltools import export_bytes

    return export_bytes(script.entries())


def test_startup_script_failed_start_lines_are_readable_by_unit(tmp_path: Path) -> None:
    script = StartupScript(unit="sglang-fail.service", invocation_id="ab" * 16)
    script.starting().started().line("[2026-03-09 21:31:09] boom").process_exited(1).failed()
    directory = build_journal(script.write(tmp_path / "f.export"), tmp_path / "j")
    out = subprocess.run(
        ["journalctl", "-D", str(directory), "-u", "sglang-fail.service", "-o", "cat"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out == [
        "Starting sglang-fail.service - SGLang Qwen3.5-122B-A10B (TP4)...",
        "Started sglang-fail.service - SGLang Qwen3.5-122B-A10B (TP4).",
        "[2026-03-09 21:31:09] boom",
        "sglang-fail.service: Main process exited, code=exited, status=1/FAILURE",
        "sglang-fail.service: Failed with result 'exit-code'.",
    ]


def test_live_journald_records_unit_and_invocation_id(live_journald: LiveJournald) -> None:
    """A process run in TEST_UNIT logs 3 lines that carry the unit and invocation."""
    invocation = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    script = "import sys\nfor i in range(3): print(f'line {i}', flush=True)\nsys.stdin.read()\n"
    proc = live_journald.run_in_unit(
        TEST_UNIT,
        [sys.executable, "-c", script],
        invocation,
        stdin=subprocess.PIPE,
    )
    # Keep the process alive until journald has the lines, so it can read /proc for _COMM etc.
    entries = live_journald.wait_for_entries(3, _SYSTEMD_UNIT=TEST_UNIT)
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0
    assert [e["MESSAGE"] for e in entries] == [b"line 0", b"line 1", b"line 2"]
    for entry in entries:
        assert entry["_SYSTEMD_UNIT"] == TEST_UNIT.encode()
        assert entry["_SYSTEMD_INVOCATION_ID"] == invocation.encode()
        assert entry["_SYSTEMD_CGROUP"] == f"/system.slice/{TEST_UNIT}".encode()
        assert entry["_TRANSPORT"] == b"stdout"
        assert entry["SYSLOG_IDENTIFIER"] == TEST_UNIT.removesuffix(".service").encode()
        assert entry["_PID"] == str(proc.pid).encode()


def test_live_journald_new_invocation_id_on_restart(live_journald: LiveJournald) -> None:
    """A second start of the same unit with another invocation ID is told apart."""
    for invocation in ("1" * 32, "2" * 32):
        proc = live_journald.run_in_unit(
            TEST_UNIT,
            [sys.executable, "-c", "import sys; print('hello', flush=True); sys.stdin.read()"],
            invocation,
            stdin=subprocess.PIPE,
        )
        live_journald.wait_for_entries(1, _SYSTEMD_INVOCATION_ID=invocation)
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    entries = live_journald.entries(_SYSTEMD_UNIT=TEST_UNIT)
    assert [e["_SYSTEMD_INVOCATION_ID"] for e in entries] == [b"1" * 32, b"2" * 32]
