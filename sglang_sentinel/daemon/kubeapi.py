"""Pod labels from the Kubernetes API, for `sglang_sentinel_pod_info` (only when configured).

With `kubernetes.labels` set, the daemon lists and then watches the pods of its own node
(`GET /api/v1/pods?fieldSelector=spec.nodeName=NODE`, then `watch=true` from the list's
resourceVersion, bookmarks on; a 410 Gone or a dropped stream lists again) and keeps, per pod,
the values of the configured label keys, by the pod's uid (`metadata.uid`, also in the name of
its log directory, `NS_POD_UID`): a StatefulSet pod deleted and recreated under its name is two
pods, each startup described by its own, whatever the order its events come in. A deleted pod's
labels are kept (the last GONE_KEPT of them): its log files, and its startup as a target's latest,
outlive it until the kubelet removes them. Each list or watch that ends before it has streamed for
STEADY_WATCH_S waits a backoff that doubles up to RETRY_MAX_S, whatever it had streamed: a server
or proxy that ends every watch at once (empty, one event and then 410 Gone) is asked ever more
slowly, never in a loop. Each wait is stretched by a random part of itself (JITTER, as
client-go's reflector does), so a DaemonSet's pods that lost the API server together do not ask
it again together. That is all it asks of the API: `get`, `list`, `watch`
on pods (the ClusterRole in deploy/kubernetes/api-labels/). Identity never comes from here:
targets, starts and baselines are the pod log files' (sources/podlogs.py); a label only
describes the pod.

In a pod the API server is `KUBERNETES_SERVICE_HOST`:`KUBERNETES_SERVICE_PORT`, verified with the
service account's CA, and the node is `NODE_NAME` (the downward API's `spec.nodeName`). The token
is read from its file at every connection (the kubelet rotates bound tokens) and goes in the
Authorization header only: never logged, never in an error message or a metric.

Plain http.client and ssl: two GETs and a line-delimited JSON stream need no client library.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import random
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..config import KubernetesConfig, pod_label_name
from ..errors import ConfigError
from ..logs import Logger
from .tokenfile import read_token

log = Logger(__name__)

SERVICE_ACCOUNT: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
MAX_LINE_BYTES: Final = 4 << 20  # one watch event (a pod object); a larger one is an error
MAX_VALUE_CHARS: Final = 63  # a label value's own limit in Kubernetes
WATCH_SECONDS: Final = 300  # the server ends each watch after this; it is then resumed
RETRY_FIRST_S: Final = 1.0
RETRY_MAX_S: Final = 60.0
MIN_WATCH_S: Final = 1.0  # a watch ending sooner without an event failed (as in client-go)
# A watch that streamed this long worked: the wait is back to RETRY_FIRST_S and what follows
# (the next watch, a list after 410 Gone) comes at once. A shorter one, events or not, waits.
STEADY_WATCH_S: Final = 30.0
# A wait of w seconds is w * (1 + JITTER * r), r uniform in [0, 1): up to twice as long.
JITTER: Final = 1.0
GONE_KEPT: Final = 256  # deleted pods whose labels are kept, oldest forgotten first


class KubeApiError(Exception):
    """A request to the API server that failed: the reason, never a header or the token."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ApiEndpoint:
    """Where the API server is and how to authenticate to it."""

    host: str
    port: int
    token_file: Path
    ca_file: Path
    node: str

    @classmethod
    def in_cluster(
        cls,
        *,
        url: str | None,
        node: str | None,
        token_file: Path,
        ca_file: Path,
        environ: Mapping[str, str],
    ) -> ApiEndpoint:
        """From the configuration, else the pod's environment; KubeApiError says what lacks."""
        if url is None:
            host, port = (
                environ.get("KUBERNETES_SERVICE_HOST"),
                environ.get("KUBERNETES_SERVICE_PORT", "443"),
            )
            if not host:
                raise KubeApiError(
                    "kubernetes.labels is set but KUBERNETES_SERVICE_HOST is not (not in a pod?): "
                    "set kubernetes.api_url"
                )
            url = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "https" or not parsed.hostname:
            raise KubeApiError(f"kubernetes.api_url must be https://HOST[:PORT], got {url!r}")
        node = node or environ.get("NODE_NAME")
        if not node:
            raise KubeApiError(
                "kubernetes.labels is set but the node is unknown: set NODE_NAME from the "
                "downward API (spec.nodeName), or kubernetes.node_name"
            )
        return cls(parsed.hostname, parsed.port or 443, token_file, ca_file, node)


