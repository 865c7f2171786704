"""The metrics HTTP server under hostile clients, with real sockets on loopback.

The server runs in its own process (as in `sentinel run`) so that its threads, file descriptors
and CPU time can be read from /proc while this process plays the clients.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from sentinelproc import wait_until

RUNNER = """
import resource, sys
from sglang_sentinel.daemon.http import make_metrics_server
limit, cap, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
if limit:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\\n"]
server = make_metrics_server("127.0.0.1", 0, app, max_connections=cap, request_timeout=timeout)
print(server.server_port, flush=True)
server.serve_forever()
"""
TICKS = os.sysconf("SC_CLK_TCK")


@contextmanager
def server(fd_limit: int, cap: int, timeout: float) -> Iterator[tuple[subprocess.Popen[str], int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(fd_limit), str(cap), str(timeout)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield proc, port
    finally:
        proc.kill()
        proc.wait(timeout=10)


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def get(port: int) -> tuple[int, bytes] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
            return resp.status, resp.read()
    except OSError:
        return None


def test_a_thousand_half_open_requests_do_not_make_a_thousand_threads() -> None:
    """32 are served (and time out after 2 s); the rest are answered 503 at once; then it serves."""
    clients: list[socket.socket] = []
    with server(0, 32, 2.0) as (proc, port):
        base = threads(proc.pid)
        try:
            most = base
            for i in range(1000):
                c = socket.create_connection(("127.0.0.1", port), timeout=5)
                c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
                clients.append(c)
                if i % 50 == 0:
                    most = max(most, threads(proc.pid))
            most = max(most, threads(proc.pid))
            assert most <= base + 32
            # The rejected clients (most: slots free up only every 2 s) were told why at once.
            told = 0
            for c in clients:
                c.setblocking(False)
                with suppress(BlockingIOError):
                    told += c.recv(100).startswith(b"HTTP/1.1 503 Service Unavailable")
            assert told >= 500
            # The 32 served ones time out; the server answers again while all 1000 stay open.
            assert wait_until(lambda: get(port), 15, "a 200 after the timeouts") == (200, b"ok\n")
            assert threads(proc.pid) <= base + 32
        finally:
            for c in clients:
                c.close()


def test_at_the_fd_limit_the_accept_loop_does_not_spin() -> None:
    """With the fd limit reached and clients waiting in the backlog, accept() fails over and
    over; the server must back off instead of burning a CPU, and recover when fds free up."""
    clients: list[socket.socket] = []
    with server(48, 1000, 60.0) as (proc, port):
        try:
            for _ in range(120):
                c = socket.socket()
                c.setblocking(False)
                with suppress(BlockingIOError):
                    c.connect(("127.0.0.1", port))
                clients.append(c)
            wait_until(
                lambda: len(os.listdir(f"/proc/{proc.pid}/fd")) >= 47, 15, "the fd limit reached"
            )
            before = cpu_seconds(proc.pid)
            time.sleep(2.0)
            used = cpu_seconds(proc.pid) - before
            assert used < 0.3, f"the server used {used:.2f} s of CPU in 2 s at its fd limit"
        finally:
            for c in clients:
                c.close()
        assert wait_until(lambda: get(port), 15, "a 200 once fds are free") == (200, b"ok\n")
