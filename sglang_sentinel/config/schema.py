"""What a config is: its typed records, every key it may hold, and how one raw value is checked.

config.py reads the file, merges the sources and walks the raw mapping; it turns each leaf into
a typed value with the converters here, which raise InvalidValue with a message for the person
who wrote the file. The key table KEYS drives the unknown-key check, the "did you mean"
suggestions and describe_keys() (hence docs/config.md), so the three cannot drift apart.
config_to_dict() is the way back: a Config as plain YAML-ready data.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

from sglang_sentinel.model import (
    CONTAINER_NAME,
    DOCKER_PREFIX,
    DOCKER_UNITS,
    K8S_PREFIX,
    parse_selector,
)
from sglang_sentinel.redact import scrub_text

STATE_DIR_ENV: Final = "SENTINEL_STATE_DIR"

# Retention: a year of daily restarts (365) and a crash loop of several hundred more before the
# oldest of them goes; at ~17 kB a record, about 17 MB per unit at the bound.
STARTUPS_KEPT_DEFAULT: Final = 1000
STARTUPS_KEPT_MIN: Final = 10

LogFormat = Literal["auto", "json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]
LOG_FORMATS: Final[tuple[str, ...]] = get_args(LogFormat)
LOG_LEVELS: Final[tuple[str, ...]] = get_args(LogLevel)


def _empty_mapping() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class JournalConfig:
    """Where entries come from; neither set means the local system journal."""

    directory: Path | None = None
    files: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class KubernetesConfig:
    """Pods whose logs the kubelet keeps under `pod_logs` (CRI format), by workload."""

    pod_logs: Path = Path("/var/log/pods")
    pods: tuple[str, ...] = ()  # NAMESPACE/WORKLOAD[/CONTAINER]
    # Pod label keys put on sglang_sentinel_pod_info from the API (daemon/kubeapi.py); with none,
    # the API is never read. The rest says where the API is; None: the pod's environment.
    labels: tuple[str, ...] = ()
    api_url: str | None = None
    node_name: str | None = None
    token_file: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
    ca_file: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")


@dataclass(frozen=True, slots=True)
class ListenAddress:
    """The metrics endpoint's address; `host` is stored without IPv6 brackets."""

    host: str = "127.0.0.1"
    port: int = 19110

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class RulesConfig:
    """Rule directories read after the bundled pack, and a policy override file."""

    dirs: tuple[Path, ...] = ()
    policy: Path | None = None


@dataclass(frozen=True, slots=True)
class LogConfig:
    format: LogFormat = "auto"
    level: LogLevel = "info"


@dataclass(frozen=True, slots=True)
class AlertmanagerConfig:
    """Direct pushes of findings to Alertmanager; no `urls` means pushing is off."""

    urls: tuple[str, ...] = ()
    resend_interval_seconds: float = 60.0
    timeout_seconds: float = 5.0
    resolve_resend_seconds: float = 300.0
    generator_url: str | None = None
    instance: str | None = None  # None: the listen address, as Prometheus scrapes it
    job: str = "sglang-sentinel"
    external_labels: Mapping[str, str] = field(default_factory=_empty_mapping)
    bearer_token_file: Path | None = None


