"""The YAML configuration: loaded once, validated up front, every problem reported at once.

Precedence, lowest first: built-in defaults, the config file, the environment
(`SENTINEL_STATE_DIR`, set by the systemd unit), command-line overrides.
"""

from __future__ import annotations

import copy
import difflib
import ipaddress
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Literal, TypeVar, cast, get_args

import yaml

from .errors import ConfigError
from .redact import scrub_text

DEFAULT_CONFIG_PATH: Final = Path("/etc/sglang-sentinel/config.yaml")
STATE_DIR_ENV: Final = "SENTINEL_STATE_DIR"

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
    external_labels: Mapping[str, str] = field(default_factory=_empty_mapping)
    bearer_token_file: Path | None = None


@dataclass(frozen=True, slots=True)
class Config:
    """The effective configuration. Mappings are read-only views."""

    units: tuple[str, ...] = ("sglang-qwen.service",)
    journal: JournalConfig = field(default_factory=JournalConfig)
    state_dir: Path = Path("/var/lib/sglang-sentinel")
    listen: ListenAddress = field(default_factory=ListenAddress)
    rules: RulesConfig = field(default_factory=RulesConfig)
    policy: Mapping[str, Any] = field(default_factory=_empty_mapping)
    log: LogConfig = field(default_factory=LogConfig)
    alertmanager: AlertmanagerConfig = field(default_factory=AlertmanagerConfig)
    checkpoint_interval_seconds: float = 5.0
    max_replay_age_seconds: float | None = None


# Every key the file may hold, with its one-line description. The unknown-key check, the
# "did you mean" suggestions and describe_keys() (hence docs/config.md) all come from here, so
# the three cannot drift apart. `policy` and `alertmanager.external_labels` are free-form leaves.
_KEYS: Final[Mapping[str, str]] = {
    "units": "systemd units to watch; '.service' is appended to a name without a unit suffix",
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
    "alertmanager.timeout_seconds": "HTTP timeout of one push (at most the resend interval)",
    "alertmanager.resolve_resend_seconds": "how long a resolved alert keeps being pushed as "
    "resolved, so a restarted or unreachable Alertmanager still learns it ended",
    "alertmanager.generator_url": "generatorURL set on every alert (e.g. a dashboard link); "
    "null = this sentinel's /metrics",
    "alertmanager.external_labels": "labels added to every alert (e.g. cluster); never override "
    "the alert's own alertname, unit, check, severity, instance",
    "alertmanager.bearer_token_file": "file whose content (trimmed) is sent as "
    "'Authorization: Bearer ...'; read at every push, so a rotated token needs no restart",
    "checkpoint_interval_seconds": "how often the journal cursor is saved while no line matches",
    "max_replay_age_seconds": "skip entries older than this on a cursor replay or first start; "
    "null = from the start of the current boot",
}


def _known_keys(section: str) -> frozenset[str]:
    prefix = f"{section}." if section else ""
    return frozenset(k[len(prefix) :].split(".")[0] for k in _KEYS if k.startswith(prefix))


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
_LABEL_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_URL_AUTHORITY: Final = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://)(?P<auth>[^/?#]*)", re.S)

_EXCLUSIVE: Final = {"journal.directory": "journal.files", "journal.files": "journal.directory"}
_MISSING: Final = object()
_T = TypeVar("_T")


class _Invalid(Exception):
    """One bad value; the checker turns it into a problem named by the value's dotted path."""


