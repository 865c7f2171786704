"""What a command imports before it does its work: every `sentinel` call (a deploy hook's `check`,
a `scan`) pays it, so the scan and check paths load only the modules they use."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import journaltools
import pytest

# Never needed by scan, check, report (text), diff, startups or baseline (show): the daemon
# (its HTTP/metrics/alert stack), the dashboard generator, structlog (its import pulls in asyncio
# and ssl) while nothing is logged, ctypes.util (find_library runs `ldconfig -p`), and the
# stdlib modules only a baseline export (socket) or the page's escaping would need (html).
NOT_ON_THE_COMMAND_PATH = {
    "asyncio",
    "ssl",
    "structlog",
    "prometheus_client",
    "http.server",
    "wsgiref",
    "urllib.request",
    "subprocess",
    "ctypes.util",
    "importlib.resources",
    "difflib",
    "socket",
    "html",
    "sglang_sentinel.daemon",
    "tools.grafana",
}
# A command that only reads the state does not read the journal either.
JOURNAL_READING = {"systemd.journal", "sglang_sentinel.sources", "sglang_sentinel.startups"}

_PROBE = """
import json, sys
from sglang_sentinel.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


def command_modules(tmp_path: Path, *argv: str) -> tuple[int, set[str]]:
    """Run `sentinel ARGV` in a fresh interpreter; its exit code and every module it imported."""
    report = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(report), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.exists(), done.stderr
    doc = json.loads(report.read_text())
    return doc["code"], set(doc["modules"])


def test_importing_the_cli_loads_no_heavy_module() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, sglang_sentinel.cli; print(json.dumps([*sys.modules]))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded = set(json.loads(done.stdout))
    assert "sglang_sentinel.cli" in loaded
    assert sorted(loaded & (NOT_ON_THE_COMMAND_PATH | JOURNAL_READING)) == []


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, set[str]]:
    """The seed journal scanned into a fresh state directory by a fresh interpreter, once for
    the module (a scan in a fresh interpreter is a second each; the commands only read it)."""
    tmp = tmp_path_factory.mktemp("scanned")
    state = tmp / "state"
    code, loaded = command_modules(
        tmp, "scan", "--journal-dir", str(journaltools.seed_journal(tmp)), "--state-dir", str(state)
    )
    return state, code, loaded


def _reader_modules() -> set[str]:
    """What importing python-systemd's reader loads by itself in this interpreter (on 3.10 its
    `uuid` imports `platform`, which imports `subprocess`): a scan cannot do without it."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, systemd.journal; print(json.dumps([*sys.modules]))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return set(json.loads(done.stdout))


def test_scan_loads_only_the_modules_it_uses(scanned: tuple[Path, int, set[str]]) -> None:
    _, code, loaded = scanned
    assert code == 0
    assert {
        "systemd.journal",
        "sglang_sentinel.startups",
        "sglang_sentinel.sources.sigbus",
    } <= loaded
    assert sorted((loaded - _reader_modules()) & NOT_ON_THE_COMMAND_PATH) == []


@pytest.mark.parametrize(
    ("argv", "uses"),
    [
        (["check"], set()),
        (["check", "--json"], set()),
        (["report"], set()),
        (["diff"], set()),
        (["startups", "--json"], set()),
        (["baseline"], set()),
    ],
)
def test_state_commands_read_no_journal(
    scanned: tuple[Path, int, set[str]], tmp_path: Path, argv: list[str], uses: set[str]
) -> None:
    state = scanned[0]
    code, loaded = command_modules(
        tmp_path, *argv, "--state-dir", str(state), "--unit", "sglang-qwen.service"
    )
    assert code in (0, 1)  # the seed's second startup changed flags: check may find it
    assert "sglang_sentinel.state" in loaded
    assert sorted(loaded & (NOT_ON_THE_COMMAND_PATH | JOURNAL_READING) - uses) == []


_LOGGING = """
import sys
from sglang_sentinel.logs import Logger, configure_logging
configure_logging("json", "warning")
log = Logger("sglang_sentinel")
log.info("below_the_level", unit="u.service")
print("structlog" in sys.modules, flush=True)
log.warning("cursor_reset", reason="x", api_key="sk-EXAMPLE-secret")
try:
    raise ValueError("boom")
except ValueError:
    log.exception("processing_failed")
print("structlog" in sys.modules, flush=True)
"""


def test_a_logger_imports_structlog_at_the_first_event_that_passes_the_level() -> None:
    """Until then nothing is imported; then the configuration given earlier applies as given."""
    done = subprocess.run(
        [sys.executable, "-c", _LOGGING], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["False", "True"]
    events = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(e["event"], e["level"]) for e in events] == [
        ("cursor_reset", "warning"),
        ("processing_failed", "error"),
    ]
    assert events[0]["reason"] == "x"
    assert events[0]["api_key"] == "<redacted>"
    assert "ValueError: boom" in events[1]["exception"]