@dataclass(frozen=True, slots=True)
class Config:
    """The effective configuration. Mappings are read-only views."""

    units: tuple[str, ...] = ("sglang-qwen.service",)
    containers: tuple[str, ...] = ()  # Docker container names (json-file or journald driver)
    docker_units: tuple[str, ...] = DOCKER_UNITS  # where dockerd runs: its lines alone count
    docker_root: Path = Path("/var/lib/docker")
    kubernetes: KubernetesConfig = field(default_factory=KubernetesConfig)
    gpu: str | None = (
        None  # the host's GPU model, e.g. "H100-SXM-80GB"; peers share model, TP and gpu
    )
    journal: JournalConfig = field(default_factory=JournalConfig)
    state_dir: Path = Path("/var/lib/sglang-sentinel")
    listen: ListenAddress = field(default_factory=ListenAddress)
    rules: RulesConfig = field(default_factory=RulesConfig)
    policy: Mapping[str, Any] = field(default_factory=_empty_mapping)
    log: LogConfig = field(default_factory=LogConfig)
    alertmanager: AlertmanagerConfig = field(default_factory=AlertmanagerConfig)
    checkpoint_interval_seconds: float = 5.0
    max_replay_age_seconds: float | None = None
    startups_kept_per_unit: int = STARTUPS_KEPT_DEFAULT

    @property
    def targets(self) -> tuple[str, ...]:
        """What is watched, by identity key: the units, `docker:NAME` per container, then
        `k8s:NS/WORKLOAD[/CONTAINER]` per pod selector."""
        return (
            self.units
            + tuple(DOCKER_PREFIX + name for name in self.containers)
            + tuple(K8S_PREFIX + pod for pod in self.kubernetes.pods)
        )


# Every key the file may hold, with its one-line description. The unknown-key check, the
# "did you mean" suggestions and describe_keys() (hence docs/config.md) all come from here, so
# the three cannot drift apart. `policy` and `alertmanager.external_labels` are free-form leaves.
KEYS: Final[Mapping[str, str]] = {
    "units": "systemd units to watch; '.service' is appended to a name without a unit suffix",
    "containers": "Docker containers to watch, by name, whatever their log driver (json-file "
    "under docker_root, or journald); each is named docker:NAME in reports, metrics and alerts",
    "docker_units": "the systemd units dockerd runs as; a container's lines count only when root "
    "dockerd in one of them sent them (any process can write CONTAINER_NAME)",
    "docker_root": "Docker's root directory, whose containers/<id>/<id>-json.log files hold the "
    "json-file logs of the watched containers",
    "kubernetes.pod_logs": "the kubelet's pod log directory (<ns>_<pod>_<uid>/<container>/N.log)",
    "kubernetes.pods": "pods to watch, as NAMESPACE/WORKLOAD[/CONTAINER] (WORKLOAD: the pod name "
    "without a Deployment's hash and suffix); each is named k8s:NAMESPACE/WORKLOAD[/CONTAINER]",
    "kubernetes.labels": "pod label keys (e.g. app, leaderworkerset.sigs.k8s.io/worker-index) read "
    "from the Kubernetes API and put on sglang_sentinel_pod_info as label_<key>; empty = the API "
    "is never read",
    "kubernetes.api_url": "https://HOST[:PORT] of the API server; null = KUBERNETES_SERVICE_HOST "
    "and _PORT (in a pod)",
    "kubernetes.node_name": "this node's name (only its pods are listed); null = NODE_NAME (the "
    "downward API's spec.nodeName)",
    "kubernetes.token_file": "the service account token sent to the API (read at every "
    "connection, never logged)",
    "kubernetes.ca_file": "the CA that verifies the API server's certificate",
    "gpu": "this host's GPU model as you name it fleet-wide (e.g. H100-SXM-80GB): the `gpu` label "
    "of server_info/baseline_info that groups peers; a baseline import checks it",
    "journal.directory": "read the journal files in this directory instead of the system journal",
    "journal.files": "read these journal files instead of the system journal (not with directory)",
    "state_dir": "SQLite state: startup records, baselines, journal cursor "
    f"(the environment variable {STATE_DIR_ENV} overrides it)",
    "listen": "HOST:PORT of the HTTP endpoint serving /metrics; [::1]:PORT for IPv6",
    "rules.dirs": "rule directories read after the bundled pack; a rule with the same id overrides",
    "rules.policy": "a policy file used instead of the bundled rules/policy.yaml",
    "policy": "inline policy overrides merged per check over the policy file, e.g. "
    "{checks: {cuda_graph_disabled: {severity: warning}}}",
    "log.format": "auto (JSON lines unless stderr is a terminal), json or console",
    "log.level": "lowest level logged: debug, info, warning or error",
    "alertmanager.urls": "Alertmanager URLs http(s)://host[:port][/path]; /api/v2/alerts is "
    "appended unless the path ends with it; empty = no pushes",
    "alertmanager.resend_interval_seconds": "how often firing alerts are pushed again (5..600 s)",
    "alertmanager.timeout_seconds": "deadline of one whole push (connect to last byte; at most "
    "the resend interval); each Alertmanager is pushed to by its own worker",
    "alertmanager.resolve_resend_seconds": "how long a resolved alert keeps being pushed as "
    "resolved, so a restarted or unreachable Alertmanager still learns it ended",
    "alertmanager.generator_url": "generatorURL set on every alert (e.g. a dashboard link); "
    "null = this sentinel's /metrics",
    "alertmanager.instance": "instance label of pushed alerts: the scrape target Prometheus uses "
    "for this sentinel, so both paths make one alert; null = the listen address (host name for "
    "a wildcard address)",
    "alertmanager.job": "job label of pushed alerts: the Prometheus job that scrapes the sentinel",
    "alertmanager.external_labels": "labels added to every alert (e.g. cluster); never override "
    "the alert's own alertname, job, instance, unit, check, severity; set them to Prometheus's "
    "external_labels",
    "alertmanager.bearer_token_file": "file whose content (trimmed) is sent as "
    "'Authorization: Bearer ...'; read at every push, so a rotated token needs no restart; a "
    "regular file of at most 16 KiB",
    "checkpoint_interval_seconds": "how often the journal cursor is saved while no line matches",
    "max_replay_age_seconds": "skip entries older than this on a cursor replay or first start; "
    "null = from the start of the current boot",
    "startups_kept_per_unit": "retention: stored startups per unit; older ones are deleted as new "
    f"ones are stored (the pinned baseline, the newest ready startup and open ones are kept); at "
    f"least {STARTUPS_KEPT_MIN}",
}


