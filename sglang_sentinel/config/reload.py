"""What SIGHUP does with each configuration key: applied to the running daemon, or kept until a
restart.

Every key of schema.KEYS has a decision here (a test fails on a key without one, and
docs/config.md lists the table). A key needs a restart when the running process is bound to it:
the journal it has open, the units its matches select, the database it writes, the socket it
listens on, or a setting read once when reading starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Final, Literal

from .schema import KEYS, Config, config_to_dict

OnReload = Literal["applied", "restart"]

ON_RELOAD: Final[Mapping[str, OnReload]] = {
    "units": "restart",  # the journal matches are installed when the journal is opened
    "containers": "restart",
    "docker_units": "restart",  # read when the journal is opened
    "docker_root": "restart",  # the file layouts are set up when reading starts
    "kubernetes.pod_logs": "restart",
    "kubernetes.pods": "restart",
    "kubernetes.labels": "restart",  # the API watch starts with the daemon
    "kubernetes.api_url": "restart",
    "kubernetes.node_name": "restart",
    "kubernetes.token_file": "restart",
    "kubernetes.ca_file": "restart",
    "gpu": "applied",  # read by the collector at every scrape
    "journal.directory": "restart",  # the journal is opened once
    "journal.files": "restart",
    "state_dir": "restart",  # the database is opened once
    "listen": "restart",  # the socket is bound once
    "rules.dirs": "applied",  # the rule set is reloaded and handed to the pipeline
    "rules.policy": "applied",  # the policy (checks, decode, stall) is reloaded
    "policy": "applied",
    "log.format": "applied",  # structlog is reconfigured
    "log.level": "applied",
    # Any change to the alertmanager section replaces the pusher.
    "alertmanager.urls": "applied",
    "alertmanager.resend_interval_seconds": "applied",
    "alertmanager.timeout_seconds": "applied",
    "alertmanager.resolve_resend_seconds": "applied",
    "alertmanager.generator_url": "applied",
    "alertmanager.instance": "applied",
    "alertmanager.job": "applied",
    "alertmanager.external_labels": "applied",
    "alertmanager.bearer_token_file": "applied",
    "checkpoint_interval_seconds": "applied",  # read by the pipeline at every commit
    # Where reading starts when the daemon starts; a running daemon reads on from where it is.
    "max_replay_age_seconds": "restart",
    "startups_kept_per_unit": "applied",  # read by the pipeline at every commit
}


def _value(data: Mapping[str, Any], key: str) -> Any:
    for part in key.split("."):
        data = data[part]
    return data


def changed_keys(old: Config, new: Config) -> list[str]:
    """The keys whose value differs between the two configurations, in file order."""
    # Unmasked: a changed password in an Alertmanager URL is a change.
    before = config_to_dict(old, mask_secrets=False)
    after = config_to_dict(new, mask_secrets=False)
    return [key for key in KEYS if _value(before, key) != _value(after, key)]


def _with(config: Config, key: str, source: Config) -> Config:
    """`config` with the value of `key` taken from `source`."""
    head, _, rest = key.partition(".")
    if not rest:
        return dataclasses.replace(config, **{head: getattr(source, head)})
    section = dataclasses.replace(
        getattr(config, head), **{rest: getattr(getattr(source, head), rest)}
    )
    return dataclasses.replace(config, **{head: section})


@dataclasses.dataclass(frozen=True, slots=True)
class Reload:
    """A reload's outcome: the configuration to run, and the changed keys by decision."""

    config: Config
    applied: tuple[str, ...]
    needs_restart: tuple[str, ...]


def plan_reload(running: Config, loaded: Config) -> Reload:
    """The loaded configuration with every restart-only key kept at its running value."""
    changed = changed_keys(running, loaded)
    restart = tuple(key for key in changed if ON_RELOAD[key] == "restart")
    config = loaded
    for key in restart:
        config = _with(config, key, running)
    applied = tuple(key for key in changed if ON_RELOAD[key] == "applied")
    return Reload(config=config, applied=applied, needs_restart=restart)
