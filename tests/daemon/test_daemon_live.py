"""`sentinel run` against a live journald: a stand-in SGLang writes, /metrics shows it.

The sentinel starts first and follows; each startup is then written through journald by the
stand-in running in the unit's cgroup (real `_SYSTEMD_UNIT`, `_SYSTEMD_INVOCATION_ID`,
`_CMDLINE`), and everything is observed the way Prometheus would: HTTP scrapes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import journaltools
import pytest
import standin_sglang
from prometheus_client.parser import text_string_to_metric_families
from sentinelproc import Sentinel, Sentinels, sentinel_argv, wait_until

UNIT = journaltools.unique_unit("sglang-qwen")
SEED_1 = "6a1f0c2e9b7d4e3f8a5b1c0d2e4f6a8b"
SEED_2 = "c37e91d04a5b4f6e9d8c7b6a5f4e3d2c"
SECRET = "sk-EXAMPLE-not-a-real-key"
# What the stand-in's command line looks like to journald (_CMDLINE): SGLang's flags, key included.
SGLANG_FLAGS = ("--model-path", "/models/Qwen3.5-122B-A10B", "--tp-size", "4", "--api-key", SECRET)

MRR = f'sglang_sentinel_max_running_requests{{unit="{UNIT}"}}'
# A critical drop is 1 on both of its tiers (warning and critical); see metrics.py.
REGRESSIONS_AFTER_2 = {
    ("max_running_requests_drop", "warning"),
    ("max_running_requests_drop", "critical"),
    ("kv_cache_tokens_drop", "warning"),
    ("piecewise_cuda_graph_disabled", "warning"),
}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(body: str) -> Samples:
    """Every sample of a /metrics body, keyed by (name, label set), as Prometheus parses it."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def firing(samples: Samples) -> set[tuple[str, str]]:
    """(check, severity) of every sglang_sentinel_regression series at 1 for the unit."""
    out = set()
    for (name, labels), v in samples.items():
        d = dict(labels)
        if name == "sglang_sentinel_regression" and d["unit"] == UNIT and v == 1.0:
            out.add((d["check"], d["severity"]))
    return out


@pytest.fixture
def sentinel(live_journald: journaltools.LiveJournald, tmp_path: Path) -> Iterator[Sentinel]:
    """`sentinel run` following the live journal, fresh state, free port; started before any write."""
    sentinels = Sentinels(tmp_path)
    try:
        yield sentinels.start(
            "--journal-dir",
            str(live_journald.journal_dir),
            "--unit",
            UNIT,
            state=tmp_path / "state",
        )
    finally:
        sentinels.stop_all()


def run_startup(live_journald: journaltools.LiveJournald, startup: int, invocation_id: str) -> None:
    """Write one fixture startup through journald as `UNIT`; wait for the exit."""
    standin_sglang.run(live_journald, startup, invocation_id, unit=UNIT, argv=SGLANG_FLAGS)


def two_startups(live_journald: journaltools.LiveJournald, s: Sentinel) -> str:
    """Startup 1 then startup 2, each waited for on /metrics; returns the final body."""
    run_startup(live_journald, 1, SEED_1)
    body = wait_until(s.scrape_with(f"{MRR} 48.0"), 30, "max_running_requests 48 on /metrics")
    samples = parse(body)
    # A first startup has nothing to regress against: every check's series is there, at 0.
    assert value(samples, "sglang_sentinel_baseline_present", unit=UNIT) == 0.0
    assert firing(samples) == set()
    checks = {dict(k[1])["check"] for k in samples if k[0] == "sglang_sentinel_regression"}
    assert {c for c, _ in REGRESSIONS_AFTER_2} <= checks
    run_startup(live_journald, 2, SEED_2)
    return wait_until(
        s.scrape_when(lambda b: f"{MRR} 26.0" in b and firing(parse(b)) >= REGRESSIONS_AFTER_2),
        30,
        "max_running_requests 26 and the three regressions (four tier series)",
    )


