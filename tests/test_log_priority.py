"""Log levels reach the journal as PRIORITY: warnings and errors show with `journalctl -p warning`.

Under systemd, stderr is a journald stream and JOURNAL_STREAM names it; the sentinel then starts
every line with `<N>` (syslog level), which journald strips and stores as PRIORITY. Checked with
the real standalone journald of tests/support/journaltools.py.
"""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path

import journaltools
import pytest
import structlog
from sentinelproc import clean_env, free_port, wait_until

from sglang_sentinel.logs import configure_logging, journal_stream_connected, print_error

BROKEN_RULE = """\
version: 1
rules:
  - id: Broken-Id
    contains: "x"
    regex: '(unclosed'
"""


def test_invalid_rules_is_stored_at_priority_err(
    live_journald: journaltools.LiveJournald, tmp_path: Path
) -> None:
    """`error: invalid rules` and each problem line: PRIORITY 3, the `<3>` itself not stored."""
    unit = journaltools.unique_unit("sentinel-prio")
    rules = tmp_path / "rules.d"
    rules.mkdir()
    (rules / "70-broken.yaml").write_text(BROKEN_RULE)
    config = tmp_path / "config.yaml"
    config.write_text(f"units: [{unit}]\nrules: {{dirs: [{rules}]}}\n")
    proc = live_journald.run_in_unit(
        unit,
        [sys.executable, "-m", "sglang_sentinel.cli", "run", "--config", str(config)],
        env=clean_env({"SENTINEL_STATE_DIR": str(tmp_path / "s")}),
        journal_stream_env=True,
    )
    assert proc.wait(timeout=60) == 2
    entries = live_journald.wait_for_entries(2, _SYSTEMD_UNIT=unit)
    messages = [e["MESSAGE"].decode() for e in entries]
    assert messages[0] == "error: invalid rules:"
    assert any("70-broken.yaml" in m for m in messages[1:])
    assert {int(e["PRIORITY"]) for e in entries} == {3}
    assert not any(m.startswith("<") for m in messages)


def test_daemon_events_carry_their_level_as_priority(
    live_journald: journaltools.LiveJournald, seed_journal_dir: Path, tmp_path: Path
) -> None:
    """info -> 6, a rejected reload (error) -> 3, a partial reload and the seed journal's findings
    (warnings) -> 4; `-p warning` (PRIORITY <= 4) selects exactly those."""
    unit = journaltools.unique_unit("sentinel-prio")
    rules = tmp_path / "rules.d"
    rules.mkdir()
    config = tmp_path / "config.yaml"
    port = free_port()
    body = (
        f"journal: {{directory: {seed_journal_dir}}}\nstate_dir: {tmp_path / 's'}\n"
        f"listen: 127.0.0.1:{port}\nrules: {{dirs: [{rules}]}}\nlog: {{format: json}}\n"
    )
    config.write_text("units: [sglang-qwen.service]\n" + body)
    proc = live_journald.run_in_unit(
        unit,
        [sys.executable, "-m", "sglang_sentinel.cli", "run", "--config", str(config)],
        env=clean_env(),
        journal_stream_env=True,
    )
    try:

        def events() -> dict[str, int]:
            out = {}
            for e in live_journald.entries(_SYSTEMD_UNIT=unit):
                message = e["MESSAGE"].decode()
                assert not message.startswith("<"), message
                if '"event": "' in message:
                    name = message.split('"event": "', 1)[1].split('"', 1)[0]
                    out[name] = int(e["PRIORITY"])
            return out

        wait_until(lambda: "sentinel_started" in events(), 30, "sentinel_started in the journal")
        (rules / "70-broken.yaml").write_text(BROKEN_RULE)
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "reload_rejected" in events(), 30, "reload_rejected in the journal")
        (rules / "70-broken.yaml").unlink()
        config.write_text("units: [sglang-llama.service]\n" + body)
        proc.send_signal(signal.SIGHUP)
        wait_until(lambda: "reload_partial" in events(), 30, "reload_partial in the journal")
        seen = events()
        assert seen["sentinel_started"] == 6
        assert seen["reload_rejected"] == 3
        assert seen["reload_partial"] == 4
        assert seen["finding_raised"] == 4
        assert {k for k, v in seen.items() if v <= 4} == {
            "reload_rejected",
            "reload_partial",
            "finding_raised",
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_journal_stream_is_recognised_by_device_and_inode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the very stream JOURNAL_STREAM names counts: not another file, not a bad value."""
    with (tmp_path / "a").open("w") as a, (tmp_path / "b").open("w") as b:
        st = os.fstat(a.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        assert journal_stream_connected(a)
        assert not journal_stream_connected(b)
        assert not journal_stream_connected(io.StringIO())
        monkeypatch.setenv("JOURNAL_STREAM", "garbage")
        assert not journal_stream_connected(a)
        monkeypatch.delenv("JOURNAL_STREAM")
        assert not journal_stream_connected(a)


def test_prefix_only_on_the_journal_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A redirected stderr (a file) gets plain lines even with JOURNAL_STREAM inherited."""
    path, other = tmp_path / "journal-stand-in", tmp_path / "elsewhere"
    with path.open("w") as stream, other.open("w") as elsewhere:
        st = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        configure_logging("json", "debug", stream=stream)
        structlog.get_logger().warning("cursor_reset", reason="x")
        structlog.get_logger().debug("noise")
        configure_logging("json", "debug", stream=elsewhere)
        structlog.get_logger().error("journal_read_failed", error="x")
        monkeypatch.setattr(sys, "stderr", stream)
        print_error("error: invalid rules:\nrules/x.yaml:a: bad")
    lines = path.read_text().splitlines()
    assert [line[:3] for line in lines] == ["<4>", "<7>", "<3>", "<3>"]
    assert lines[2:] == ["<3>error: invalid rules:", "<3>rules/x.yaml:a: bad"]
    assert other.read_text().startswith("{")
