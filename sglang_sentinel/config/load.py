"""The YAML configuration: loaded once, validated up front, every problem reported at once.

Precedence, lowest first: built-in defaults, the config file, the environment
(`SENTINEL_STATE_DIR`, set by the systemd unit), command-line overrides.

This module reads the file (YAML errors, duplicate keys), merges the sources and walks the raw
mapping section by section, collecting problems. What a valid config looks like, the records it
becomes and the per-value converters live in config_schema.py (import them from there).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeVar, cast

from sglang_sentinel.compare import policy_problems
from sglang_sentinel.config.schema import (
    LABEL_NAME,
    LOG_FORMATS,
    LOG_LEVELS,
    STARTUPS_KEPT_MIN,
    STATE_DIR_ENV,
    AlertmanagerConfig,
    Config,
    InvalidValue,
    JournalConfig,
    KubernetesConfig,
    LogConfig,
    LogFormat,
    LogLevel,
    RulesConfig,
    api_url,
    choice,
    container_name,
    count,
    describe_value,
    duration,
    format_number,
    http_url,
    known_keys,
    label_string,
    listen_address,
    node_name,
    pod_label_key,
    pod_label_name,
    pod_selector,
    public_url,
    unit_name,
)
from sglang_sentinel.errors import ConfigError
from sglang_sentinel.model import DOCKER_PREFIX
from sglang_sentinel.yamlfile import FileTooLarge, YamlError, load_yaml, read_text

# load_config reads it at call time, so a test may point it elsewhere.
DEFAULT_CONFIG_PATH: Final = Path("/etc/sglang-sentinel/config.yaml")

_EXCLUSIVE: Final = {"journal.directory": "journal.files", "journal.files": "journal.directory"}
_MISSING: Final = object()
_T = TypeVar("_T")


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
            self.problem(path, f"expected a mapping, got {describe_value(raw)}")
            return {}
        known = known_keys(path)
        for key in raw:
            if key in known:
                continue
            full = f"{path}.{key}" if path else str(key)
            import difflib  # only a config with an unknown key needs it

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
                shown = describe_value(str(default) if isinstance(default, Path) else default)
                self.problem(path, f"needs a value (remove the key for the default {shown})")
                return default
        try:
            return convert(value, path)
        except InvalidValue as exc:
            self.problem(path, str(exc))
            return default

    def items(self, value: Any, path: str, convert: Callable[[Any, str], _T]) -> tuple[_T, ...]:
        if not isinstance(value, list | tuple):
            raise InvalidValue(f"expected a list, got {describe_value(value)}")
        good: list[_T] = []
        for i, item in enumerate(value):
            try:
                converted = convert(item, f"{path}[{i}]")
            except InvalidValue as exc:
                self.problem(f"{path}[{i}]", str(exc))
                continue
            if converted in good:
                self.problem(f"{path}[{i}]", f"duplicate of an earlier entry: {item!r}")
            else:
                good.append(converted)
        return tuple(good)

    def path(self, value: Any, path: str) -> Path:
        if not isinstance(value, str) or not value or "\0" in value:
            raise InvalidValue(f"expected a path, got {describe_value(value)}")
        result = Path(value)
        # Like Prometheus: relative paths in the file are relative to the file, so the same
        # file works whatever the daemon's working directory; command-line ones stay as given.
        if not result.is_absolute() and self._source(path) is None:
            result = self._base_dir / result
        return result

    def paths(self, value: Any, path: str) -> tuple[Path, ...]:
        return self.items(value, path, self.path)

    def units(self, value: Any, path: str) -> tuple[str, ...]:
        return self.items(value, path, unit_name)

    def containers(self, value: Any, path: str) -> tuple[str, ...]:
        return self.items(value, path, container_name)

    def pods(self, value: Any, path: str) -> tuple[str, ...]:
        return self.items(value, path, pod_selector)

    def pod_labels(self, value: Any, path: str) -> tuple[str, ...]:
        keys = self.items(value, path, pod_label_key)
        # Two keys that make one Prometheus label (`a.b`, `a_b`) would overwrite each other.
        seen: dict[str, str] = {}
        for key in keys:
            name = pod_label_name(key)
            if name in seen:
                self.problem(path, f"{seen[name]!r} and {key!r} both make the label {name}")
            seen.setdefault(name, key)
        return keys

    def docker_units(self, value: Any, path: str) -> tuple[str, ...]:
        def engine_unit(item: Any, where: str) -> str:
            name = unit_name(item, where)
            if name.startswith(DOCKER_PREFIX):
                raise InvalidValue(
                    f"expected the unit dockerd runs as (docker.service), got {item!r}"
                )
            return name

        return self.items(value, path, engine_unit)

    def urls(self, value: Any, path: str) -> tuple[str, ...]:
        return self.items(value, path, http_url(strict=True))

    def labels(self, value: Any, path: str) -> Mapping[str, str]:
        if not isinstance(value, Mapping):
            raise InvalidValue(
                f"expected a mapping of label names to values, got {describe_value(value)}"
            )
        labels: dict[str, str] = {}
        for name, label_value in value.items():
            if not isinstance(name, str) or not LABEL_NAME.fullmatch(name):
                self.problem(path, f"not a label name: {name!r}", origin=f"{path}.{name}")
            elif name.startswith("__"):
                self.problem(path, f"label names starting with '__' are reserved: {name!r}")
            else:
                try:
                    labels[name] = label_string(label_value, f"{path}.{name}")
                except InvalidValue as exc:
                    self.problem(f"{path}.{name}", str(exc))
        return MappingProxyType(labels)

    def label_value(self, value: Any, path: str) -> str:
        text = label_string(value, path)
        if not text:
            raise InvalidValue("must not be empty")
        return text

    def policy(self, value: Any, path: str) -> Mapping[str, Any]:
        """Inline `policy:` overrides, validated here so problems name this config file."""
        checked = self.mapping(value, path)
        for where, message in policy_problems(checked):
            self.problem(where, message, origin=path)
        return checked

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise InvalidValue(f"expected a mapping, got {describe_value(value)}")
        bad = [k for k in value if not isinstance(k, str)]
        if bad:
            raise InvalidValue(f"keys must be strings, got {describe_value(bad[0])}")
        # A deep copy: the caller's dict (or YAML's) must not change the config behind our back.
        return MappingProxyType(copy.deepcopy(dict(value)))

    def config(self, raw: Mapping[Any, Any]) -> Config:
        # Keys are checked in file order so the problem list reads top to bottom.
        top = self.section(raw, "")
        d = Config()
        seen = len(self.problems)
        containers = self.take(top, "containers", "", d.containers, self.containers)
        docker_root = self.take(top, "docker_root", "", d.docker_root, self.path)
        kube = self.section(top.get("kubernetes"), "kubernetes")
        dk = d.kubernetes
        kubernetes = KubernetesConfig(
            pod_logs=self.take(kube, "pod_logs", "kubernetes", dk.pod_logs, self.path),
            pods=self.take(kube, "pods", "kubernetes", dk.pods, self.pods),
            labels=self.take(kube, "labels", "kubernetes", dk.labels, self.pod_labels),
            api_url=self.take(kube, "api_url", "kubernetes", dk.api_url, api_url),
            node_name=self.take(kube, "node_name", "kubernetes", dk.node_name, node_name),
            token_file=self.take(kube, "token_file", "kubernetes", dk.token_file, self.path),
            ca_file=self.take(kube, "ca_file", "kubernetes", dk.ca_file, self.path),
        )
        # Containers or pods alone watch no unit: the default unit applies only when none is set.
        others = containers or kubernetes.pods
        default_units = () if others and "units" not in top else d.units
        units = self.take(top, "units", "", default_units, self.units)
        docker_units = self.take(top, "docker_units", "", d.docker_units, self.docker_units)
        if not units and not others and len(self.problems) == seen:
            self.problem(
                "units",
                "at least one unit, container or pod is needed, e.g. [sglang-qwen.service]",
            )

        gpu = self.take(top, "gpu", "", d.gpu, label_string)
        journal = self.section(top.get("journal"), "journal")
        directory = self.take(journal, "directory", "journal", d.journal.directory, self.path)
        files = self.take(journal, "files", "journal", d.journal.files, self.paths)
        if directory is not None and files:
            self.problem("journal.directory", "cannot be combined with journal.files; set one")

        state_dir = self.take(top, "state_dir", "", d.state_dir, self.path)
        listen = self.take(top, "listen", "", d.listen, listen_address)
        rules = self.section(top.get("rules"), "rules")
        rules_config = RulesConfig(
            dirs=self.take(rules, "dirs", "rules", d.rules.dirs, self.paths),
            policy=self.take(rules, "policy", "rules", d.rules.policy, self.path),
        )
        policy = self.take(top, "policy", "", d.policy, self.policy)
        log = self.section(top.get("log"), "log")
        log_config = LogConfig(
            format=cast(LogFormat, self.take(log, "format", "log", "auto", choice(LOG_FORMATS))),
            level=cast(LogLevel, self.take(log, "level", "log", "info", choice(LOG_LEVELS))),
        )
        alertmanager = self._alertmanager(
            self.section(top.get("alertmanager"), "alertmanager"), d.alertmanager
        )
        checkpoint = self.take(
            top,
            "checkpoint_interval_seconds",
            "",
            d.checkpoint_interval_seconds,
            duration(0, 3600),
        )
        max_replay_age = self.take(
            top, "max_replay_age_seconds", "", d.max_replay_age_seconds, duration(0)
        )
        kept = self.take(
            top,
            "startups_kept_per_unit",
            "",
            d.startups_kept_per_unit,
            count(STARTUPS_KEPT_MIN, 10_000_000),
        )
        return Config(
            units=units,
            containers=containers,
            docker_units=docker_units,
            docker_root=docker_root,
            kubernetes=kubernetes,
            gpu=gpu,
            journal=JournalConfig(directory=directory, files=files),
            state_dir=state_dir,
            listen=listen,
            rules=rules_config,
            policy=policy,
            log=log_config,
            alertmanager=alertmanager,
            checkpoint_interval_seconds=checkpoint,
            max_replay_age_seconds=max_replay_age,
            startups_kept_per_unit=kept,
        )

    def _alertmanager(self, am: Mapping[Any, Any], d: AlertmanagerConfig) -> AlertmanagerConfig:
        p = "alertmanager"
        urls = self.take(am, "urls", p, d.urls, self.urls)
        seen = len(self.problems)
        resend = self.take(
            am, "resend_interval_seconds", p, d.resend_interval_seconds, duration(5, 600)
        )
        timeout = self.take(am, "timeout_seconds", p, d.timeout_seconds, duration(0))
        # A push outliving the interval would overlap the next one. Compared only when both
        # values are valid, so one typo does not produce a second, misleading problem.
        if timeout > resend and len(self.problems) == seen:
            self.problem(
                f"{p}.timeout_seconds",
                f"must not exceed resend_interval_seconds ({format_number(resend)}), got {format_number(timeout)}",
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
                duration(0, 86400, zero=True),
            ),
            generator_url=self.take(am, "generator_url", p, d.generator_url, public_url),
            instance=self.take(am, "instance", p, d.instance, self.label_value),
            job=self.take(am, "job", p, d.job, self.label_value),
            external_labels=self.take(am, "external_labels", p, d.external_labels, self.labels),
            bearer_token_file=self.take(am, "bearer_token_file", p, d.bearer_token_file, self.path),
        )


def _read_file(path: Path, *, must_exist: bool, problems: list[str]) -> dict[Any, Any]:
    try:
        text = read_text(path)
    except FileTooLarge as exc:
        problems.append(f"{path}: {exc}")
        return {}
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
    try:
        data = load_yaml(text)
    except YamlError as exc:
        problems.extend(f"{path}: {problem}" for problem in exc.problems)
        # Only duplicate keys: the rest is still checked, every problem named at once.
        data = exc.document
    if data is None:  # an empty file, or only comments
        return {}
    if not isinstance(data, dict):
        problems.append(
            f"{path}: the top level must be a mapping of keys like 'units:', got {describe_value(data)}"
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


__all__ = [
    "DEFAULT_CONFIG_PATH",
    "load_config",
]
