"""Optional direct push of findings to Alertmanager (API v2), beside the Prometheus rules.

Every finding of a unit's latest decided startup is one alert, named and linked to the runbook
like the matching rule in deploy/prometheus/sglang-sentinel-alerts.yml. Alertmanager keeps no
state about its clients, so, like Prometheus, the pusher re-sends firing alerts every resend
interval with `endsAt` = now + 4 x interval, and keeps sending an alert that went away as
resolved for `resolve_resend_seconds`. Each Alertmanager has its own background thread, and a
push has a deadline for the whole request (connect, send, status, headers, body): an
Alertmanager that answers a byte at a time costs its own thread one timeout and a counted,
logged failure, and never delays the others. `update()` only swaps the wanted set, so the
journal loop never waits on Alertmanager.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.message import Message
from typing import IO, Any, Final, Protocol

from ..compare import alert_name, alerting, reached_tiers, runbook_url
from ..config import AlertmanagerConfig, ListenAddress
from ..evidence import render_evidence
from ..logs import Logger
from ..model import Comparison, Finding, Severity, Stats
from ..redact import scrub_text
from .tokenfile import read_token

log = Logger("sglang_sentinel")

API_PATH: Final = "/api/v2/alerts"
# Prometheus sets ValidUntil = now + 4 x resend "to allow for two ... send failures".
VALID_FOR_RESENDS: Final = 4
_ERROR_BODY_CHARS = 200

AlertKey = tuple[tuple[str, str], ...]


class PostFunction(Protocol):
    """POST `body` to `url`; returns (HTTP status, start of the response body).

    Raises OSError (or anything else) when no response arrived; the pusher counts that as a
    failed push.
    """

    def __call__(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str]: ...


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirected push would carry the Authorization header to wherever it points.
    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: Message,
        newurl: str,
    ) -> urllib.request.Request | None:
        return None


class _Deadline:
    """Shuts down every socket of one request when its time is up.

    A socket timeout bounds each read, not the request: a server that sends a byte just before
    each read times out holds the request for ever. This one fires once for the whole request.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False  # the timer has fired
        self._ends = float("inf")
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._ends = time.monotonic() + self.seconds
        self._timer.start()
        return self

    @property
    def passed(self) -> bool:
        """The time is up, whether or not the timer thread has run yet: on a loaded machine a
        read's own timeout (as long as the whole deadline) can end the request first."""
        return self.expired or time.monotonic() >= self._ends

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._sockets.append(sock)
            late = self.passed
        if late:
            _shut(sock)
        return sock

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # closed or never connected
        sock.shutdown(socket.SHUT_RDWR)  # wakes a read blocked on it in another thread


