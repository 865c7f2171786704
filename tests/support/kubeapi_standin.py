"""A stand-in Kubernetes API server over TLS: the pod list and watch of /api/v1/pods.

It serves what the sentinel asks (daemon/kubeapi.py): `GET /api/v1/pods?fieldSelector=...` as a
PodList with a resourceVersion, and with `watch=true` a stream of `{"type": ..., "object": ...}`
lines, one per event the test pushes, until the test ends the stream. Every request is recorded
(path, query, Authorization header) so a test can say what was asked and with which token.
A certificate authority and a server certificate for 127.0.0.1 are made with openssl per test.
"""

from __future__ import annotations

import json
import queue
import ssl
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_END = object()


def make_ca(directory: Path, name: str = "ca") -> tuple[Path, Path]:
    """A self-signed CA: (certificate, key)."""
    crt, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", f"/CN={name}",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        check=True, capture_output=True,
    )  # fmt: skip
    return crt, key


def make_server_cert(directory: Path, ca: tuple[Path, Path]) -> tuple[Path, Path]:
    """A certificate for IP 127.0.0.1 signed by `ca`: (certificate, key)."""
    crt, key, csr = directory / "server.crt", directory / "server.key", directory / "server.csr"
    ext = directory / "server.ext"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nsubjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n"
    )
    subprocess.run(
        ["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
         "-CAcreateserial", "-out", str(crt), "-days", "2", "-extfile", str(ext)],
        check=True, capture_output=True,
    )  # fmt: skip
    return crt, key


def pod(
    ns: str, name: str, labels: dict[str, str], version: str = "1", uid: str = ""
) -> dict[str, Any]:
    """A pod object; its uid `uid-NS-NAME` unless given (a pod recreated under its name: another)."""
    meta = {"namespace": ns, "name": name, "uid": uid or f"uid-{ns}-{name}"}
    return {
        "metadata": {**meta, "labels": labels, "resourceVersion": version},
        "spec": {"nodeName": "node-a"},
    }


@dataclass
class Request:
    path: str
    query: dict[str, str]
    authorization: str | None


@dataclass
class StandIn:
    """The API server's state: pods listed, events to stream, requests seen."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    version: str = "100"
    status: int = 200  # a list or watch answered with this status instead (403, 500)
    watch_status: int = 200  # a watch (only) answered with this status instead
    # Every watch streams these events and ends at once (None: the events the test pushes).
    watch_reply: list[dict[str, Any]] | None = None
    requests: list[Request] = field(default_factory=list)
    events: queue.Queue[Any] = field(default_factory=queue.Queue)
    port: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def push(self, kind: str, obj: dict[str, Any]) -> None:
        self.events.put({"type": kind, "object": obj})

    def end_watch(self) -> None:
        self.events.put(_END)

    def seen(self) -> list[Request]:
        with self.lock:
            return list(self.requests)


def _handler(api: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(url.query))
            with api.lock:
                api.requests.append(Request(url.path, query, self.headers.get("Authorization")))
            if api.status != 200:
                self._json(api.status, {"kind": "Status", "code": api.status})
                return
            if query.get("watch") != "true":
                doc = {"kind": "PodList", "metadata": {"resourceVersion": api.version}}
                self._json(200, {**doc, "items": api.pods})
                return
            if api.watch_status != 200:
                self._json(api.watch_status, {"kind": "Status", "code": api.watch_status})
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()  # HTTP/1.0: the stream ends when the connection closes
            if api.watch_reply is not None:
                for event in api.watch_reply:
                    self.wfile.write(json.dumps(event).encode() + b"\n")
                return
            while True:
                event = api.events.get()
                if event is _END:
                    return
                self.wfile.write(json.dumps(event).encode() + b"\n")
                self.wfile.flush()
                if event["type"] == "ERROR":
                    # The API server ends a watch after its ERROR event; the next event pushed
                    # is for the next watch, not read by this one's handler.
                    return

        def _json(self, status: int, doc: dict[str, Any]) -> None:
            body = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@contextmanager
def serve(directory: Path) -> Iterator[tuple[StandIn, Path]]:
    """A running stand-in on 127.0.0.1 and the CA file that verifies it."""
    ca = make_ca(directory)
    cert = make_server_cert(directory, ca)
    api = StandIn()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(cert[0]), str(cert[1]))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    api.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api, ca[0]
    finally:
        for _ in range(4):  # end any watch still streaming
            api.end_watch()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
