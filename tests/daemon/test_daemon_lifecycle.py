"""`sentinel run` as a process: signals, sd_notify, reload, bad config, busy port, HTTP paths.

Every test starts the real command in a subprocess and talks to it the way systemd and
Prometheus do: signals, a NOTIFY_SOCKET datagram socket, HTTP scrapes.
"""

from __future__ import annotations

import itertools
import os
import select
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import journaltools
import pytest
import standin_sglang
from sentinelproc import Sentinel, free_port, sentinel_argv, wait_until

from sglang_sentinel.sources import file_reader_path, reader_path

UNIT = "sglang-qwen.service"  # the seed journal's unit (journal files, not a live unit)
# The live tests' unit: a name unique to this test run, never a real service's.
LIVE_UNIT = journaltools.unique_unit("sglang-qwen")


# -- the sentinel under test ----------------------------------------------------------------------


# -- (a) SIGTERM ----------------------------------------------------------------------------------


def test_sigterm_exits_0_within_2_seconds(
    start_sentinel: Callable[..., Sentinel], seed_journal_dir: Path, tmp_path: Path
) -> None:
    """SIGTERM to an idle, caught-up daemon: exit status 0 less than 2 s after the signal."""
    s = start_sentinel("--journal-dir", str(seed_journal_dir), "--state-dir", str(tmp_path / "s"))
    wait_until(
        lambda: (
            'sglang_sentinel_max_running_requests{unit="sglang-qwen.service"} 26.0' in s.scrape()
        ),
        15,
        "the seed journal's second startup on /metrics",
    )
    t0 = time.monotonic()
    s.proc.send_signal(signal.SIGTERM)
    code = s.proc.wait(timeout=10)
    elapsed = time.monotonic() - t0
    assert code == 0, s.stderr()
    assert elapsed < 2.0, f"exit took {elapsed:.2f}s after SIGTERM"
    assert s.events()[-1]["event"] == "sentinel_stopped"
    assert "Traceback" not in s.stderr()
    # Its start names the readers it runs: pip leaves an optional C reader out quietly.
    (started,) = [e for e in s.events() if e["event"] == "sentinel_started"]
    assert (started["journal_reader"], started["file_reader"]) == (
        reader_path(),
        file_reader_path(),
    )


# -- (b) sd_notify ----------------------------------------------------------------------------------


