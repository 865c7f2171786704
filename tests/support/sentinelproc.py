"""`sentinel` as a real subprocess for tests: start it, poll it, scrape its /metrics, stop it.

Shared by the daemon tests (test_daemon_*.py) and the Alertmanager end-to-end test. Nothing
here is a mock: `sentinel run` is started with the interpreter running the tests, its stderr
goes to a file, and it is observed the way systemd and Prometheus would see it (its JSON log
lines and HTTP scrapes). Import it like journaltools: tests/support/ is on sys.path (pyproject's
pytest `pythonpath`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")

# Environment variables a test's own environment must not hand down to a sentinel: systemd's
# notify/watchdog protocol (a test sets these itself when it means to) ...
_INHERITED_PREFIXES = ("NOTIFY_", "WATCHDOG_")
# ... and the state directory, which every test chooses explicitly.
_INHERITED_NAMES = ("SENTINEL_STATE_DIR",)


def wait_until(check: Callable[[], T | None], timeout: float, what: str, step: float = 0.05) -> T:
    """Poll `check` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            # A check that can say what it saw (a daemon's scrape: its stderr's tail) says it.
            explain = getattr(check, "explain", None)
            detail = f"\n{explain()}" if callable(explain) else ""
            pytest.fail(f"timed out after {timeout}s waiting for {what}{detail}")
        time.sleep(step)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sentinel_argv(*args: str) -> list[str]:
    """`sentinel ARGS` run with this interpreter, so the checkout under test is what runs."""
    return [sys.executable, "-m", "sglang_sentinel.cli", *args]


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment minus NOTIFY_*, WATCHDOG_* and SENTINEL_STATE_DIR, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_PREFIXES)}
    for name in _INHERITED_NAMES:
        env.pop(name, None)
    env.update(extra or {})
    return env


