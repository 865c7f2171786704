"""Shared fixtures: real journal files and a live journald (see tests/support/journaltools.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import browser
import hostguard
import journaltools
import pytest
import rulememo
import structlog
from hypothesis import settings
from sentinelproc import Sentinel, Sentinels

from sglang_sentinel import pipeline
from sglang_sentinel.rules import load_rules

ROOT_FIXTURES = frozenset({"live_journald", "run_in_unit"})

# No per-example deadline for any property test: Hypothesis' default (200 ms an example) is a wall
# time bound, and on a busy machine one slow example fails the test as "Flaky" (DeadlineExceeded
# on the first call, not on the replay: seen 1 in 6 runs of test_digit_blind at load 5). What a
# test bounds in time, it bounds itself, in CPU seconds.
settings.register_profile("sentinel", deadline=None)
settings.load_profile("sentinel")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the live journald are `root` tests, whether or not they say so."""
    for item in items:
        if ROOT_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.root)


def require_root() -> None:
    """Skip without root on a workstation; in CI (which runs as root) never skip, fail."""
    if os.geteuid() == 0:
        return
    if os.environ.get("CI"):
        pytest.fail("root tests must run in CI, but CI is not running as root")
    pytest.skip("needs root (standalone journald, cgroups); run as root or with CI=true")


@pytest.fixture
def seed_journal_dir(tmp_path: Path) -> Path:
    """A real journal directory built from the seed-flag-change fixture."""
    return journaltools.seed_journal(tmp_path)


@pytest.fixture
def live_journald() -> Iterator[journaltools.LiveJournald]:
    """A standalone systemd-journald (own namespace, fresh journal directory) for one test."""
    require_root()
    with journaltools.live_journald() as daemon:
        yield daemon


@pytest.fixture
def run_in_unit(
    live_journald: journaltools.LiveJournald,
) -> Callable[..., subprocess.Popen[bytes]]:
    """`run_in_unit(unit_name, argv, invocation_id=None)` on the live journald."""
    return live_journald.run_in_unit


@pytest.fixture(autouse=True)
def _fresh_structlog() -> Iterator[None]:
    """Each test starts from structlog's defaults: an in-process CLI call configures logging
    (level, stream) globally, and a later test's capture_logs() must not inherit that filter."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session", autouse=True)
def _rules_loaded_once_per_content() -> Iterator[rulememo.RuleMemo]:
    """In-process pipelines and CLI commands get the RuleSet an earlier load of the same rule
    files gave (see tests/support/rulememo.py): loading the pack was ~60 ms a time, hundreds
    of times a run."""
    memo = rulememo.RuleMemo(load_rules)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "load_rules", memo)
        yield memo


@pytest.fixture(scope="session", autouse=True)
def _host_services_untouched() -> Iterator[None]:
    """The whole run leaves the host's sglang/sentinel units, cgroups, invocation links and
    journal namespaces exactly as it found them (see tests/support/hostguard.py); else the run errors."""
    before = hostguard.snapshot()
    yield
    changed = hostguard.differences(before, hostguard.snapshot())
    if changed:
        pytest.fail("the test run touched the host:\n" + "\n".join(changed), pytrace=False)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite tests/golden/*/expected-* from the current output (review the diff)",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the CI artifacts this run wrote (the status page screenshot), even under -q."""
    for path in browser.WRITTEN:
        terminalreporter.write_line(f"artifact: {path}")


@pytest.fixture
def sentinels(tmp_path: Path) -> Iterator[Sentinels]:
    """`sentinel run` processes for one test, all reaped at its end (see sentinelproc)."""
    s = Sentinels(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture
def start_sentinel(sentinels: Sentinels) -> Callable[..., Sentinel]:
    """`start_sentinel(*args, env=None, port=None, ready=True)`: see `Sentinels.start`."""
    return sentinels.start
