"""Optional direct push of findings to Alertmanager (API v2), beside the Prometheus rules.

Every finding of a unit's latest decided startup is one alert, named and linked to the runbook
like the matching rule in deploy/prometheus/sglang-sentinel-alerts.yml. Alertmanager keeps no
state about its clients, so, like Prometheus, the pusher re-sends firing alerts every resend
interval with `endsAt` = now + 4 x interval, and keeps sending an alert that went away as
resolved for `resolve_resend_seconds`. One background thread does all HTTP; `update()` only
swaps the wanted set, so the journal loop never waits on Alertmanager.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from email.message import Message
from types import MappingProxyType
from typing import IO, Any, Final, Protocol

from ..compare import reached_tiers
from ..config import AlertmanagerConfig, ListenAddress
from ..evidence import render_evidence
from ..logs import Logger
from ..model import Comparison, Finding, Severity, Stats
from ..redact import scrub_text

log = Logger("sglang_sentinel")

API_PATH: Final = "/api/v2/alerts"
RUNBOOK_URL: Final = "https://github.com/sglang-sentinel/sglang-sentinel/blob/main/docs/runbook.md"
# The alertname of each check, as in the Prometheus rules, so both paths name an alert the same.
ALERT_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "max_running_requests_drop": "SGLangCapacityDropped",
        "kv_cache_tokens_drop": "SGLangKVCacheShrunk",
        "piecewise_cuda_graph_disabled": "SGLangPiecewiseCudaGraphDisabled",
        "cuda_graph_disabled": "SGLangCudaGraphDisabled",
        "moe_config_missing": "SGLangMoEConfigMissing",
        "startup_failed": "SGLangStartupFailed",
        "fact_missing": "SGLangSentinelRulesStale",
        "decode_throughput_drop": "SGLangDecodeThroughputDropped",
        "decode_without_cuda_graph": "SGLangDecodeWithoutCudaGraph",
        "cuda_graph_ceiling": "SGLangCudaGraphCeilingExceeded",
        "startup_slow": "SGLangStartupSlow",
        "fact_invalid": "SGLangSentinelFactInvalid",
        "startup_stalled": "SGLangStartupStalled",
    }
)
FALLBACK_ALERT_NAME: Final = "SGLangStartupRegression"  # a check added without a rule yet
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


def urllib_post(
    url: str, body: bytes, headers: Mapping[str, str], timeout: float
) -> tuple[int, str]:
    """The default PostFunction: urllib, redirects not followed, HTTP errors returned."""
    request = urllib.request.Request(url, data=body, headers=dict(headers), method="POST")
    opener = urllib.request.build_opener(_NoRedirect())
    try:
        with opener.open(request, timeout=timeout) as response:
            text = response.read(_ERROR_BODY_CHARS).decode("utf-8", "replace")
            return int(response.status), text
    except urllib.error.HTTPError as exc:
        with exc:
            text = exc.read(_ERROR_BODY_CHARS).decode("utf-8", "replace")
        return int(exc.code), text


def rfc3339(ts: float) -> str:
    """Unix seconds as RFC 3339 UTC with milliseconds, e.g. 2026-03-09T21:34:27.000Z."""
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"


def alert_name(check: str) -> str:
    return ALERT_NAMES.get(check, FALLBACK_ALERT_NAME)


def runbook_url(name: str) -> str:
    return f"{RUNBOOK_URL}#{name.lower()}" if name != FALLBACK_ALERT_NAME else RUNBOOK_URL


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
        self._pending: tuple[Comparison, ...] | None = None
        self._lock = threading.Lock()  # guards _pending, shared with update()
        self._flush_lock = threading.Lock()  # one flush at a time
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the caller's side ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background push thread (once)."""
        if self._thread is not None:
            return
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="alertmanager-push", daemon=True)
        self._thread.start()

    def update(self, comparisons: Sequence[Comparison]) -> None:
        """Replace the wanted alerts with the findings of these comparisons; never blocks on I/O."""
        wanted = tuple(comparisons)
        with self._lock:
            self._pending = wanted
        self._wake.set()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread; firing alerts then expire in Alertmanager at their endsAt."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("alert_pusher_stop_timed_out", timeout_seconds=timeout)
            self._thread = None

    # -- the worker -------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                next_due = self.flush()
            except Exception:  # a bug here must not end alerting for the life of the daemon
                log.exception("alert_pusher_crashed")
                next_due = self._clock() + self._resend
            # Capped so that a wall clock stepping backwards cannot stall the resends.
            self._wake.wait(min(max(next_due - self._clock(), 0.0), self._resend))

    def flush(self, *, force: bool = False) -> float:
        """Apply the latest update and push to every Alertmanager that is due (all if `force`).

        Returns the clock time at which the next push is due. The worker calls this; tests call
        it directly with an injected clock.
        """
        with self._flush_lock:
            now = self._clock()
            if self._reconcile(now):
                for target in self._targets:
                    if target.failures == 0:  # one in back-off keeps its schedule
                        target.next_due = min(target.next_due, now)
            self._expire(now)
            if not self._alerts:
                return now + self._resend
            body = self._payload(now)
            attempted = False
            for target in self._targets:
                if self._stopping.is_set():
                    break
                if not force and target.next_due > now:
                    continue
                attempted = True
                headers = self._headers(target)
                if headers is None:
                    self._failed(target, len(body), error="bearer_token_file unreadable")
                else:
                    self._send(target, body, headers)
            if attempted:
                for alert in self._alerts.values():
                    alert.announced = True
            return min((t.next_due for t in self._targets), default=now + self._resend)

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
                token = token_file.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as exc:
                log.error(
                    "alert_bearer_token_unreadable",
                    path=str(token_file),
                    error=getattr(exc, "strerror", None) or type(exc).__name__,
                )
                return None
            if not token:
                log.error("alert_bearer_token_unreadable", path=str(token_file), error="empty")
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
            self._failed(target, len(alerts), error=_describe_error(exc))
            return
        if not 200 <= status < 300:
            self._failed(target, len(alerts), error=f"HTTP {status}", response=scrub_text(text))
            return
        self._stats.alertmanager_pushes += 1
        if target.failures:
            log.info("alert_push_recovered", url=target.shown, after_failures=target.failures)
        else:
            log.debug("alerts_pushed", url=target.shown, alerts=len(alerts))
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
        "runbook_url": runbook_url(alert_name(finding.check)),
        "invocation_id": record.invocation_id,
    }
    if baseline is not None:
        annotations["baseline_invocation_id"] = baseline.invocation_id
        annotations["baseline_kind"] = comparison.baseline_kind or "previous"
    return annotations