def popen_sentinel(
    args: Sequence[str], stderr_path: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start `sentinel ARGS` in `clean_env(env)`: no stdin or stdout, stderr to `stderr_path`."""
    with stderr_path.open("wb") as stderr:
        return subprocess.Popen(
            sentinel_argv(*args),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=clean_env(env),
        )


def cli_stdout(*args: str, timeout: float) -> str:
    """Run a one-shot `sentinel ARGS` in `clean_env()`; its stdout, or fail on a non-zero exit."""
    return subprocess.run(
        sentinel_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
        env=clean_env(),
    ).stdout


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL `proc` if it still runs, and reap it."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


@dataclass
class Sentinel:
    """One running `sentinel run`, listening on 127.0.0.1:`port`."""

    proc: subprocess.Popen[bytes]
    port: int
    stderr_path: Path
    state: Path | None = None  # its --state-dir, when it was started with `state=`

    def url(self, path: str = "/metrics") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str = "/metrics") -> tuple[int, str, str]:
        """(status, content type, body) of one HTTP GET; error statuses are returned, not raised."""
        try:
            with urllib.request.urlopen(self.url(path), timeout=5) as resp:
                return resp.status, resp.headers["Content-Type"], resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], exc.read().decode()

    def scrape(self) -> str:
        """The /metrics body; an error status raises (urllib.error.HTTPError)."""
        with urllib.request.urlopen(self.url(), timeout=5) as resp:
            return str(resp.read().decode())

    def check_alive(self) -> None:
        """Fail the test, with the daemon's stderr, if it has exited."""
        if self.proc.poll() is not None:
            pytest.fail(f"sentinel exited with {self.proc.returncode}: {self.stderr()}")

    def scrape_when(self, predicate: Callable[[str], bool]) -> Callable[[], str | None]:
        """A check for wait_until: the /metrics body once `predicate(body)` holds; at a
        timeout wait_until shows the daemon's stderr (its last lines)."""
        return _ScrapeCheck(self, predicate)

    def scrape_with(self, text: str) -> Callable[[], str | None]:
        """A check for wait_until: the /metrics body once it contains `text`."""
        return self.scrape_when(lambda body: text in body)

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def events(self) -> list[dict[str, object]]:
        """The JSON log lines written so far (stderr is not a TTY, so logs are JSON)."""
        return [json.loads(line) for line in self.stderr().splitlines() if line.startswith("{")]

    def logged(self, event: str) -> bool:
        """True once the daemon has logged `event`; fails the test if it has exited."""
        self.check_alive()
        return f'"event": "{event}"' in self.stderr()

    def wait_event(self, event: str, timeout: float = 15.0) -> dict[str, object]:
        """The first log line of `event`, waited for; fails the test if the daemon exits."""

        def found() -> dict[str, object] | None:
            self.check_alive()
            return next((e for e in self.events() if e.get("event") == event), None)

        return wait_until(found, timeout, f"log event {event}")


class _ScrapeCheck:
    """Sentinel.scrape_when's check, which can explain a timeout (wait_until)."""

    def __init__(self, sentinel: Sentinel, predicate: Callable[[str], bool]) -> None:
        self._sentinel = sentinel
        self._predicate = predicate

    def __call__(self) -> str | None:
        self._sentinel.check_alive()
        body = self._sentinel.scrape()
        return body if self._predicate(body) else None

    def explain(self, lines: int = 40) -> str:
        tail = self._sentinel.stderr().splitlines()[-lines:]
        return "the daemon's stderr, last lines:\n" + "\n".join(tail)


@dataclass
class Sentinels:
    """Starts `sentinel run` processes with their stderr in `log_dir`; `stop_all()` reaps them."""

    log_dir: Path
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(
        self,
        *args: str,
        state: Path | None = None,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        ready: bool = True,
    ) -> Sentinel:
        """`sentinel run ARGS [--state-dir STATE] --listen 127.0.0.1:PORT` (a free port by default).

        `env` is added to `clean_env()`. With `ready`, returns once the daemon has logged
        sentinel_started, which it does after binding the port and installing its signal handlers.
        """
        port = port or free_port()
        err = self.log_dir / f"sentinel-{len(self.started)}.stderr"
        argv = [*args, *(("--state-dir", str(state)) if state is not None else ())]
        proc = popen_sentinel(["run", *argv, "--listen", f"127.0.0.1:{port}"], err, env)
        self.started.append(proc)
        sentinel = Sentinel(proc, port, err, state)
        if ready:
            sentinel.wait_event("sentinel_started")
        return sentinel

    def stop_all(self) -> None:
        for proc in self.started:
            stop(proc)


def scrape_in_process(
    journal: Path,
    state: Path,
    units: Sequence[str] = (),
    containers: Sequence[str] = (),
    docker_units: Sequence[str] = (),
) -> str:
    """/metrics of a Daemon that has read `journal` once (in this process, no HTTP, no loop)."""
    from prometheus_client import generate_latest

    from sglang_sentinel.config import load_config
    from sglang_sentinel.daemon import Daemon

    overrides: dict[str, object] = {"journal.directory": str(journal), "state_dir": str(state)}
    if units or containers:
        overrides["units"] = list(units)
        overrides["containers"] = list(containers)
    if docker_units:
        overrides["docker_units"] = list(docker_units)
    daemon = Daemon.from_config(load_config(overrides=overrides, environ={}))
    daemon.source.open()
    try:
        daemon.pipeline.resume(from_boot_start=False)
        daemon._drain()
        return generate_latest(daemon.registry).decode()
    finally:
        daemon.source.close()
        daemon.store.close()


# The clock of alerts_in_process: alerts start at it, and a startup still under way is judged
# at it (so whether it has stalled does not depend on when the test runs).
ALERTS_AT = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def alerts_in_process(journal: Path, state: Path, units: Sequence[str] = ()) -> str:
    """The Alertmanager push (API v2 body, as JSON text) of a Daemon that has read `journal`
    once: its open findings handed to its alert sink, one push, on a fixed clock."""
    from sglang_sentinel.config import Config, load_config
    from sglang_sentinel.daemon import Daemon
    from sglang_sentinel.daemon.alerts import AlertPusher
    from sglang_sentinel.model import Comparison, Stats

    bodies: list[bytes] = []

    def post(url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> tuple[int, str]:
        bodies.append(body)
        return 200, ""

    class Sink:
        """The daemon's alert sink: a real pusher, pushed once by hand instead of its threads."""

        def __init__(self, config: Config, stats: Stats) -> None:
            self.pusher = AlertPusher(
                config.alertmanager, stats=stats, clock=lambda: ALERTS_AT, opener=post
            )

        def start(self) -> None:
            pass

        def update(self, comparisons: Sequence[Comparison]) -> None:
            self.pusher.update(comparisons)

        def stop(self) -> None:
            pass

    overrides: dict[str, object] = {
        "journal.directory": str(journal),
        "state_dir": str(state),
        "alertmanager.urls": ["http://alertmanager.invalid:9093"],
        "alertmanager.instance": "sentinel.invalid:19110",
    }
    if units:
        overrides["units"] = list(units)
    sinks: list[Sink] = []

    def sink(config: Config, stats: Stats) -> Sink:
        sinks.append(Sink(config, stats))
        return sinks[-1]

    config = load_config(overrides=overrides, environ={})
    daemon = Daemon.from_config(config, clock=lambda: ALERTS_AT, sinks=sink)
    daemon.source.open()
    try:
        daemon.pipeline.resume(from_boot_start=False)
        daemon.publish()
        daemon._remember_announced()
        daemon._restart_pusher()
        daemon._drain()  # read, commit, publish, hand the open findings to the sink
        sinks[-1].pusher.flush(force=True)
    finally:
        daemon.source.close()
        daemon.store.close()
    alerts = json.loads(bodies[-1]) if bodies else []
    return json.dumps(alerts, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