def known_keys(section: str) -> frozenset[str]:
    prefix = f"{section}." if section else ""
    return frozenset(k[len(prefix) :].split(".")[0] for k in KEYS if k.startswith(prefix))


_UNIT_SUFFIXES: Final = ("service", "socket", "target", "timer", "path", "mount",
                          "automount", "swap", "slice", "scope", "device")  # fmt: skip
# systemd's unit_name_is_valid(): [A-Za-z0-9:_.\-] plus one "@" for template instances.
_UNIT_NAME: Final = re.compile(
    r"(?P<prefix>[A-Za-z0-9:_.\\-]+)(?P<at>@(?P<instance>[A-Za-z0-9:_.\\-]*))?"
    rf"\.(?:{'|'.join(_UNIT_SUFFIXES)})"
)
_HOSTNAME: Final = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)
_DURATION: Final = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?\s*")
_DURATION_FACTOR: Final[Mapping[str | None, float]] = {
    None: 1,
    "ms": 0.001,
    "s": 1,
    "m": 60,
    "h": 3600,
    "d": 86400,
}
LABEL_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URL_AUTHORITY: Final = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)(?P<auth>[^/?#]*)", re.S)


class InvalidValue(Exception):
    """One bad value; the checker turns it into a problem named by the value's dotted path."""


def mask_url(url: str) -> str:
    """`https://user:pass@host` -> `https://user:<redacted>@host`; a lone user may be a token.

    Secret query parameters (`?token=...`) are left to redact.scrub_text, the shared rule.
    """
    url = scrub_text(url)
    m = _URL_AUTHORITY.match(url)
    if m is None:
        return url
    # rpartition like urlsplit: an unescaped "@" inside the password must not leak its tail.
    userinfo, at, hostport = m["auth"].rpartition("@")
    if not at:
        return url
    user, colon, _ = userinfo.partition(":")
    masked = f"{user}:<redacted>" if colon else "<redacted>"
    return f"{m['head']}{masked}@{hostport}{url[m.end() :]}"


def format_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def describe_value(value: Any) -> str:
    """A value as the user wrote it (YAML spelling), for 'got ...' in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, int | float):
        return format_number(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def _seconds(value: Any) -> float:
    if isinstance(value, str) and (m := _DURATION.fullmatch(value)):
        return float(m[1]) * _DURATION_FACTOR[m[2]]
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise InvalidValue(
        f"expected seconds or a duration like '30s', '2m', '1h'; got {describe_value(value)}"
    )


def duration(
    low: float, high: float | None = None, *, zero: bool = False
) -> Callable[[Any, str], float]:
    """A converter for a duration in seconds; a `low` of 0 is excluded unless `zero` is set."""

    def convert(value: Any, path: str) -> float:
        seconds = _seconds(value)
        if low == 0 and not zero and seconds <= 0:
            raise InvalidValue(f"must be more than 0 seconds, got {describe_value(value)}")
        if seconds < low or (high is not None and seconds > high):
            bounds = (
                f"between {format_number(low)} and {format_number(high)}"
                if high
                else f"at least {format_number(low)}"
            )
            raise InvalidValue(f"must be {bounds} seconds, got {describe_value(value)}")
        return seconds

    return convert


def count(low: int, high: int) -> Callable[[Any, str], int]:
    """A converter for a whole number from `low` to `high`."""

    def convert(value: Any, path: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise InvalidValue(
                f"must be a whole number from {low} to {high}, got {describe_value(value)}"
            )
        return value

    return convert


def choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def convert(value: Any, path: str) -> str:
        # Case-insensitive: "INFO" is an obvious intent, not a mistake worth a failed start.
        if isinstance(value, str) and value.lower() in choices:
            return value.lower()
        raise InvalidValue(f"must be one of {', '.join(choices)}; got {describe_value(value)}")

    return convert


def container_name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not CONTAINER_NAME.fullmatch(value):
        raise InvalidValue(
            f"not a Docker container name: {describe_value(value)} "
            "(letters, digits, '_', '.', '-'; e.g. sglang-qwen)"
        )
    return value


def pod_selector(value: Any, path: str) -> str:
    """`NAMESPACE/WORKLOAD[/CONTAINER]`, checked (a leading `k8s:` is dropped)."""
    if not isinstance(value, str):
        raise InvalidValue(f"expected NAMESPACE/WORKLOAD[/CONTAINER], got {describe_value(value)}")
    try:
        selector = parse_selector(value)
    except ValueError as exc:
        raise InvalidValue(str(exc)) from None
    return selector.target[len(K8S_PREFIX) :]


# A Kubernetes label key: an optional DNS-subdomain prefix and '/', then a name of at most 63
# (k8s.io/apimachinery/pkg/util/validation: IsQualifiedName).
_LABEL_KEY_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
_LABEL_KEY_PREFIX: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)


def pod_label_name(key: str) -> str:
    """The Prometheus label of a pod label key, as kube-state-metrics names them:
    `app.kubernetes.io/name` -> `label_app_kubernetes_io_name`."""
    return "label_" + re.sub(r"[^A-Za-z0-9_]", "_", key)


def pod_label_key(value: Any, path: str) -> str:
    """A pod label key, `[prefix/]name`, checked as Kubernetes checks it."""
    if isinstance(value, str):
        prefix, _, name = value.rpartition("/")
        if _LABEL_KEY_NAME.fullmatch(name) and (
            not prefix or (len(prefix) <= 253 and _LABEL_KEY_PREFIX.fullmatch(prefix))
        ):
            return value
    raise InvalidValue(
        f"not a Kubernetes label key: {describe_value(value)} (e.g. app, "
        "leaderworkerset.sigs.k8s.io/worker-index)"
    )


def api_url(value: Any, path: str) -> str:
    if isinstance(value, str) and re.fullmatch(r"https://[^/\s?#@]+/?", value):
        return value.rstrip("/")
    raise InvalidValue(f"expected https://HOST[:PORT], got {describe_value(value)}")


def node_name(value: Any, path: str) -> str:
    if isinstance(value, str) and len(value) <= 253 and _LABEL_KEY_PREFIX.fullmatch(value):
        return value
    raise InvalidValue(f"not a node name: {describe_value(value)}")


def unit_name(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise InvalidValue(f"expected a unit name, got {describe_value(value)}")
    if value.startswith(DOCKER_PREFIX):  # a container's identity key, e.g. --unit docker:NAME
        return DOCKER_PREFIX + container_name(value[len(DOCKER_PREFIX) :], path)
    if value.startswith(K8S_PREFIX):  # a pod's identity key, e.g. --unit k8s:NS/WORKLOAD/C
        return K8S_PREFIX + pod_selector(value, path)
    name = value if value.rpartition(".")[2] in _UNIT_SUFFIXES else f"{value}.service"
    m = _UNIT_NAME.fullmatch(name)
    if m is None or len(name) > 255:
        raise InvalidValue(f"not a systemd unit name: {value!r}")
    if m["at"] and not m["instance"]:
        raise InvalidValue(f"{value!r} is a template; name an instance, e.g. '{m['prefix']}@NAME'")
    return name


def listen_address(value: Any, path: str) -> ListenAddress:
    example = "e.g. 127.0.0.1:19110 or [::1]:19110"
    if not isinstance(value, str):
        raise InvalidValue(f"expected HOST:PORT ({example}), got {describe_value(value)}")
    if value.startswith("["):
        host, bracket, rest = value[1:].partition("]")
        port_text = rest[1:] if bracket and rest.startswith(":") else ""
    else:
        host, colon, port_text = value.rpartition(":")
        port_text = port_text if colon else ""
    if not port_text:
        raise InvalidValue(f"expected HOST:PORT, got {value!r}")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InvalidValue(f"port must be 1..65535, got {port_text!r} in {value!r}")
    if not host:
        raise InvalidValue(f"no host in {value!r}; use 0.0.0.0 (all IPv4) or [::] (all addresses)")
    if value.startswith("["):
        import ipaddress  # only a bracketed listen address needs it

        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise InvalidValue(f"not an IPv6 address in brackets: {value!r}") from None
    elif ":" in host:
        raise InvalidValue(f"an IPv6 address needs brackets, e.g. '[{host}]:{port_text}'")
    elif not _HOSTNAME.fullmatch(host):
        raise InvalidValue(f"not a host name or IP address: {host!r}")
    return ListenAddress(host=host, port=int(port_text))


def http_url(*, strict: bool) -> Callable[[Any, str], str]:
    """http(s)://host[:port][/path]; `strict` also refuses ?query and #fragment."""

    def convert(value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise InvalidValue(f"expected a URL, got {describe_value(value)}")
        shown = mask_url(value)  # messages end up in logs; credentials must not
        m = re.fullmatch(r"(?i)(https?)://([^/?#\s]+)([^\s]*)", value)
        if m is None:
            raise InvalidValue(f"not an http(s) URL: {shown!r}")
        hostport = m[2].rpartition("@")[2]
        hm = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+)(?::(\d*))?", hostport)
        if hm is None or (hm[2] is not None and not (hm[2].isdigit() and 1 <= int(hm[2]) <= 65535)):
            raise InvalidValue(f"bad host or port in URL: {shown!r}")
        if strict and re.search(r"[?#]", m[3]):
            raise InvalidValue(
                f"expected http(s)://host[:port][/path] without ?query or #fragment: {shown!r}"
            )
        return value

    return convert


def public_url(value: Any, path: str) -> str:
    """An http(s) URL sent with every alert (generatorURL): no credentials, nothing a secret
    looks like (a Slack webhook pasted into the wrong field would be published with each)."""
    url = http_url(strict=False)(value, path)
    if scrub_text(url) != url or mask_url(url) != url:
        raise InvalidValue(
            "looks like a secret (credentials, a token, key or webhook URL); it is sent with"
            " every alert: give a plain link"
        )
    return url


def label_string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        # Quoting matters in YAML: `debug: yes` is a boolean, `version: 1.10` is 1.1.
        raise InvalidValue(f"expected a string (quote it), got {describe_value(value)}")
    if scrub_text(value) != value:
        # A label goes out with every metric, alert and baseline file: a secret there (a Slack
        # webhook URL pasted into the wrong field) would be published, and masking it would
        # change the label. Refused; the value is not repeated in the message.
        raise InvalidValue(
            "looks like a secret (a token, key or webhook URL); labels are published with every"
            " metric and alert: give a plain name"
        )
    return value


def config_to_dict(config: Config, *, mask_secrets: bool = True) -> dict[str, Any]:
    """The effective config as plain YAML-ready data; URL credentials masked unless asked not to."""

    def url(value: str) -> str:
        return mask_url(value) if mask_secrets else value

    def opt(value: Path | None) -> str | None:
        return None if value is None else str(value)

    am = config.alertmanager
    return {
        "units": list(config.units),
        "containers": list(config.containers),
        "docker_units": list(config.docker_units),
        "docker_root": str(config.docker_root),
        "kubernetes": {
            "pod_logs": str(config.kubernetes.pod_logs),
            "pods": list(config.kubernetes.pods),
            "labels": list(config.kubernetes.labels),
            "api_url": config.kubernetes.api_url,
            "node_name": config.kubernetes.node_name,
            "token_file": str(config.kubernetes.token_file),
            "ca_file": str(config.kubernetes.ca_file),
        },
        "gpu": config.gpu,
        "journal": {
            "directory": opt(config.journal.directory),
            "files": [str(p) for p in config.journal.files],
        },
        "state_dir": str(config.state_dir),
        "listen": str(config.listen),
        "rules": {"dirs": [str(p) for p in config.rules.dirs], "policy": opt(config.rules.policy)},
        "policy": copy.deepcopy(dict(config.policy)),
        "log": {"format": config.log.format, "level": config.log.level},
        "alertmanager": {
            "urls": [url(u) for u in am.urls],
            "resend_interval_seconds": am.resend_interval_seconds,
            "timeout_seconds": am.timeout_seconds,
            "resolve_resend_seconds": am.resolve_resend_seconds,
            "generator_url": None if am.generator_url is None else url(am.generator_url),
            "instance": am.instance,
            "job": am.job,
            "external_labels": dict(am.external_labels),
            "bearer_token_file": opt(am.bearer_token_file),
        },
        "checkpoint_interval_seconds": config.checkpoint_interval_seconds,
        "max_replay_age_seconds": config.max_replay_age_seconds,
        "startups_kept_per_unit": config.startups_kept_per_unit,
    }


def _inline(value: Any) -> str:
    """A default as it would be written in the YAML file, on one line."""
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_inline(v)}" for k, v in value.items()) + "}"
    return describe_value(value).strip("'")


def describe_keys() -> list[tuple[str, str, str]]:
    """(dotted key, default as YAML text, one-line description) for every key, in file order."""
    defaults = config_to_dict(Config())
    rows = []
    for key, text in KEYS.items():
        value: Any = defaults
        for part in key.split("."):
            value = value[part]
        rows.append((key, _inline(value), text))
    return rows


__all__ = [
    "KEYS",
    "LABEL_NAME",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "STARTUPS_KEPT_DEFAULT",
    "STARTUPS_KEPT_MIN",
    "STATE_DIR_ENV",
    "AlertmanagerConfig",
    "Config",
    "InvalidValue",
    "JournalConfig",
    "KubernetesConfig",
    "ListenAddress",
    "LogConfig",
    "LogFormat",
    "LogLevel",
    "RulesConfig",
    "choice",
    "config_to_dict",
    "container_name",
    "count",
    "describe_keys",
    "describe_value",
    "duration",
    "format_number",
    "http_url",
    "known_keys",
    "label_string",
    "listen_address",
    "mask_url",
    "pod_selector",
    "unit_name",
]
