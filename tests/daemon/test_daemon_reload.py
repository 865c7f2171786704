"""SIGHUP applies every setting it can, and names the ones that wait for a restart."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from sentinelproc import Sentinel, free_port, wait_until


class _Receiver(HTTPServer):
    """A stand-in Alertmanager: records the alert names of every POST to /api/v2/alerts."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.alertnames: list[str] = []


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/api/v2/alerts":
            self.server.alertnames += [a["labels"]["alertname"] for a in json.loads(body)]
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_sighup_applies_alertmanager_and_names_restart_only_keys(
    start_sentinel: Callable[..., Sentinel],
    seed_journal_dir: Path,
    receiver: _Receiver,
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yaml"
    base = (
        "units: [sglang-qwen.service]\n"
        f"journal: {{directory: {seed_journal_dir}}}\n"
        f"state_dir: {tmp_path / 's'}\n"
        "log: {format: json}\n"
    )
    config.write_text(base)
    port = free_port()
    # --listen on the command line overrides the file: a reload must not see it as a change.
    s = start_sentinel("--config", str(config), port=port)
    wait_until(
        s.scrape_with('sglang_sentinel_max_running_requests{unit="sglang-qwen.service"} 26.0'),
        20,
        "the seed journal's second startup on /metrics",
    )
    assert receiver.alertnames == []

    config.write_text(
        base.replace("units: [sglang-qwen.service]", "units: [sglang-qwen.service, other.service]")
        + f"alertmanager: {{urls: ['http://127.0.0.1:{receiver.server_port}']}}\n"
        + "checkpoint_interval_seconds: 1\n"
    )
    s.proc.send_signal(signal.SIGHUP)
    s.wait_event("reload_done")
    partial = [e for e in s.events() if e["event"] == "reload_partial"]
    assert [e["needs_restart"] for e in partial] == [["units"]], partial
    # The new Alertmanager receives the open findings without a new journal entry.
    wait_until(
        lambda: "SGLangCapacityDropped" in receiver.alertnames or None,
        15,
        "a push to the Alertmanager configured by the reload",
    )
    assert s.proc.poll() is None
    # Units changed only after a restart: the new unit is not watched yet.
    assert 'unit="other.service"' not in s.scrape()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=10) == 0, s.stderr()