class _TlsConnection(http.client.HTTPSConnection):
    """HTTPS whose socket stop() can shut down whatever the request is doing: `tcp` is set
    before the TCP connection is made (http.client's own sets `sock` once it is), `tls` before
    the handshake (http.client's own wraps the socket first, and until that returns, `sock` is
    the plain socket, detached: shutting it down does nothing), and both are kept while a
    response reads (a response that will close, HTTP/1.0 or `Connection: close`, takes the
    socket and http.client sets `sock` to None)."""

    def __init__(self, host: str, port: int, *, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls = context
        self._create_connection = self._dial
        self.tcp: socket.socket | None = None
        self.tls: ssl.SSLSocket | None = None

    def _dial(
        self, address: tuple[str, int], timeout: float, source: object = None
    ) -> socket.socket:
        """socket.create_connection, each socket made known (as `tcp`) before it connects."""
        error: OSError | None = None
        for family, kind, proto, _name, peer in socket.getaddrinfo(
            *address, type=socket.SOCK_STREAM
        ):
            sock = self.tcp = socket.socket(family, kind, proto)
            try:
                sock.settimeout(timeout)
                sock.connect(peer)
                return sock
            except OSError as exc:
                sock.close()
                error = exc
        raise error or OSError(f"no address for {address[0]}")

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # the TCP connection: self.sock
        self.sock = self.tls = self._tls.wrap_socket(
            self.sock, server_hostname=self.host, do_handshake_on_connect=False
        )
        self.tls.do_handshake()


class PodLabels:
    """The configured labels of this node's pods, kept up to date by a thread of its own.

    `labels()` is what a scrape reads: pod uid -> {Prometheus label: value} of the node's pods
    and the last GONE_KEPT deleted ones, a mapping replaced whole at each change, so any thread
    reads a consistent one without a lock.
    """

    def __init__(
        self,
        endpoint: ApiEndpoint,
        keys: tuple[str, ...],
        *,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ):
        self.endpoint = endpoint
        self.keys = keys
        self.names = tuple(pod_label_name(k) for k in keys)
        self._timeout = timeout
        self._clock = clock  # how long a watch streamed (a test drives it)
        self._jitter = jitter  # r of each wait (a test fixes it)
        self._pods: Mapping[str, Mapping[str, str]] = {}  # published: gone, then live
        self._live: dict[str, dict[str, str]] = {}  # the thread's own, by uid
        self._gone: dict[str, dict[str, str]] = {}  # deleted, oldest first
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: _TlsConnection | None = None
        self._conn_lock = threading.Lock()
        self._streamed = 0.0  # how long the last watch streamed (0: none got a response)
        self.lists = 0  # successful lists (a test waits on them)
        self.events = 0  # pod events applied (a test waits on them)
        self.failures = 0

    def labels(self) -> Mapping[str, Mapping[str, str]]:
        return self._pods

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubernetes-api", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ends the thread: the flag, then the socket it may be blocked on shut down, again until
        it has ended (a connection it opened meanwhile, or a socket still being wrapped for TLS
        when first seen, is shut down on the next round)."""
        self._stop.set()
        deadline = time.monotonic() + self._timeout
        while True:
            self._interrupt()
            if self._thread is None:
                return
            self._thread.join(timeout=0.05)
            if not self._thread.is_alive() or time.monotonic() >= deadline:
                return

    def _interrupt(self) -> None:
        with self._conn_lock:
            conn = self._conn
        for sock in (conn.tcp, conn.tls) if conn is not None else ():
            if sock is not None:
                # Ends a connect, handshake, list or watch blocked at once (a socket closed
                # already: nothing to do).
                with contextlib.suppress(OSError, ValueError):
                    sock.shutdown(socket.SHUT_RDWR)

    # -- the thread -------------------------------------------------------------------------------

    def _run(self) -> None:
        # The wait before the next request doubles at each list or watch that ended before
        # STEADY_WATCH_S and is back to its first value only once a watch streamed that long.
        # A list that succeeds while every watch fails at once (refused, closed, 410 Gone from
        # the version just listed, also after an event) is retried ever more slowly, not every
        # second or in a loop; so is a watch that ends soon after its events.
        wait, version = RETRY_FIRST_S, None
        while not self._stop.is_set():
            self._streamed, failure = 0.0, None
            try:
                if version is None:
                    version = self._list()
                version = self._watch(version)
            except KubeApiError as exc:
                if self._stop.is_set():
                    return
                self.failures += 1
                failure, version = exc, None  # listed again
            if self._stop.is_set():
                return
            if self._streamed >= STEADY_WATCH_S:
                wait = RETRY_FIRST_S
                if failure is None or failure.status == 410:
                    continue  # ended by the server (timeoutSeconds) or expired: at once
            delay = round(wait * (1 + JITTER * self._jitter()), 3)
            if failure is not None:
                log.warning(
                    "kubernetes_api_failed",
                    error=str(failure),
                    status=failure.status,
                    retry_in_seconds=delay,
                )
            else:
                log.info(
                    "kubernetes_watch_ended_early",
                    streamed_seconds=round(self._streamed, 3),
                    retry_in_seconds=delay,
                )
            self._stop.wait(delay)
            wait = min(wait * 2, RETRY_MAX_S)

    def _query(self, **extra: str) -> str:
        params = {"fieldSelector": f"spec.nodeName={self.endpoint.node}", **extra}
        return "/api/v1/pods?" + urllib.parse.urlencode(params)

    def _connect(self, timeout: float) -> _TlsConnection:
        e = self.endpoint
        try:
            context = ssl.create_default_context(cafile=str(e.ca_file))
        except (OSError, ssl.SSLError) as exc:
            raise KubeApiError(f"CA file {e.ca_file}: {_reason(exc)}") from None
        conn = _TlsConnection(e.host, e.port, timeout=timeout, context=context)
        with self._conn_lock:
            self._conn = conn
        return conn

    def _get(self, conn: http.client.HTTPSConnection, path: str) -> http.client.HTTPResponse:
        try:
            token = read_token(self.endpoint.token_file)
        except (OSError, ValueError) as exc:
            raise KubeApiError(f"token file {self.endpoint.token_file}: {_reason(exc)}") from None
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            "User-Agent": "sglang-sentinel",
        }
        try:
            conn.request("GET", path, headers=headers)
            # stop() sets the flag, then shuts the socket down if there is one: checked after
            # the socket exists, one of the two sees the other.
            if self._stop.is_set():
                conn.close()
                raise KubeApiError("stopped")
            response = conn.getresponse()
        except (OSError, ValueError, http.client.HTTPException) as exc:
            conn.close()
            raise KubeApiError(_reason(exc)) from None
        if response.status != 200:
            conn.close()
            hint = (
                " (the ClusterRole needs get, list, watch on pods)"
                if response.status == 403
                else ""
            )
            raise KubeApiError(f"HTTP {response.status} {response.reason}{hint}", response.status)
        return response

    def _list(self) -> str:
        """Every pod of the node, replacing what was known; the list's resourceVersion."""
        conn = self._connect(self._timeout)
        try:
            response = self._get(conn, self._query())
            try:
                doc = json.loads(response.read(64 << 20))
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise KubeApiError(f"pod list unreadable: {_reason(exc)}") from None
        finally:
            conn.close()
        if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
            raise KubeApiError("pod list unreadable: no items")
        pods = {}
        for item in doc["items"]:
            uid, labels = self._labels_of(item)
            if uid is not None:
                pods[uid] = labels
        for uid in pods:
            self._gone.pop(uid, None)
        # A pod known before and not listed now was deleted while no watch saw it.
        for uid, labels in self._live.items():
            if uid not in pods:
                self._forget(uid, labels)
        self._live = pods
        self._publish()
        self.lists += 1
        version = doc.get("metadata", {}).get("resourceVersion")
        if not isinstance(version, str):
            raise KubeApiError("pod list unreadable: no resourceVersion")
        log.info("kubernetes_pods_listed", node=self.endpoint.node, pods=len(pods))
        return version

    def _watch(self, version: str) -> str:
        """Changes from `version` on, until the server ends the watch; the last version seen."""
        conn = self._connect(WATCH_SECONDS + self._timeout)
        response = None
        try:
            query = self._query(
                watch="true",
                resourceVersion=version,
                allowWatchBookmarks="true",
                timeoutSeconds=str(WATCH_SECONDS),
            )
            began, worked = self._clock(), False  # before the request: a test sees it made
            response = self._get(conn, query)
            try:
                while not self._stop.is_set():
                    try:
                        line = response.readline(MAX_LINE_BYTES + 1)
                    except (OSError, ValueError, http.client.HTTPException) as exc:
                        raise KubeApiError(f"watch ended: {_reason(exc)}") from None
                    if not line:
                        # The server ended it (timeoutSeconds): resume. At once and without an
                        # event, it failed (client-go's "very short watch").
                        if not worked and self._clock() - began < MIN_WATCH_S:
                            raise KubeApiError("watch ended at once without an event")
                        return version
                    if len(line) > MAX_LINE_BYTES:
                        raise KubeApiError("watch event too large")
                    version = self._event(line, version)
                    worked = True
                return version
            finally:
                self._streamed = self._clock() - began
        finally:
            if response is not None:
                response.close()  # a response that will close holds the socket, not conn
            conn.close()

    def _event(self, line: bytes, version: str) -> str:
        try:
            event = json.loads(line)
            kind, obj = event["type"], event["object"]
        except (ValueError, KeyError, TypeError):
            raise KubeApiError("watch event unreadable") from None
        if kind == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            raise KubeApiError(f"watch error {code}", code if isinstance(code, int) else None)
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        new_version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            uid, labels = self._labels_of(obj)
            if uid is not None:
                if kind == "DELETED":
                    self._live.pop(uid, None)
                    self._forget(uid, labels)  # as it was when deleted
                else:
                    self._live[uid] = labels
                    self._gone.pop(uid, None)
                self._publish()
                self.events += 1
        return new_version if isinstance(new_version, str) else version

    def _forget(self, uid: str, labels: dict[str, str]) -> None:
        """A deleted pod: its labels kept among the last GONE_KEPT deleted ones."""
        self._gone.pop(uid, None)
        self._gone[uid] = labels
        while len(self._gone) > GONE_KEPT:
            del self._gone[next(iter(self._gone))]

    def _publish(self) -> None:
        self._pods = {**self._gone, **self._live}

    def _labels_of(self, pod: Any) -> tuple[str | None, dict[str, str]]:
        """The pod's uid (None: none given) and its configured labels."""
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        if not isinstance(meta, dict):
            return None, {}
        uid = meta.get("uid")
        if not isinstance(uid, str) or not uid:
            return None, {}
        given = meta.get("labels")
        given = given if isinstance(given, dict) else {}
        labels = {}
        for key, prom in zip(self.keys, self.names, strict=True):
            value = given.get(key)
            labels[prom] = value[:MAX_VALUE_CHARS] if isinstance(value, str) else ""
        return uid, labels


def _reason(exc: BaseException) -> str:
    """What went wrong, without anything a request carried."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"certificate verification failed: {exc.verify_message}"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"


def pod_labels_of(config: KubernetesConfig, environ: Mapping[str, str]) -> PodLabels | None:
    """The watcher `config` asks for, or None when it names no label (the API is not read)."""
    if not config.labels:
        return None
    try:
        endpoint = ApiEndpoint.in_cluster(
            url=config.api_url,
            node=config.node_name,
            token_file=config.token_file,
            ca_file=config.ca_file,
            environ=environ,
        )
    except KubeApiError as exc:
        raise ConfigError([str(exc)]) from None
    return PodLabels(endpoint, config.labels)
