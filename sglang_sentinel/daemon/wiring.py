"""Building the daemon's parts from a Config: the pipeline (its source, rules, policy and state
store) and the alert sink. `Daemon.from_config` and a reload use these; tests hand the daemon
parts of their own instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..config import Config
from ..model import Comparison, Stats
from ..pipeline import Pipeline, build_source, load_rules_and_policy, source_key
from ..state import StateStore
from .alerts import AlertPusher, default_instance

# How long one commit waits for another process's write lock before it counts as failed.
BUSY_TIMEOUT_S = 1.0


class FindingSink(Protocol):
    """Where the open findings go besides the log and /metrics (the Alertmanager pusher)."""

    def start(self) -> None: ...

    def update(self, comparisons: Sequence[Comparison]) -> None: ...

    def stop(self) -> None: ...


# Builds the sink for a configuration (None: nothing to push to); called at start and again
# when a reload changes the alertmanager settings.
SinkFactory = Callable[[Config, Stats], "FindingSink | None"]


def alert_pusher(config: Config, stats: Stats) -> AlertPusher | None:
    """The Alertmanager pusher of `config`, or None when it names no Alertmanager."""
    if not config.alertmanager.urls:
        return None
    return AlertPusher(
        config.alertmanager,
        stats=stats,
        instance=default_instance(config.listen),
        generator_url=f"http://{config.listen}/metrics",
    )


def build_pipeline(config: Config) -> Pipeline:
    """The pipeline `config` describes: its rules and policy, state store and source."""
    rules, policy = load_rules_and_policy(config)
    store = StateStore(config.state_dir, busy_timeout=BUSY_TIMEOUT_S)
    source = build_source(config)
    return Pipeline(
        source,
        rules,
        policy,
        store,
        source_key=source_key(config),
        stats=Stats(),
        checkpoint_interval=config.checkpoint_interval_seconds,
        startups_kept=config.startups_kept_per_unit,
    )