def _watched(deadline: _Deadline, base: type[http.client.HTTPConnection]) -> Any:
    """A connection class of `base` whose sockets `deadline` watches (TLS handshake included:
    the plain socket is made by `_create_connection`, before any byte is exchanged)."""

    class Watched(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            create: Callable[..., socket.socket] = self._create_connection  # type: ignore[has-type]
            self._create_connection = lambda *a, **k: deadline.watch(create(*a, **k))

    return Watched


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_watched(self._deadline, http.client.HTTPConnection), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self._deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        conn = _watched(self._deadline, http.client.HTTPSConnection)
        return self.do_open(conn, req, context=self._context)  # type: ignore[attr-defined]


def urllib_post(
    url: str, body: bytes, headers: Mapping[str, str], timeout: float
) -> tuple[int, str]:
    """The default PostFunction: urllib, redirects not followed, HTTP errors returned, and
    `timeout` the deadline of the whole request (TimeoutError when it passes)."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    with _Deadline(timeout) as deadline:
        opener = urllib.request.build_opener(
            _NoRedirect(), _HTTPHandler(deadline), _HTTPSHandler(deadline)
        )
        try:
            with opener.open(request, timeout=timeout) as response:
                text = response.read(_ERROR_BODY_CHARS).decode("utf-8", "replace")
                status = int(response.status)
        except urllib.error.HTTPError as exc:
            with exc:
                text = exc.read(_ERROR_BODY_CHARS).decode("utf-8", "replace")
            status = int(exc.code)
        except (OSError, http.client.HTTPException) as exc:
            if deadline.passed:
                raise TimeoutError(f"no complete response within {timeout:g} s") from exc
            raise
    return status, text


def rfc3339(ts: float) -> str:
    """Unix seconds as RFC 3339 UTC with milliseconds, e.g. 2026-03-09T21:34:27.000Z."""
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"


@dataclass(slots=True)
class _Alert:
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_at: float
    resolved_at: float | None = None
    announced: bool = False  # included in a push at least once


@dataclass(slots=True)
class _Target:
    endpoint: str  # full URL of /api/v2/alerts, without userinfo
    shown: str  # for logs
    basic_auth: str | None = None  # from user:password@ in the configured URL
    next_due: float = 0.0
    failures: int = 0
    # The alert set's version it was last sent (see AlertPusher._version).
    version: int = -1
    # Set to make its worker look again now (an update, stop).
    wake: threading.Event = field(default_factory=threading.Event)


def _target(url: str) -> _Target:
    parts = urllib.parse.urlsplit(url)
    path = parts.path.rstrip("/")
    if not path.endswith(API_PATH):
        path += API_PATH
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    endpoint = urllib.parse.urlunsplit((parts.scheme, netloc, path, "", ""))
    basic = None
    if parts.username is not None or parts.password is not None:
        user = urllib.parse.unquote(parts.username or "")
        password = urllib.parse.unquote(parts.password or "")
        basic = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return _Target(endpoint=endpoint, shown=scrub_text(endpoint), basic_auth=basic)


class AlertPusher:
    """Pushes the findings of the latest startups to every configured Alertmanager."""

    def __init__(
        self,
        config: AlertmanagerConfig,
        *,
        stats: Stats,
        instance: str | None = None,
        generator_url: str | None = None,
        clock: Callable[[], float] = time.time,
        opener: PostFunction = urllib_post,
        backoff_initial_seconds: float = 1.0,
    ) -> None:
        self._config = config
        self._stats = stats
        self._instance = config.instance or instance or default_instance(ListenAddress())
        self._job = config.job
        self._generator_url = (
            config.generator_url or generator_url or f"http://{self._instance}/metrics"
        )
        self._clock = clock
        self._post = opener
        self._resend = float(config.resend_interval_seconds)
        self._backoff_initial = min(backoff_initial_seconds, self._resend)
        # 0 would make the socket non-blocking (every push fails at once); None would let a hung
        # Alertmanager stall the worker for good. The interval is the validated upper bound.
        timeout = float(config.timeout_seconds)
        self._timeout = timeout if timeout > 0 else self._resend
        self._targets = [_target(url) for url in config.urls]
        self._alerts: dict[AlertKey, _Alert] = {}
        # Bumped whenever there is something new to tell: a target that has not been sent this
        # version (and is not backing off) is due now, whatever its worker was doing meanwhile.
        self._version = 0
        self._pending: tuple[Comparison, ...] | None = None
        self._lock = threading.Lock()  # guards _pending, shared with update()
        # Guards the alerts, the targets' schedules and the stats; never held during a push.
        self._state = threading.Lock()
        self._flush_lock = threading.Lock()  # one flush() at a time
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- the caller's side ------------------------------------------------------------------------

    def start(self) -> None:
        """Start one background push thread per Alertmanager (once)."""
        if self._threads:
            return
        self._stopping.clear()
        for n, target in enumerate(self._targets):
            thread = threading.Thread(
                target=self._run, args=(target,), name=f"alertmanager-push-{n}", daemon=True
            )
            self._threads.append(thread)
            thread.start()

    def update(self, comparisons: Sequence[Comparison]) -> None:
        """Replace the wanted alerts with the findings of these comparisons; never blocks on I/O."""
        wanted = tuple(comparisons)
        with self._lock:
            self._pending = wanted
        self._wake_all()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the threads; firing alerts then expire in Alertmanager at their endsAt."""
        self._stopping.set()
        self._wake_all()
        until = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(until - time.monotonic(), 0.0))
            if thread.is_alive():  # in a push: it ends by the push's deadline
                log.warning("alert_pusher_stop_timed_out", timeout_seconds=timeout)
                break
        self._threads = []

    def _wake_all(self) -> None:
        for target in self._targets:
            target.wake.set()

    # -- the workers ------------------------------------------------------------------------------

    def _run(self, target: _Target) -> None:
        """One Alertmanager's worker: push to it whenever it is due, and only to it."""
        while not self._stopping.is_set():
            target.wake.clear()
            try:
                next_due = self._cycle((target,), force=False)
            except Exception:  # a bug here must not end alerting for the life of the daemon
                log.exception("alert_pusher_crashed", url=target.shown)
                next_due = self._clock() + self._resend
            # Capped so that a wall clock stepping backwards cannot stall the resends.
            target.wake.wait(min(max(next_due - self._clock(), 0.0), self._resend))

    def flush(self, *, force: bool = False) -> float:
        """Apply the latest update and push to every Alertmanager that is due (all if `force`),
        one after another.

        Returns the clock time at which the next push is due. Tests call it directly with an
        injected clock; the daemon's workers each do the same for their own Alertmanager.
        """
        with self._flush_lock:
            return self._cycle(tuple(self._targets), force=force)

    def _cycle(self, targets: Sequence[_Target], *, force: bool) -> float:
        """Reconcile, then push to those of `targets` that are due; their next due time."""
        with self._state:
            now = self._clock()
            changed = self._reconcile(now)
            if changed:
                self._version += 1
            woken = [t for t in self._targets if t not in targets] if changed else []
            self._expire(now)
            if not self._alerts:
                return now + self._resend
            due = [t for t in targets if force or self._due(t, now)]
            body = self._payload(now) if due else []
            for target in due:
                target.version = self._version
            if due:
                for alert in self._alerts.values():
                    alert.announced = True
        for other in woken:  # the others' workers push the change too
            other.wake.set()
        for target in due:
            if self._stopping.is_set():
                break
            headers = self._headers(target)
            if headers is None:
                with self._state:
                    self._failed(target, len(body), error="bearer_token_file unreadable")
            else:
                self._send(target, body, headers)
        with self._state:
            return min((t.next_due for t in targets), default=self._clock() + self._resend)

    def _due(self, target: _Target, now: float) -> bool:
        # One in back-off keeps its schedule, news or not.
        return target.next_due <= now or (target.failures == 0 and target.version != self._version)

    def _reconcile(self, now: float) -> bool:
        """Turn the pending comparisons into alerts; True if anything to tell changed."""
        with self._lock:
            wanted, self._pending = self._pending, None
        if wanted is None:
            return False
        desired = self._desired(wanted)
        changed = False
        for key, (labels, notes) in desired.items():
            alert = self._alerts.get(key)
            if alert is None or alert.resolved_at is not None:
                self._alerts[key] = _Alert(labels, notes, starts_at=now)
                changed = True
            elif alert.annotations != notes:
                alert.annotations = notes
                changed = True
        for key, alert in self._alerts.items():
            if key not in desired and alert.resolved_at is None:
                alert.resolved_at = now
                changed = True
        return changed

    def _expire(self, now: float) -> None:
        keep = self._config.resolve_resend_seconds
        for key, alert in list(self._alerts.items()):
            if (
                alert.resolved_at is not None
                and alert.announced
                and now - alert.resolved_at >= keep
            ):
                del self._alerts[key]

    # -- what is sent -----------------------------------------------------------------------------

    def _desired(
        self, comparisons: Sequence[Comparison]
    ) -> dict[AlertKey, tuple[Mapping[str, str], Mapping[str, str]]]:
        out: dict[AlertKey, tuple[Mapping[str, str], Mapping[str, str]]] = {}
        for comparison in comparisons:
            for finding in comparison.findings:
                if not alerting(finding):
                    continue  # as the regression series: none for it (ledger_check.alerting)
                notes = _annotations(comparison, finding)
                for tier in reached_tiers(finding.check, finding.severity):
                    labels = self._labels(comparison, finding, tier)
                    out.setdefault(tuple(sorted(labels.items())), (labels, notes))
        return out

    def _labels(self, comparison: Comparison, finding: Finding, tier: Severity) -> dict[str, str]:
        """The label set Prometheus gives the same alert, so Alertmanager merges the two:
        the series' labels (job, instance, unit, check, severity) and the alertname."""
        own = {
            "alertname": alert_name(finding.check),
            "job": self._job,
            "instance": self._instance,
            "unit": comparison.record.unit,
            "check": finding.check,
            "severity": tier,
        }
        # Like Prometheus's external labels: they never override the alert's own labels.
        return {**self._config.external_labels, **own}

    def _payload(self, now: float) -> list[dict[str, Any]]:
        valid_until = now + VALID_FOR_RESENDS * self._resend
        return [
            {
                "labels": dict(alert.labels),
                "annotations": dict(alert.annotations),
                "startsAt": rfc3339(alert.starts_at),
                "endsAt": rfc3339(valid_until if alert.resolved_at is None else alert.resolved_at),
                "generatorURL": self._generator_url,
            }
            for alert in self._alerts.values()
        ]

    def _headers(self, target: _Target) -> dict[str, str] | None:
        headers = {"Content-Type": "application/json", "User-Agent": "sglang-sentinel"}
        token_file = self._config.bearer_token_file
        if token_file is not None:
            try:  # read per push so a rotated token is picked up without a restart
                token = read_token(token_file)
            except (OSError, ValueError) as exc:  # UnicodeDecodeError is a ValueError
                error = getattr(exc, "strerror", None) or (
                    str(exc) if type(exc) is ValueError else type(exc).__name__
                )
                log.error("alert_bearer_token_unreadable", path=str(token_file), error=error)
                return None
            headers["Authorization"] = f"Bearer {token}"
        elif target.basic_auth is not None:
            headers["Authorization"] = f"Basic {target.basic_auth}"
        return headers

    def _send(
        self, target: _Target, alerts: list[dict[str, Any]], headers: Mapping[str, str]
    ) -> None:
        body = json.dumps(alerts, ensure_ascii=False, allow_nan=False).encode("utf-8")
        try:
            status, text = self._post(target.endpoint, body, headers, self._timeout)
        except Exception as exc:  # any transport failure (or opener bug) is one failed push
            with self._state:
                self._failed(target, len(alerts), error=_describe_error(exc))
            return
        with self._state:
            self._done(target, len(alerts), status, text)

    def _done(self, target: _Target, count: int, status: int, text: str) -> None:
        if not 200 <= status < 300:
            self._failed(target, count, error=f"HTTP {status}", response=scrub_text(text))
            return
        self._stats.alertmanager_pushes += 1
        if target.failures:
            log.info("alert_push_recovered", url=target.shown, after_failures=target.failures)
        else:
            log.debug("alerts_pushed", url=target.shown, alerts=count)
        target.failures = 0
        target.next_due = self._clock() + self._resend

    def _failed(self, target: _Target, count: int, *, error: str, response: str = "") -> None:
        self._stats.alertmanager_push_failures += 1
        target.failures += 1
        delay = min(self._resend, self._backoff_initial * 2 ** min(target.failures - 1, 30))
        target.next_due = self._clock() + delay
        log.warning(
            "alert_push_failed",
            url=target.shown,
            error=error,
            response=response or None,
            alerts=count,
            attempt=target.failures,
            retry_in_seconds=delay,
        )


