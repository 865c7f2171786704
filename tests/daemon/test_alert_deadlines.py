"""A stuck Alertmanager silences nobody: one worker per Alertmanager, a deadline per request.

Before, one thread pushed to each Alertmanager in turn with a socket timeout per read: an
Alertmanager answering a byte every 1.5 s held it for good, the healthy one got 0 pushes in 40 s,
and no failure was counted or logged. A FIFO as `bearer_token_file` did the same (open() waited
for a writer). Here the stuck one is a real server on 127.0.0.1 that trickles its answer.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from test_alerts import DROP, PCG, Clock, Receiver, comparison, make

from sglang_sentinel.daemon import alerts
from sglang_sentinel.daemon.alerts import urllib_post
from sglang_sentinel.daemon.tokenfile import MAX_TOKEN_BYTES

# Each byte comes well inside the per-read timeout (TIMEOUT): only a whole-request deadline ends it.
TIMEOUT = 1.0
TRICKLE_EVERY = 0.25


class Trickle:
    """An HTTP server that reads a request, then answers one byte every TRICKLE_EVERY seconds
    for ever (a status line, then a header line that never ends)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.requests = 0
        self.started = threading.Event()  # a request was read; the answer began
        self.dropped = threading.Event()  # a client gave up on its answer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.requests += 1
            self.started.set()
            answer = b"HTTP/1.1 200 OK\r\nX-Slow: "
            n = 0
            while not self._stop.wait(TRICKLE_EVERY):
                try:
                    conn.sendall(answer[n : n + 1] if n < len(answer) else b"x")
                except OSError:
                    self.dropped.set()
                    return
                n += 1

    def close(self) -> None:
        """Stop accepting, for certain: close() alone left _serve blocked in accept(), and with
        the process stopped and continued (a loaded machine) the next test's Alertmanager had a
        connection taken and dropped unanswered (RemoteDisconnected, ConnectionResetError)."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        self._thread.join(10.0)
        assert not self._thread.is_alive(), "the trickle server's accept loop did not end"
        self.server.close()


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    t = Trickle()
    yield t
    t.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait (polling, with a deadline) until `condition()` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.02)


def test_a_trickling_alertmanager_delays_no_other_and_counts_its_failure(
    trickle: Trickle, receiver: Receiver
) -> None:
    """The stuck one first in the list: the healthy one gets its push at once, and the stuck
    one's push ends at the deadline as a failure that is counted and logged."""
    pusher, stats = make([trickle.url, receiver.url], Clock(time.time()), timeout=TIMEOUT)
    with capture_logs() as logs:
        pusher.start()
        try:
            pusher.update([comparison(DROP)])
            assert receiver.arrived.wait(15.0), "the healthy Alertmanager got no push"
            assert trickle.started.wait(15.0), "the stuck Alertmanager got no request"
            wait_for(lambda: stats.alertmanager_push_failures == 1, 15.0, "a counted failure")
            assert trickle.dropped.wait(15.0), "the stuck request was not given up"
        finally:
            pusher.stop(timeout=5.0)
    assert len(receiver.requests) == 1 and stats.alertmanager_pushes == 1
    failed = [e for e in logs if e["event"] == "alert_push_failed"]
    assert [(e["url"], e["error"]) for e in failed] == [
        (f"{trickle.url}/api/v2/alerts", "TimeoutError: no complete response within 1 s")
    ]


def test_the_timeout_bounds_the_whole_request_not_each_read(trickle: Trickle) -> None:
    outcome: list[BaseException | tuple[int, str]] = []

    def post() -> None:
        try:
            outcome.append(urllib_post(trickle.url + "/api/v2/alerts", b"[]", {}, TIMEOUT))
        except Exception as exc:
            outcome.append(exc)

    started = time.monotonic()
    worker = threading.Thread(target=post, daemon=True)
    worker.start()
    worker.join(15.0)
    elapsed = time.monotonic() - started
    assert not worker.is_alive(), "the request outlived its deadline"
    [result] = outcome
    assert isinstance(result, TimeoutError)
    assert str(result) == "no complete response within 1 s"
    assert elapsed >= TIMEOUT  # bytes kept coming: a per-read timeout would never have fired