def test_live_startups_show_on_metrics_and_the_regression_fires(
    live_journald: journaltools.LiveJournald, sentinel: Sentinel
) -> None:
    """48 after startup 1; 26 and exactly the three expected regressions after startup 2."""
    samples = parse(two_startups(live_journald, sentinel))
    assert firing(samples) == REGRESSIONS_AFTER_2
    assert value(samples, "sglang_sentinel_max_running_requests", unit=UNIT) == 26.0
    assert value(samples, "sglang_sentinel_baseline_max_running_requests", unit=UNIT) == 48.0
    assert value(samples, "sglang_sentinel_kv_cache_tokens", unit=UNIT) == 277552.0
    assert value(samples, "sglang_sentinel_piecewise_cuda_graph_enabled", unit=UNIT) == 0.0
    assert value(samples, "sglang_sentinel_startups_total", unit=UNIT, outcome="ready") == 2.0
    assert value(samples, "sglang_sentinel_startup_ready", unit=UNIT) == 1.0
    # and the PCG line new in the log, already judged (info: no series, but a finding).
    expected = sorted({c for c, _ in REGRESSIONS_AFTER_2} | {"new_downgrade_message"})

    def raised() -> list[str] | None:
        # finding_raised is logged right after the publish the scrape above saw, not before it.
        got = sorted(str(e["check"]) for e in sentinel.events() if e["event"] == "finding_raised")
        return got if len(got) >= len(expected) else None

    assert wait_until(raised, 10, "the findings logged") == expected
    # Each startup is announced once, though later lines (batch stats, requests) update it.
    events = sentinel.events()
    recorded = [(e["invocation"], e["outcome"]) for e in events if e["event"] == "startup_recorded"]
    assert recorded == [(SEED_1[:8], "ready"), (SEED_2[:8], "ready")]


@pytest.mark.skipif(
    shutil.which("promtool") is None and not os.environ.get("CI"),
    reason="promtool not installed (CI installs it)",
)
def test_live_metrics_pass_promtool(
    live_journald: journaltools.LiveJournald, sentinel: Sentinel
) -> None:
    """The live /metrics body, with startups and firing regressions in it, passes promtool."""
    body = two_startups(live_journald, sentinel)
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=body, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_baseline_pinned_from_the_cli_shows_without_restart(
    live_journald: journaltools.LiveJournald, sentinel: Sentinel
) -> None:
    """`sentinel baseline --pin` in another process while the daemon runs: the gauge turns 1."""
    body = two_startups(live_journald, sentinel)
    assert f'sglang_sentinel_baseline_pinned{{unit="{UNIT}"}} 0.0' in body
    env = {k: v for k, v in os.environ.items() if k != "SENTINEL_STATE_DIR"}
    result = subprocess.run(
        sentinel_argv(
            "baseline", "--pin", SEED_1[:8], "--unit", UNIT, "--state-dir", str(sentinel.state)
        ),
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{UNIT}: pinned startup {SEED_1[:8]} as baseline"
    body = wait_until(
        sentinel.scrape_with(f'sglang_sentinel_baseline_pinned{{unit="{UNIT}"}} 1.0'),
        10,
        "baseline_pinned 1 on /metrics",
    )
    # Compared with the pinned startup 1 now, the findings are the same three.
    assert firing(parse(body)) == REGRESSIONS_AFTER_2
    assert sentinel.proc.poll() is None
    wait_until(lambda: sentinel.logged("state_changed_externally"), 10, "the daemon noticing")


def test_api_key_reaches_neither_metrics_nor_logs_nor_state(
    live_journald: journaltools.LiveJournald, sentinel: Sentinel
) -> None:
    """The key is on the stand-in's _CMDLINE and in server_args, and nowhere in the sentinel's output."""
    body = two_startups(live_journald, sentinel)
    # The journal really carries it, so the absence below is redaction, not missing input.
    entries = live_journald.entries(_SYSTEMD_UNIT=UNIT)
    assert SECRET.encode() in entries[0]["_CMDLINE"]
    assert any(SECRET.encode() in e["MESSAGE"] for e in entries)
    assert SECRET not in body
    startups = subprocess.run(
        sentinel_argv("startups", "--json", "--unit", UNIT, "--state-dir", str(sentinel.state)),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    doc = json.loads(startups.stdout)
    assert [s["invocation_id"] for s in doc["startups"]] == [SEED_1, SEED_2]
    assert "--api-key <redacted>" in doc["startups"][0]["launch_flags"]  # the flag, not its value
    assert SECRET not in startups.stdout
    sentinel.proc.send_signal(signal.SIGTERM)
    assert sentinel.proc.wait(timeout=10) == 0
    assert SECRET not in sentinel.stderr()
    assert sentinel.state is not None
    files = [p for p in sentinel.state.rglob("*") if p.is_file()]
    assert files, "the state directory is empty"
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