def default_instance(listen: ListenAddress) -> str:
    """The `instance` label Prometheus gives this sentinel when it scrapes the listen address.

    A wildcard listen address is scraped by host name, so the host name stands in for it;
    set `alertmanager.instance` when the scrape target is written otherwise.
    """
    host = listen.host
    if host in ("", "0.0.0.0", "::"):
        host = socket.getfqdn()
    elif ":" in host:
        host = f"[{host}]"
    return f"{host}:{listen.port}"


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        exc = exc.reason  # "Connection refused" rather than "<urlopen error ...>"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return scrub_text(f"{type(exc).__name__}: {text}")


def _annotations(comparison: Comparison, finding: Finding) -> dict[str, str]:
    record, baseline = comparison.record, comparison.baseline
    if baseline is not None:
        kind = comparison.baseline_kind or "previous"
        against = (
            f"Current startup {record.invocation_id}; "
            f"baseline ({kind}) startup {baseline.invocation_id}."
        )
    else:
        against = f"Current startup {record.invocation_id}; no baseline."
    description = "\n".join(
        [finding.message, *(render_evidence(e) for e in finding.evidence), against]
    )
    annotations = {
        "summary": scrub_text(f"{record.unit}: {finding.message}"),
        "description": scrub_text(description),
        "runbook_url": runbook_url(finding.check),
        "invocation_id": record.invocation_id,
    }
    if baseline is not None:
        annotations["baseline_invocation_id"] = baseline.invocation_id
        annotations["baseline_kind"] = comparison.baseline_kind or "previous"
    return annotations