class NotifySocket:
    """An AF_UNIX datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self, address: str, bind_to: str | bytes) -> None:
        self.address = address  # what goes into $NOTIFY_SOCKET
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(bind_to)
        self.messages: list[tuple[float, str]] = []  # (monotonic receive time, datagram)

    def _pump(self, timeout: float) -> None:
        ready, _, _ = select.select([self.sock], [], [], max(timeout, 0))
        while ready:
            data = self.sock.recv(4096).decode()
            now = time.monotonic()
            # sd_notify may pack several assignments in one datagram, one per line.
            self.messages.extend((now, part) for part in data.split("\n") if part)
            ready, _, _ = select.select([self.sock], [], [], 0)

    def wait_for(self, predicate: Callable[[str], bool], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for _, msg in self.messages[seen:]:
                if predicate(msg):
                    return msg
            seen = len(self.messages)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no {what} on NOTIFY_SOCKET after {timeout}s; got {self.messages}")
            self._pump(min(remaining, 0.1))

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=["path", "abstract"])
def notify_socket(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[NotifySocket]:
    if request.param == "path":
        path = str(tmp_path / "notify.sock")
        sock = NotifySocket(path, path)
    else:
        name = f"sentinel-test-notify-{os.getpid()}-{time.monotonic_ns()}"
        sock = NotifySocket("@" + name, b"\0" + name.encode())
    yield sock
    sock.close()


def test_sd_notify_ready_after_bind_then_status_then_stopping(
    start_sentinel: Callable[..., Sentinel],
    notify_socket: NotifySocket,
    seed_journal_dir: Path,
    tmp_path: Path,
) -> None:
    """READY=1 only once /metrics answers; STATUS= follows; SIGTERM sends STOPPING=1."""
    s = start_sentinel(
        "--journal-dir",
        str(seed_journal_dir),
        "--state-dir",
        str(tmp_path / "s"),
        env={"NOTIFY_SOCKET": notify_socket.address},
        ready=False,
    )
    notify_socket.wait_for(lambda m: m == "READY=1", 15, "READY=1")
    # No retry: when READY=1 has been sent, the port must already be listening.
    status, _, body = s.get("/metrics")
    assert status == 200 and "sglang_sentinel_build_info" in body
    status_msg = notify_socket.wait_for(lambda m: m.startswith("STATUS="), 10, "STATUS=")
    assert status_msg.startswith(f"STATUS={UNIT}: ")
    # The status settles on the caught-up state of the seed journal.
    notify_socket.wait_for(
        lambda m: m == f"STATUS={UNIT}: ready, 4 finding(s) vs previous", 10, "the final STATUS"
    )
    s.proc.send_signal(signal.SIGTERM)
    notify_socket.wait_for(lambda m: m == "STOPPING=1", 5, "STOPPING=1")
    assert s.proc.wait(timeout=10) == 0
    order = [m for _, m in notify_socket.messages if m in ("READY=1", "STOPPING=1")]
    assert order == ["READY=1", "STOPPING=1"]


@pytest.mark.parametrize("watchdog_pid", ["unset", "child"])
def test_watchdog_pings_arrive_within_half_the_watchdog_interval(
    start_sentinel: Callable[..., Sentinel],
    seed_journal_dir: Path,
    tmp_path: Path,
    watchdog_pid: str,
) -> None:
    """WATCHDOG_USEC=1000000: WATCHDOG=1 keeps arriving (every 0.5 s), never a whole interval
    apart. (At 200 ms the test failed on a loaded 2-core machine, a 222 ms gap: half the
    interval is the daemon's slack and the scheduler's, which a busy machine can take.)"""
    path = str(tmp_path / "notify.sock")
    sock = NotifySocket(path, path)
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000"}
    state = str(tmp_path / "s")
    try:
        if watchdog_pid == "child":
            # WATCHDOG_PID must be the sentinel's own PID: the shell's PID survives `exec`.
            argv = sentinel_argv(
                "run",
                "--journal-dir",
                str(seed_journal_dir),
                "--state-dir",
                state,
                "--listen",
                f"127.0.0.1:{free_port()}",
            )
            environ = {k: v for k, v in os.environ.items() if not k.startswith("WATCHDOG_")}
            environ.update(env)
            proc = subprocess.Popen(
                ["/bin/sh", "-c", 'WATCHDOG_PID=$$ exec "$@"', "sh", *argv],
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        else:
            proc = start_sentinel(
                "--journal-dir", str(seed_journal_dir), "--state-dir", state, env=env, ready=False
            ).proc
        try:
            sock.wait_for(lambda m: m == "READY=1", 15, "READY=1")
            first = len(sock.messages)
            sock.wait_for(lambda m: m == "WATCHDOG=1", 2, "a first WATCHDOG=1")
            # Watch an idle daemon for 3 s: the loop must wake for the watchdog on its own.
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                sock._pump(deadline - time.monotonic())
            pings = [t for t, m in sock.messages[first:] if m == "WATCHDOG=1"]
            gaps = [b - a for a, b in itertools.pairwise(pings)]
            assert len(pings) >= 5, f"{len(pings)} pings in ~3 s"
            assert max(gaps) < 1.0, f"longest gap between pings {max(gaps):.3f}s"
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
    finally:
        sock.close()


def test_no_watchdog_pings_when_watchdog_pid_is_another_process(
    start_sentinel: Callable[..., Sentinel], seed_journal_dir: Path, tmp_path: Path
) -> None:
    """WATCHDOG_PID names another process: the watchdog is not ours, so no WATCHDOG=1."""
    path = str(tmp_path / "notify.sock")
    sock = NotifySocket(path, path)
    try:
        s = start_sentinel(
            "--journal-dir",
            str(seed_journal_dir),
            "--state-dir",
            str(tmp_path / "s"),
            env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000", "WATCHDOG_PID": "1"},
            ready=False,
        )
        sock.wait_for(lambda m: m == "READY=1", 15, "READY=1")
        # STATUS= is sent from the same housekeeping step that would ping the watchdog.
        sock.wait_for(lambda m: m.startswith("STATUS="), 5, "STATUS=")
        s.proc.send_signal(signal.SIGTERM)
        sock.wait_for(lambda m: m == "STOPPING=1", 5, "STOPPING=1")
        assert "WATCHDOG=1" not in [m for _, m in sock.messages]
        assert s.proc.wait(timeout=10) == 0
    finally:
        sock.close()


# -- (c) SIGHUP with a broken rule file ---------------------------------------------------------

CUSTOM_RULE = """\
version: 1
rules:
  - id: http_access
    description: A served request (the reload test's own rule).
    scope: runtime
    contains: "POST /v1/chat/completions"
    regex: '"POST /v1/chat/completions HTTP/1\\.1" 200'
    samples:
      match:
        - line: '[2026-03-09 21:41:30] INFO:     10.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
          facts: {}
      no_match:
        - "[2026-03-09 21:41:22 TP0] Decode batch, #running-req: 3"
"""

BROKEN_RULE = """\
version: 1
rules:
  - id: Broken-Id
    contains: "x"
    regex: '(unclosed'
"""


def test_sighup_with_a_broken_rule_file_keeps_the_old_rules(
    start_sentinel: Callable[..., Sentinel],
    live_journald: journaltools.LiveJournald,
    tmp_path: Path,
) -> None:
    """A rule file broken before SIGHUP: reload_rejected logged and counted, old rules go on."""
    rules_dir = tmp_path / "rules.d"
    rules_dir.mkdir()
    (rules_dir / "60-custom.yaml").write_text(CUSTOM_RULE)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"units: [{LIVE_UNIT}]\n"
        f"journal: {{directory: {live_journald.journal_dir}}}\n"
        f"state_dir: {tmp_path / 's'}\n"
        f"rules: {{dirs: [{rules_dir}]}}\n"
        "log: {format: json}\n"
    )
    s = start_sentinel("--config", str(config))
    hits = 'sglang_sentinel_rule_matches_total{rule="http_access"}'

    standin_sglang.run(
        live_journald, 1, "6a1f0c2e9b7d4e3f8a5b1c0d2e4f6a8b", unit=LIVE_UNIT, delay_ms=0
    )
    wait_until(lambda: f"{hits} 2.0" in s.scrape(), 20, "the custom rule's two matches")

    (rules_dir / "70-broken.yaml").write_text(BROKEN_RULE)
    s.proc.send_signal(signal.SIGHUP)
    rejected = s.wait_event("reload_rejected")
    problems = "\n".join(map(str, rejected["problems"]))  # type: ignore[call-overload]
    assert "70-broken.yaml" in problems
    wait_until(
        lambda: "sglang_sentinel_rule_load_errors_total 1.0" in s.scrape(), 5, "the error count"
    )
    assert s.proc.poll() is None

    # The old rule set (with the custom rule) still applies to what comes next.
    standin_sglang.run(
        live_journald, 2, "c37e91d04a5b4f6e9d8c7b6a5f4e3d2c", unit=LIVE_UNIT, delay_ms=0
    )
    # Rule hits are counted as lines are read, startups when committed: wait for both.
    mrr = f'sglang_sentinel_max_running_requests{{unit="{LIVE_UNIT}"}} 26.0'
    wait_until(s.scrape_with(f"{hits} 4.0"), 20, "two more custom matches")
    wait_until(s.scrape_with(mrr), 20, "startup 2 on /metrics")

    # Repaired, the next SIGHUP is accepted.
    (rules_dir / "70-broken.yaml").unlink()
    s.proc.send_signal(signal.SIGHUP)
    s.wait_event("reload_done")
    assert "sglang_sentinel_rule_load_errors_total 1.0" in s.scrape()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=10) == 0


# -- (d) bad config, (e) busy port -------------------------------------------------------------


def test_bad_config_exits_2_naming_every_mistake_by_its_dotted_path(tmp_path: Path) -> None:
    """Three mistakes in one file: exit 2 within seconds, each named by its path, no traceback."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "units: [sglang-qwen.service]\n"
        "listen: 127.0.0.1:99999\n"
        "log:\n  format: fancy\n"
        "journal:\n  directroy: /var/log/journal\n"
    )
    t0 = time.monotonic()
    result = subprocess.run(
        sentinel_argv("run", "--config", str(config), "--state-dir", str(tmp_path / "s")),
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.monotonic() - t0
    assert result.returncode == 2, result.stderr
    assert elapsed < 10
    err = result.stderr
    assert "Traceback" not in err
    assert f"{config}: listen: port must be 1..65535" in err
    assert f"{config}: log.format: must be one of auto, json, console; got 'fancy'" in err
    assert f"{config}: journal: unknown key 'directroy' (did you mean 'directory'?)" in err
    assert result.stdout == ""


def test_port_in_use_exits_nonzero_with_one_line(seed_journal_dir: Path, tmp_path: Path) -> None:
    """Someone else listens on the port: a non-zero exit and a one-line error, no traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            sentinel_argv(
                "run",
                "--journal-dir",
                str(seed_journal_dir),
                "--state-dir",
                str(tmp_path / "s"),
                "--listen",
                f"127.0.0.1:{port}",
            ),
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
        )
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: cannot listen on 127.0.0.1:{port}: Address already in use"], (
        result.stderr
    )


# -- (f) HTTP paths ------------------------------------------------------------------------------


def test_landing_page_links_metrics_and_unknown_paths_are_404(
    start_sentinel: Callable[..., Sentinel], seed_journal_dir: Path, tmp_path: Path
) -> None:
    s = start_sentinel("--journal-dir", str(seed_journal_dir), "--state-dir", str(tmp_path / "s"))
    status, ctype, body = s.get("/")
    assert status == 200
    assert ctype.startswith("text/html")
    assert '<a href="/metrics">' in body
    status, ctype, body = s.get("/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    status, _, body = s.get("/nope")
    assert status == 404
    assert "/metrics" in body