def test_a_read_timeout_before_the_deadline_timer_has_run_is_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that never answers: the read's own timeout (as long as the whole deadline) and
    the deadline's timer end the request together. On a loaded machine the timer thread can run
    after the read gave up; the failure is still the deadline's, not a bare 'timed out' (the
    trickle tests failed so with their process stopped for 1.2 s at a time)."""
    ran_late = threading.Event()

    def expire_late(self: Any, expire: Callable[[Any], None] = alerts._Deadline._expire) -> None:
        ran_late.wait(15.0)  # the timer thread is not scheduled until the read has given up
        expire(self)

    monkeypatch.setattr(alerts._Deadline, "_expire", expire_late)
    with socket.create_server(("127.0.0.1", 0)) as mute:  # never accept()ed: no answer
        url = f"http://127.0.0.1:{mute.getsockname()[1]}/api/v2/alerts"
        try:
            with pytest.raises(TimeoutError) as caught:
                urllib_post(url, b"[]", {}, TIMEOUT)
        finally:
            ran_late.set()
    assert str(caught.value) == "no complete response within 1 s"


@pytest.mark.parametrize("kind", ["fifo", "too-large", "directory"])
def test_a_token_file_that_is_not_a_small_regular_file_fails_the_push_at_once(
    receiver: Receiver, tmp_path: Path, kind: str
) -> None:
    """A FIFO (open() would wait for a writer), a huge file, a directory: each push fails at
    once, counted and logged with the reason, nothing sent, for both Alertmanagers."""
    token = tmp_path / "token"
    if kind == "fifo":
        os.mkfifo(token)
        reason = "not a regular file"
    elif kind == "too-large":
        token.write_bytes(b"t" * (MAX_TOKEN_BYTES + 1))
        reason = "larger than 16 KiB"
    else:
        token.mkdir()
        reason = "not a regular file"
    other = Receiver()
    try:
        pusher, stats = make([receiver.url, other.url], Clock(), bearer_token_file=token)
        pusher.update([comparison(DROP)])
        with capture_logs() as logs:
            flushed = threading.Thread(target=pusher.flush, daemon=True)
            flushed.start()
            flushed.join(10.0)
        assert not flushed.is_alive(), "reading the token file blocked the push"
        assert receiver.requests == [] and other.requests == []
    finally:
        other.close()
    assert stats.alertmanager_push_failures == 2
    unreadable = [e["error"] for e in logs if e["event"] == "alert_bearer_token_unreadable"]
    assert unreadable == [reason, reason]


def test_a_change_during_a_push_is_pushed_right_after_it(receiver: Receiver) -> None:
    """A change that the other Alertmanager's worker took in while this one was in a push (a
    slow answer) is pushed here right after, not a resend interval later."""
    # The slow one answers when the test says: the change surely comes during its first push, and
    # the fast one has had its first push before the change (on a busy machine its worker may
    # otherwise start late and push only the changed set, once: three pushes, never four).
    receiver.hold = threading.Event()
    fast = Receiver()
    try:
        pusher, stats = make([receiver.url, fast.url], Clock(time.time()), resend=30.0, timeout=5.0)
        pusher.start()
        try:
            pusher.update([comparison(DROP)])
            assert receiver.reading.wait(10.0), "no first push"
            wait_for(lambda: len(fast.requests) == 1, 10.0, "the fast one's first push")
            pusher.update([comparison(DROP, PCG)])  # while the slow push waits for its answer
            wait_for(lambda: len(fast.requests) == 2, 10.0, "the change pushed to the fast one")
            assert len(receiver.requests) == 1  # still in its first push
            receiver.hold.set()
            wait_for(lambda: stats.alertmanager_pushes == 4, 10.0, "the change pushed to both")
        finally:
            receiver.hold.set()
            pusher.stop(timeout=5.0)
        # DROP is one alert per tier it reached (warning, critical), PCG one more.
        assert [len(body) for body in receiver.bodies] == [2, 3]
        assert [len(body) for body in fast.bodies] == [2, 3]
    finally:
        fast.close()