def _mask_url(url: str) -> str:
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


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def _describe(value: Any) -> str:
    """A value as the user wrote it (YAML spelling), for 'got ...' in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, int | float):
        return _num(value)
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
    raise _Invalid(f"expected seconds or a duration like '30s', '2m', '1h'; got {_describe(value)}")


def _duration(
    low: float, high: float | None = None, *, zero: bool = False
) -> Callable[[Any, str], float]:
    """A converter for a duration in seconds; a `low` of 0 is excluded unless `zero` is set."""

    def convert(value: Any, path: str) -> float:
        seconds = _seconds(value)
        if low == 0 and not zero and seconds <= 0:
            raise _Invalid(f"must be more than 0 seconds, got {_describe(value)}")
        if seconds < low or (high is not None and seconds > high):
            bounds = f"between {_num(low)} and {_num(high)}" if high else f"at least {_num(low)}"
            raise _Invalid(f"must be {bounds} seconds, got {_describe(value)}")
        return seconds

    return convert


def _choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def convert(value: Any, path: str) -> str:
        # Case-insensitive: "INFO" is an obvious intent, not a mistake worth a failed start.
        if isinstance(value, str) and value.lower() in choices:
            return value.lower()
        raise _Invalid(f"must be one of {', '.join(choices)}; got {_describe(value)}")

    return convert


def _unit_name(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _Invalid(f"expected a unit name, got {_describe(value)}")
    name = value if value.rpartition(".")[2] in _UNIT_SUFFIXES else f"{value}.service"
    m = _UNIT_NAME.fullmatch(name)
    if m is None or len(name) > 255:
        raise _Invalid(f"not a systemd unit name: {value!r}")
    if m["at"] and not m["instance"]:
        raise _Invalid(f"{value!r} is a template; name an instance, e.g. '{m['prefix']}@NAME'")
    return name


def _listen(value: Any, path: str) -> ListenAddress:
    example = "e.g. 127.0.0.1:19110 or [::1]:19110"
    if not isinstance(value, str):
        raise _Invalid(f"expected HOST:PORT ({example}), got {_describe(value)}")
    if value.startswith("["):
        host, bracket, rest = value[1:].partition("]")
        port_text = rest[1:] if bracket and rest.startswith(":") else ""
    else:
        host, colon, port_text = value.rpartition(":")
        port_text = port_text if colon else ""
    if not port_text:
        raise _Invalid(f"expected HOST:PORT, got {value!r}")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise _Invalid(f"port must be 1..65535, got {port_text!r} in {value!r}")
    if not host:
        raise _Invalid(f"no host in {value!r}; use 0.0.0.0 (all IPv4) or [::] (all addresses)")
    if value.startswith("["):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _Invalid(f"not an IPv6 address in brackets: {value!r}") from None
    elif ":" in host:
        raise _Invalid(f"an IPv6 address needs brackets, e.g. '[{host}]:{port_text}'")
    elif not _HOSTNAME.fullmatch(host):
        raise _Invalid(f"not a host name or IP address: {host!r}")
    return ListenAddress(host=host, port=int(port_text))


def _url(*, strict: bool) -> Callable[[Any, str], str]:
    """http(s)://host[:port][/path]; `strict` also refuses ?query and #fragment."""

    def convert(value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise _Invalid(f"expected a URL, got {_describe(value)}")
        shown = _mask_url(value)  # messages end up in logs; credentials must not
        m = re.fullmatch(r"(?i)(https?)://([^/?#\s]+)([^\s]*)", value)
        if m is None:
            raise _Invalid(f"not an http(s) URL: {shown!r}")
        hostport = m[2].rpartition("@")[2]
        hm = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+)(?::(\d*))?", hostport)
        if hm is None or (hm[2] is not None and not (hm[2].isdigit() and 1 <= int(hm[2]) <= 65535)):
            raise _Invalid(f"bad host or port in URL: {shown!r}")
        if strict and re.search(r"[?#]", m[3]):
            raise _Invalid(
                f"expected http(s)://host[:port][/path] without ?query or #fragment: {shown!r}"
            )
        return value

    return convert


def _label_value(value: Any, path: str) -> str:
    if not isinstance(value, str):
        # Quoting matters in YAML: `debug: yes` is a boolean, `version: 1.10` is 1.1.
        raise _Invalid(f"expected a string (quote it), got {_describe(value)}")
    return value


