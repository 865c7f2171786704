"""The HTTP server behind /metrics and the status page: bounded threads, timeouts, no busy accept.

`wsgiref` + `ThreadingMixIn` starts one thread per connection with no limit and no timeout, so
1000 half-open requests mean 1000 threads blocked for ever; and at the file-descriptor limit
`accept()` fails while the listening socket stays readable, so the accept loop spins at 100 % CPU.
Here a connection gets a thread only while fewer than `max_connections` are being served (others
are answered 503 and closed at once), every socket read and write times out, and a failing
`accept()` backs off (5 ms doubling to 1 s) in the accept thread.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from ..errors import SentinelError
from ..logs import Logger

log = Logger("sglang_sentinel")

MAX_CONNECTIONS = 64  # concurrent requests served; Prometheus needs one per scrape
REQUEST_TIMEOUT_S = 10.0  # each socket read/write of a request (a scrape takes milliseconds)
_ACCEPT_BACKOFF_MIN_S = 0.005
_ACCEPT_BACKOFF_MAX_S = 1.0
# accept() errors that mean "out of resources": retrying at once cannot succeed.
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n\r\nbusy\n"
)


class QuietHandler(WSGIRequestHandler):
    """A WSGI request handler with a socket timeout and no per-request log line."""

    timeout = REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every 15 s would drown the journal


class BoundedWSGIServer(WSGIServer):
    """A threaded WSGI server with at most `max_connections` handler threads."""

    allow_reuse_address = True
    request_queue_size = 128

    def __init__(
        self,
        server_address: tuple[str, int],
        handler: type[WSGIRequestHandler],
        *,
        max_connections: int = MAX_CONNECTIONS,
        address_family: socket.AddressFamily = socket.AF_INET,
    ) -> None:
        self.address_family = address_family
        super().__init__(server_address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._backoff = 0.0
        self.rejected = 0  # connections answered 503 because every slot was busy
        self.accept_failures = 0

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            request = super().get_request()
        except OSError as exc:
            if exc.errno in _RESOURCE_ERRNOS:
                self.accept_failures += 1
                # The listening socket stays readable: without a pause, serve_forever() would
                # call accept() again at once, for ever. Sleeping here delays only new clients.
                self._backoff = min(
                    max(self._backoff * 2, _ACCEPT_BACKOFF_MIN_S), _ACCEPT_BACKOFF_MAX_S
                )
                time.sleep(self._backoff)
            raise  # socketserver drops the attempt and polls again
        self._backoff = 0.0
        return request

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.rejected += 1
            try:
                request.setblocking(False)
                request.send(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        thread = threading.Thread(
            target=self._serve_one, args=(request, client_address), daemon=True
        )
        try:
            thread.start()
        except RuntimeError:  # cannot start a thread: treat like a full server
            self._slots.release()
            self.shutdown_request(request)

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up or timed out is not an error of ours


def make_metrics_server(
    host: str,
    port: int,
    app: Callable[..., Any],
    *,
    max_connections: int = MAX_CONNECTIONS,
    request_timeout: float = REQUEST_TIMEOUT_S,
) -> BoundedWSGIServer:
    """A bound (not yet serving) server for `app` on host:port; OSError if it cannot bind."""
    handler = type("Handler", (QuietHandler,), {"timeout": request_timeout})
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = BoundedWSGIServer(
        (host, port), handler, max_connections=max_connections, address_family=family
    )
    server.set_app(app)
    return server


# The page forbids loading anything; the header repeats the page's own meta policy.
_PAGE_HEADERS = [
    ("Content-Type", "text/html; charset=utf-8"),
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
]


def routes(app: Callable[..., Any], page: Callable[[], str]) -> Callable[..., Any]:
    """`/metrics` to the exporter, `/` to the status page, anything else 404."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "/")
        if path == "/metrics":
            return app(environ, start_response)
        if path in ("/", ""):
            try:
                body = page().encode()
            except SentinelError as exc:
                log.error("status_page_failed", error=str(exc))
                start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"status page unavailable; see the sentinel's log\n"]
            start_response("200 OK", _PAGE_HEADERS)
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found; see / or /metrics\n"]

    return wsgi
