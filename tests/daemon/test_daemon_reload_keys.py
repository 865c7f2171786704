"""Every config key has a reload decision: applied to the running daemon, or named as needing a
restart and kept. In process, with the daemon's parts handed in: a loader, a fake clock and a
recording alert sink instead of an Alertmanager."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from journaltools import StartupScript, build_journal
from prometheus_client import generate_latest

from sglang_sentinel.config import AlertmanagerConfig, Config, ListenAddress, plan_reload
from sglang_sentinel.config.reload import ON_RELOAD, changed_keys
from sglang_sentinel.config.schema import KEYS, JournalConfig, LogConfig
from sglang_sentinel.daemon import Daemon
from sglang_sentinel.logs import configure_logging
from sglang_sentinel.model import Comparison, Stats
from sglang_sentinel.rules import default_policy_path
from sglang_sentinel.sources import JournalSource

REPO = Path(__file__).resolve().parents[2]
UNIT = "sglang-qwen.service"
EXTRA_RULE = """\
version: 1
rules:
  - id: reload_test_rule
    description: A served request (this test's own rule).
    scope: runtime
    contains: "POST /v1/chat/completions"
    regex: '"POST /v1/chat/completions HTTP/1\\.1" 200'
    samples:
      match:
        - line: '[2026-03-09 21:41:30] INFO:     10.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
          facts: {}
"""


class RecordingSink:
    """Stands in for the Alertmanager pusher: keeps the checks of every update."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.started = self.stopped = False
        self.updates: list[list[str]] = []

    def start(self) -> None:
        self.started = True

    def update(self, comparisons: Sequence[Comparison]) -> None:
        self.updates.append(sorted(f.check for c in comparisons for f in c.findings))

    def stop(self) -> None:
        self.stopped = True


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclasses.dataclass
class Harness:
    """A daemon built from its parts, started as run() starts it, minus the socket and loop."""

    daemon: Daemon
    loaded: list[Config]  # what the loader returns next (the last item)
    sinks: list[RecordingSink]
    clock: Clock
    capsys: pytest.CaptureFixture[str]

    def reload(self, config: Config) -> dict[str, dict[str, Any]]:
        """SIGHUP with `config` on disk; the reload's events by name."""
        self.capsys.readouterr()
        self.loaded.append(config)
        self.daemon.reload()
        return {e["event"]: e for e in self.events()}

    def events(self) -> list[dict[str, Any]]:
        err = self.capsys.readouterr().err
        return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


@pytest.fixture
def harness_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Iterator[Callable[[Config], Harness]]:
    made: list[Harness] = []

    def make(config: Config) -> Harness:
        loaded = [config]
        sinks: list[RecordingSink] = []

        def sink(config: Config, stats: Stats) -> RecordingSink | None:
            if not config.alertmanager.urls:
                return None
            sinks.append(RecordingSink(config))
            return sinks[-1]

        clock = Clock(datetime(2026, 3, 10, tzinfo=timezone.utc).timestamp())
        configure_logging(config.log.format, config.log.level)
        d = Daemon.from_config(config, loader=lambda: loaded[-1], clock=clock, sinks=sink)
        d.source.open()
        d.pipeline.resume(from_boot_start=False)
        d.publish()
        d._remember_announced()
        d._restart_pusher()
        d._drain()
        h = Harness(d, loaded, sinks, clock, capsys)
        made.append(h)
        return h

    yield make
    for h in made:
        h.daemon._shutdown()


@pytest.fixture
def seed_config(seed_journal_dir: Path, tmp_path: Path) -> Config:
    return Config(
        units=(UNIT,),
        journal=JournalConfig(directory=seed_journal_dir),
        state_dir=tmp_path / "state",
        listen=ListenAddress(port=1),  # never bound here
        log=LogConfig(format="json"),
    )


def _set(config: Config, key: str, value: Any) -> Config:
    head, _, rest = key.partition(".")
    if not rest:
        return dataclasses.replace(config, **{head: value})
    section = dataclasses.replace(getattr(config, head), **{rest: value})
    return dataclasses.replace(config, **{head: section})


def _get(config: Config, key: str) -> Any:
    value: Any = config
    for part in key.split("."):
        value = getattr(value, part)
    return value


def _changes(tmp_path: Path) -> dict[str, Any]:
    """A valid value, different from the seed config's, for every key."""
    rules = tmp_path / "rules.d"
    rules.mkdir(exist_ok=True)
    (rules / "70-extra.yaml").write_text(EXTRA_RULE)
    policy = tmp_path / "policy.yaml"
    shutil.copy(default_policy_path(), policy)
    return {
        "units": (UNIT, "sglang-other.service"),
        "containers": ("sglang-box",),
        "docker_units": ("docker-gpu.service",),
        "docker_root": tmp_path / "docker",
        "kubernetes.pod_logs": tmp_path / "pods",
        "kubernetes.pods": ("llm/sglang",),
        "kubernetes.labels": ("app",),
        "kubernetes.api_url": "https://10.96.0.1:443",
        "kubernetes.node_name": "gpu-node-1",
        "kubernetes.token_file": tmp_path / "k8s-token",
        "kubernetes.ca_file": tmp_path / "k8s-ca.crt",
        "gpu": "H100-SXM-80GB",
        "journal.directory": tmp_path / "elsewhere",
        "journal.files": (tmp_path / "one.journal",),
        "state_dir": tmp_path / "state-elsewhere",
        "listen": ListenAddress(port=2),
        "rules.dirs": (rules,),
        "rules.policy": policy,
        "policy": MappingProxyType({"checks": {"startup_stalled": {"min_seconds": 60}}}),
        "log.format": "auto",  # stderr is no terminal here: JSON still
        "log.level": "debug",
        "alertmanager.urls": ("http://127.0.0.1:9/",),
        "alertmanager.resend_interval_seconds": 30.0,
        "alertmanager.timeout_seconds": 2.0,
        "alertmanager.resolve_resend_seconds": 60.0,
        "alertmanager.generator_url": "http://grafana.example/d/x",
        "alertmanager.instance": "llm-two:19110",
        "alertmanager.job": "sentinels",
        "alertmanager.external_labels": MappingProxyType({"cluster": "gpu-a"}),
        "alertmanager.bearer_token_file": tmp_path / "token",
        "checkpoint_interval_seconds": 1.0,
        "max_replay_age_seconds": 3600.0,
        "startups_kept_per_unit": 20,
    }


# -- the table -------------------------------------------------------------------------------------


def test_every_config_key_has_a_reload_decision() -> None:
    assert list(ON_RELOAD) == list(KEYS)
    assert set(ON_RELOAD.values()) == {"applied", "restart"}


def test_docs_config_md_lists_the_decision_of_every_key() -> None:
    text = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    section = text.split("## Reload (SIGHUP)", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_.]+)` \| (applied on reload|needs restart) \|$", section, re.M)
    wording = {"applied": "applied on reload", "restart": "needs restart"}
    assert rows == [(key, wording[on]) for key, on in ON_RELOAD.items()]


def test_changed_keys_sees_a_change_of_each_key_alone(tmp_path: Path) -> None:
    base = Config(log=LogConfig(format="json"))
    for key, value in _changes(tmp_path).items():
        assert changed_keys(base, _set(base, key, value)) == [key]


def test_a_restart_key_keeps_its_running_value_and_the_rest_is_taken(tmp_path: Path) -> None:
    running = Config(journal=JournalConfig(directory=tmp_path / "a"))
    loaded = Config(
        units=("sglang-b.service",),
        journal=JournalConfig(files=(tmp_path / "x.journal",)),
        gpu="L40S",
    )
    plan = plan_reload(running, loaded)
    assert plan.needs_restart == ("units", "journal.directory", "journal.files")
    assert plan.applied == ("gpu",)
    assert plan.config == dataclasses.replace(running, gpu="L40S")


# -- each key on a running daemon ------------------------------------------------------------------


@pytest.mark.parametrize("key", list(KEYS))
def test_reload_applies_or_names_each_key(
    key: str, harness_of: Callable[[Config], Harness], seed_config: Config, tmp_path: Path
) -> None:
    h = harness_of(seed_config)
    value = _changes(tmp_path)[key]
    events = h.reload(_set(seed_config, key, value))
    done = events["reload_done"]
    if ON_RELOAD[key] == "applied":
        assert done["applied"] == [key]
        assert "reload_partial" not in events
        assert _get(h.daemon.config, key) == value
    else:
        assert done["applied"] == []
        assert events["reload_partial"]["needs_restart"] == [key]
        assert h.daemon.config == seed_config  # kept until the restart


def test_restart_keys_leave_the_open_journal_store_and_units_alone(
    harness_of: Callable[[Config], Harness], seed_config: Config, tmp_path: Path
) -> None:
    h = harness_of(seed_config)
    source, store = h.daemon.source, h.daemon.store
    changes = _changes(tmp_path)
    loaded = seed_config
    for key in ("units", "journal.directory", "state_dir", "max_replay_age_seconds"):
        loaded = _set(loaded, key, changes[key])
    events = h.reload(loaded)
    assert events["reload_partial"]["needs_restart"] == [
        "units",
        "journal.directory",
        "state_dir",
        "max_replay_age_seconds",
    ]
    assert isinstance(source, JournalSource)
    assert h.daemon.source is source and source.units == (UNIT,)
    assert source.directory == seed_config.journal.directory
    assert h.daemon.store is store
    assert 'unit="sglang-other.service"' not in generate_latest(h.daemon.registry).decode()


def test_gpu_reaches_the_next_scrape(
    harness_of: Callable[[Config], Harness], seed_config: Config
) -> None:
    h = harness_of(seed_config)
    assert 'gpu=""' in generate_latest(h.daemon.registry).decode()
    h.reload(dataclasses.replace(seed_config, gpu="H100-SXM-80GB"))
    text = generate_latest(h.daemon.registry).decode()
    assert 'gpu="H100-SXM-80GB"' in text and 'gpu=""' not in text


def test_rule_dirs_and_checkpoint_interval_reach_the_pipeline(
    harness_of: Callable[[Config], Harness], seed_config: Config, tmp_path: Path
) -> None:
    h = harness_of(seed_config)
    changes = _changes(tmp_path)
    assert "reload_test_rule" not in [r.id for r in h.daemon.pipeline.rules.rules]
    h.reload(
        dataclasses.replace(
            seed_config,
            rules=dataclasses.replace(seed_config.rules, dirs=changes["rules.dirs"]),
            checkpoint_interval_seconds=1.0,
        )
    )
    assert "reload_test_rule" in [r.id for r in h.daemon.pipeline.rules.rules]
    assert h.daemon.pipeline.checkpoint_interval == 1.0


def test_log_level_applies_to_the_next_event(
    harness_of: Callable[[Config], Harness], seed_config: Config
) -> None:
    import structlog

    h = harness_of(seed_config)
    h.reload(dataclasses.replace(seed_config, log=LogConfig(format="json", level="warning")))
    structlog.get_logger("sglang_sentinel").info("quiet_now")
    structlog.get_logger("sglang_sentinel").warning("still_heard")
    assert [e["event"] for e in h.events()] == ["still_heard"]


def test_alertmanager_settings_replace_the_sink_which_gets_the_open_findings_at_once(
    harness_of: Callable[[Config], Harness], seed_config: Config
) -> None:
    h = harness_of(seed_config)
    assert h.sinks == []  # no URL: no sink
    am = AlertmanagerConfig(urls=("http://127.0.0.1:9/",))
    h.reload(dataclasses.replace(seed_config, alertmanager=am))
    (first,) = h.sinks
    assert first.started and first.config.alertmanager == am
    # The seed journal's second startup dropped max_running_requests: pushed without waiting
    # for another journal entry.
    assert "max_running_requests_drop" in first.updates[-1]
    h.reload(dataclasses.replace(seed_config, alertmanager=dataclasses.replace(am, job="other")))
    assert first.stopped
    assert [s.config.alertmanager.job for s in h.sinks] == ["sglang-sentinel", "other"]
    h.reload(dataclasses.replace(seed_config, alertmanager=dataclasses.replace(am, job="other")))
    assert len(h.sinks) == 2  # nothing changed: the sink stays


# -- policy (stall and decode settings live there) on a fake clock --------------------------------

STALL_UNIT = "sglang-reload-stall.service"
STARTED = datetime(2026, 3, 10, 8, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def starting_config(tmp_path: Path) -> Config:
    """A unit whose startup said "Started" and nothing more."""
    script = StartupScript(unit=STALL_UNIT, start=STARTED, invocation_id="5b" * 16)
    script.started(STARTED)
    journal = build_journal(script.write(tmp_path / "s.export"), tmp_path / "stall-journal")
    return Config(
        units=(STALL_UNIT,),
        journal=JournalConfig(directory=journal),
        state_dir=tmp_path / "stall-state",
        log=LogConfig(format="json"),
        alertmanager=AlertmanagerConfig(urls=("http://127.0.0.1:9/",)),
    )


def test_the_stall_timer_runs_on_the_injected_clock_and_reaches_the_sink(
    harness_of: Callable[[Config], Harness], starting_config: Config
) -> None:
    h = harness_of(starting_config)
    (sink,) = h.sinks
    h.clock.now = STARTED.timestamp() + 899
    h.daemon._housekeeping()
    assert all("startup_stalled" not in checks for checks in sink.updates)
    h.clock.now = STARTED.timestamp() + 900  # the default policy: 15 minutes without a baseline
    h.daemon._housekeeping()
    assert sink.updates[-1] == ["startup_stalled"]
    raised = [e for e in h.events() if e["event"] == "finding_raised"]
    assert [(e["unit"], e["check"]) for e in raised] == [(STALL_UNIT, "startup_stalled")]


def test_a_reloaded_policy_raises_its_findings_at_once(
    harness_of: Callable[[Config], Harness], starting_config: Config
) -> None:
    """The policy applies on reload: a shorter stall time raises startup_stalled in the log and
    the sink right away, not at the next journal entry or timer tick."""
    h = harness_of(starting_config)
    (sink,) = h.sinks
    h.clock.now = STARTED.timestamp() + 120
    h.daemon._housekeeping()
    assert all("startup_stalled" not in checks for checks in sink.updates)
    policy = {"checks": {"startup_stalled": {"min_seconds": 60}}}
    events = h.reload(dataclasses.replace(starting_config, policy=MappingProxyType(policy)))
    assert events["reload_done"]["applied"] == ["policy"]
    assert events["finding_raised"]["check"] == "startup_stalled"
    assert sink.updates[-1] == ["startup_stalled"]
    # And back: the default policy clears it, again at once.
    events = h.reload(starting_config)
    assert events["finding_cleared"]["check"] == "startup_stalled"
    assert sink.updates[-1] == []