class _Checker:
    """Converts the merged raw mapping to a Config, collecting every problem on the way."""

    def __init__(self, file_label: str, base_dir: Path, sources: Mapping[str, str]) -> None:
        self.problems: list[str] = []
        self._file_label = file_label
        self._base_dir = base_dir
        self._sources = sources

    def _source(self, path: str) -> str | None:
        """Where the value at `path` came from when not the file (environment, command line)."""
        probe = path
        while probe:
            if probe in self._sources:
                return self._sources[probe]
            # Drop the last component; always shrinks, whatever odd characters a key holds.
            probe = probe[: max(probe.rfind("."), probe.rfind("["), 0)]
        return None

    def problem(self, path: str, message: str, *, origin: str | None = None) -> None:
        source = self._source(origin or path) or self._file_label
        self.problems.append(f"{source}: {path}: {message}" if path else f"{source}: {message}")

    def section(self, raw: Any, path: str) -> Mapping[Any, Any]:
        if raw is None:  # a section whose keys are all commented out
            return {}
        if not isinstance(raw, Mapping):
            self.problem(path, f"expected a mapping, got {_describe(raw)}")
            return {}
        known = _known_keys(path)
        for key in raw:
            if key in known:
                continue
            full = f"{path}.{key}" if path else str(key)
            hint = difflib.get_close_matches(str(key), sorted(known), n=1)
            did = f" (did you mean {hint[0]!r}?)" if hint else ""
            self.problem(path, f"unknown key {key!r}{did}", origin=full)
        return raw

    def take(
        self,
        raw: Mapping[Any, Any],
        key: str,
        parent: str,
        default: _T,
        convert: Callable[[Any, str], _T],
    ) -> _T:
        path = f"{parent}.{key}" if parent else key
        value = raw.get(key, _MISSING)
        if value is _MISSING:
            return default
        if value is None:
            if default is None:
                return default
            if isinstance(default, tuple | Mapping):  # `files:` left empty means none
                value = [] if isinstance(default, tuple) else {}
            else:
                shown = _describe(str(default) if isinstance(default, Path) else default)
                self.problem(path, f"needs a value (remove the key for the default {shown})")
                return default
        try:
            return convert(value, path)
        except _Invalid as exc:
            self.problem(path, str(exc))
            return default

    def items(self, value: Any, path: str, convert: Callable[[Any, str], _T]) -> tuple[_T, ...]:
        if not isinstance(value, list | tuple):
            raise _Invalid(f"expected a list, got {_describe(value)}")
        good: list[_T] = []
        for i, item in enumerate(value):
            try:
                converted = convert(item, f"{path}[{i}]")
            except _Invalid as exc:
                self.problem(f"{path}[{i}]", str(exc))
                continue
            if converted in good:
                self.problem(f"{path}[{i}]", f"duplicate of an earlier entry: {item!r}")
            else:
                good.append(converted)
        return tuple(good)

    def path(self, value: Any, path: str) -> Path:
        if not isinstance(value, str) or not value or "\0" in value:
            raise _Invalid(f"expected a path, got {_describe(value)}")
        result = Path(value)
        # Like Prometheus: relative paths in the file are relative to the file, so the same
        # file works whatever the daemon's working directory; command-line ones stay as given.
        if not result.is_absolute() and self._source(path) is None:
            result = self._base_dir / result
        return result

    def paths(self, value: Any, path: str) -> tuple[Path, ...]:
        return self.items(value, path, self.path)

    def units(self, value: Any, path: str) -> tuple[str, ...]:
        units = self.items(value, path, _unit_name)
        if not value:
            raise _Invalid("at least one unit is needed, e.g. [sglang-qwen.service]")
        return units

    def urls(self, value: Any, path: str) -> tuple[str, ...]:
        return self.items(value, path, _url(strict=True))

    def labels(self, value: Any, path: str) -> Mapping[str, str]:
        if not isinstance(value, Mapping):
            raise _Invalid(f"expected a mapping of label names to values, got {_describe(value)}")
        labels: dict[str, str] = {}
        for name, label_value in value.items():
            if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name):
                self.problem(path, f"not a label name: {name!r}", origin=f"{path}.{name}")
            elif name.startswith("__"):
                self.problem(path, f"label names starting with '__' are reserved: {name!r}")
            else:
                try:
                    labels[name] = _label_value(label_value, f"{path}.{name}")
                except _Invalid as exc:
                    self.problem(f"{path}.{name}", str(exc))
        return MappingProxyType(labels)

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise _Invalid(f"expected a mapping, got {_describe(value)}")
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise _Invalid(f"keys must be strings, got {_describe(bad[0])}")
        # A deep copy: the caller's dict (or YAML's) must not change the config behind our back.
        return MappingProxyType(copy.deepcopy(dict(value)))

    def config(self, raw: Mapping[Any, Any]) -> Config:
        # Keys are checked in file order so the problem list reads top to bottom.
        top = self.section(raw, "")
        d = Config()
        units = self.take(top, "units", "", d.units, self.units)

        journal = self.section(top.get("journal"), "journal")
        directory = self.take(journal, "directory", "journal", d.journal.directory, self.path)
        files = self.take(journal, "files", "journal", d.journal.files, self.paths)
        if directory is not None and files:
            self.problem("journal.directory", "cannot be combined with journal.files; set one")

        state_dir = self.take(top, "state_dir", "", d.state_dir, self.path)
        listen = self.take(top, "listen", "", d.listen, _listen)
        rules = self.section(top.get("rules"), "rules")
        rules_config = RulesConfig(
            dirs=self.take(rules, "dirs", "rules", d.rules.dirs, self.paths),
            policy=self.take(rules, "policy", "rules", d.rules.policy, self.path),
        )
        policy = self.take(top, "policy", "", d.policy, self.mapping)
        log = self.section(top.get("log"), "log")
        log_config = LogConfig(
            format=cast(LogFormat, self.take(log, "format", "log", "auto", _choice(LOG_FORMATS))),
            level=cast(LogLevel, self.take(log, "level", "log", "info", _choice(LOG_LEVELS))),
        )
        alertmanager = self._alertmanager(
            self.section(top.get("alertmanager"), "alertmanager"), d.alertmanager
        )
        checkpoint = self.take(
            top,
            "checkpoint_interval_seconds",
            "",
            d.checkpoint_interval_seconds,
            _duration(0, 3600),
        )
        max_replay_age = self.take(
            top, "max_replay_age_seconds", "", d.max_replay_age_seconds, _duration(0)
        )
        return Config(
            units=units,
            journal=JournalConfig(directory=directory, files=files),
            state_dir=state_dir,
            listen=listen,
            rules=rules_config,
            policy=policy,
            log=log_config,
            alertmanager=alertmanager,
            checkpoint_interval_seconds=checkpoint,
            max_replay_age_seconds=max_replay_age,
        )

    def _alertmanager(self, am: Mapping[Any, Any], d: AlertmanagerConfig) -> AlertmanagerConfig:
        p = "alertmanager"
        urls = self.take(am, "urls", p, d.urls, self.urls)
        seen = len(self.problems)
        resend = self.take(
            am, "resend_interval_seconds", p, d.resend_interval_seconds, _duration(5, 600)
        )
        timeout = self.take(am, "timeout_seconds", p, d.timeout_seconds, _duration(0))
        # A push outliving the interval would overlap the next one. Compared only when both
        # values are valid, so one typo does not produce a second, misleading problem.
        if timeout > resend and len(self.problems) == seen:
            self.problem(
                f"{p}.timeout_seconds",
                f"must not exceed resend_interval_seconds ({_num(resend)}), got {_num(timeout)}",
            )
        return AlertmanagerConfig(
            urls=urls,
            resend_interval_seconds=resend,
            timeout_seconds=timeout,
            resolve_resend_seconds=self.take(
                am,
                "resolve_resend_seconds",
                p,
                d.resolve_resend_seconds,
                _duration(0, 86400, zero=True),
            ),
            generator_url=self.take(am, "generator_url", p, d.generator_url, _url(strict=False)),
            external_labels=self.take(am, "external_labels", p, d.external_labels, self.labels),
            bearer_token_file=self.take(am, "bearer_token_file", p, d.bearer_token_file, self.path),
        )


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that records duplicate keys, which plain YAML silently resolves to the last."""

    duplicates: list[str]

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if isinstance(key, str) and key in seen:
                self.duplicates.append(
                    f"line {line}: duplicate key {key!r} (first on line "
                    f"{seen[key]}; the later value would silently win)"
                )
            elif isinstance(key, str):
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        return (
            f"line {line}, column {column}: invalid YAML: character #x{exc.character:04x} "
            f"is not allowed"
        )
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    return f"{where}invalid YAML: {getattr(exc, 'problem', None) or exc}"


def _read_file(path: Path, *, must_exist: bool, problems: list[str]) -> dict[Any, Any]:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        if must_exist:
            problems.append(f"config file {path} not found")
        return {}
    except UnicodeDecodeError as exc:
        problems.append(f"{path}: not UTF-8 text (byte {exc.start})")
        return {}
    except OSError as exc:
        problems.append(f"cannot read config file {path}: {exc.strerror or exc}")
        return {}
    duplicates: list[str] = []
    try:
        # The constructor already reads the text and rejects control characters.
        loader = _UniqueKeyLoader(text)
        loader.duplicates = duplicates
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        problems.append(f"{path}: {_yaml_problem(exc, text)}")
        return {}
    problems.extend(f"{path}: {dup}" for dup in duplicates)
    if data is None:  # an empty file, or only comments
        return {}
    if not isinstance(data, dict):
        problems.append(
            f"{path}: the top level must be a mapping of keys like 'units:', got {_describe(data)}"
        )
        return {}
    return data


def load_config(
    path: Path | None = None,
    *,
    required: bool = False,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load, merge (file < environment < overrides) and validate; ConfigError lists every problem.

    A missing file is an error only when `path` was given or `required` is set; otherwise the
    defaults apply. `overrides` maps dotted keys ("journal.directory") to values from the CLI.
    """
    file_path = DEFAULT_CONFIG_PATH if path is None else path
    problems: list[str] = []
    raw = _read_file(file_path, must_exist=path is not None or required, problems=problems)

    sources: dict[str, str] = {}
    env = os.environ if environ is None else environ
    if state_dir := env.get(STATE_DIR_ENV):  # empty counts as unset
        raw["state_dir"] = state_dir
        sources["state_dir"] = f"environment variable {STATE_DIR_ENV}"
    overrides_map = overrides or {}
    for dotted, value in overrides_map.items():
        parts = dotted.split(".")
        if not all(parts):
            problems.append(f"command line: not a config key: {dotted!r}")
            continue
        node = raw
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value
        sources[dotted] = "command line"
        # `--journal-file` must not clash with the file's `journal.directory`: a command-line
        # source replaces the configured one instead of being combined with it.
        other = _EXCLUSIVE.get(dotted)
        if other and other not in overrides_map:
            node.pop(other.rpartition(".")[2], None)

    checker = _Checker(str(file_path), file_path.parent.absolute(), sources)
    config = checker.config(raw)
    problems.extend(checker.problems)
    if problems:
        raise ConfigError(problems)
    return config


