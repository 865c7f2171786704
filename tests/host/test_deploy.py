"""The systemd unit in deploy/: hardening score, offline verification, required directives,
and that the Python stack runs under MemoryDenyWriteExecute."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from unitfiles import systemd_analyze, unit_directives

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "sglang-sentinel.service"
MAX_EXPOSURE = 1.1
OVERALL = re.compile(r"Overall exposure level for \S+: (\d+\.\d+)")


def test_exposure_score_is_at_most_1_1() -> None:
    """`systemd-analyze security --offline=true` rates the unit 1.1 or better."""
    result = subprocess.run(
        [systemd_analyze(), "security", "--offline=true", "--no-pager", str(UNIT)],
        capture_output=True,
        text=True,
        check=False,
    )
    match = OVERALL.search(result.stdout)
    assert match, f"no overall exposure line in:\n{result.stdout}\n{result.stderr}"
    score = float(match.group(1))
    assert score <= MAX_EXPOSURE, f"exposure {score} > {MAX_EXPOSURE}:\n{result.stdout}"


def test_verify_reports_nothing_but_the_uninstalled_binary() -> None:
    """`systemd-analyze verify` finds no unknown keys or bad values.

    The one message allowed is the ExecStart binary missing, as it is outside an install.
    """
    result = subprocess.run(
        [systemd_analyze(), "verify", "--man=no", str(UNIT)],
        capture_output=True,
        text=True,
        check=False,
    )
    missing_binary = re.compile(
        r"^sglang-sentinel\.service: Command /opt/sglang-sentinel/\.venv/bin/sentinel "
        r"is not executable: No such file or directory$"
    )
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if line.strip() and not missing_binary.match(line)
    ]
    assert problems == []
    if Path("/opt/sglang-sentinel/.venv/bin/sentinel").exists():
        assert result.returncode == 0


def test_unit_has_the_directives_the_daemon_relies_on() -> None:
    """Readiness, watchdog, identity and directories match what daemon.py implements."""
    directives = unit_directives(UNIT)
    expected = {
        "Type": ["notify"],
        "NotifyAccess": ["main"],
        "WatchdogSec": ["30s"],
        "Restart": ["on-failure"],
        "RestartSec": ["5s"],
        "ExecStart": [
            "/opt/sglang-sentinel/.venv/bin/sentinel run --config /etc/sglang-sentinel/config.yaml"
        ],
        # A shell builtin: no /bin/kill (procps) on minimal images.
        "ExecReload": ["/bin/sh -c 'kill -HUP $$MAINPID'"],
        "DynamicUser": ["yes"],
        "SupplementaryGroups": ["systemd-journal"],
        "StateDirectory": ["sglang-sentinel"],
        "ConfigurationDirectory": ["sglang-sentinel"],
        "Environment": ["SENTINEL_STATE_DIR=%S/sglang-sentinel"],
        "MemoryDenyWriteExecute": ["yes"],
        # Verified under a real PID 1 by the end-to-end (tests/e2e/): the journal stays readable.
        "PrivateUsers": ["yes"],
        "RestrictAddressFamilies": ["AF_UNIX AF_INET AF_INET6"],
    }
    assert {key: directives.get(key) for key in expected} == expected
    # ProcSubset=pid hides /proc/sys/kernel/random/boot_id, which the first start reads.
    assert "ProcSubset" not in directives
    assert "TimeoutStopSec" in directives
    assert int(directives["LimitNOFILE"][0]) >= 16384


MDWE_CHECK = textwrap.dedent(
    """
    import importlib, mmap, pkgutil, sqlite3, ssl, tempfile
    import prometheus_client, structlog, yaml
    from systemd import journal
    import sglang_sentinel

    for module in pkgutil.iter_modules(sglang_sentinel.__path__, "sglang_sentinel."):
        importlib.import_module(module.name)
    assert yaml.load("a: [1, 2]", Loader=yaml.CSafeLoader) == {"a": [1, 2]}
    assert sqlite3.connect(":memory:").execute("select 1").fetchone() == (1,)
    ssl.create_default_context()
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Gauge("probe", "probe", registry=registry).set(1)
    assert b"probe 1.0" in prometheus_client.generate_latest(registry)
    structlog.get_logger().bind(unit="x")
    with tempfile.TemporaryDirectory() as empty:
        journal.Reader(path=empty).close()
    try:
        mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except OSError:
        print("mdwe-enforced")
    """
)
MDWE_EXEC = textwrap.dedent(
    """
    import ctypes, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        sys.exit(77)  # kernel < 6.3
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
    """
)


def run_probe(*launcher: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *launcher, MDWE_CHECK],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )


def test_python_stack_runs_under_memory_deny_write_execute() -> None:
    """The daemon's modules and C extensions work with W+X mappings refused.

    Uses the kernel's PR_SET_MDWE (inherited across exec), which refuses the same W+X and
    exec-gain mappings as systemd's seccomp filter for MemoryDenyWriteExecute=yes.
    """
    plain = run_probe("-c", "import sys; exec(sys.argv[1])")
    # Fails only on an import error unrelated to MDWE; it says so rather than blaming MDWE.
    assert plain.returncode == 0, f"the probe fails even without MDWE:\n{plain.stderr}"
    assert plain.stdout.strip() == ""  # W+X is allowed without MDWE

    result = run_probe("-c", MDWE_EXEC)
    if result.returncode == 77:
        pytest.skip("kernel has no PR_SET_MDWE (needs Linux 6.3+)")
    assert result.returncode == 0, f"fails under MDWE only:\n{result.stderr}"
    assert result.stdout.strip() == "mdwe-enforced"