def config_to_dict(config: Config, *, mask_secrets: bool = True) -> dict[str, Any]:
    """The effective config as plain YAML-ready data; URL credentials masked unless asked not to."""

    def url(value: str) -> str:
        return _mask_url(value) if mask_secrets else value

    def opt(value: Path | None) -> str | None:
        return None if value is None else str(value)

    am = config.alertmanager
    return {
        "units": list(config.units),
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
            "external_labels": dict(am.external_labels),
            "bearer_token_file": opt(am.bearer_token_file),
        },
        "checkpoint_interval_seconds": config.checkpoint_interval_seconds,
        "max_replay_age_seconds": config.max_replay_age_seconds,
    }


def _inline(value: Any) -> str:
    """A default as it would be written in the YAML file, on one line."""
    if isinstance(value, list):
        return "[" + ", ".join(_inline(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_inline(v)}" for k, v in value.items()) + "}"
    return _describe(value).strip("'")


def describe_keys() -> list[tuple[str, str, str]]:
    """(dotted key, default as YAML text, one-line description) for every key, in file order."""
    defaults = config_to_dict(Config())
    rows = []
    for key, text in _KEYS.items():
        value: Any = defaults
        for part in key.split("."):
            value = value[part]
        rows.append((key, _inline(value), text))
    return rows
