"""Tests never touch the host's real services: unit names, cgroups and /run/systemd paths are the
test run's own (journaltools.unique_unit) and removed afterwards.

Once, `test_daemon_live.py` ran its stand-in as `sglang-qwen.service` and overwrote, then deleted,
PID 1's `/run/systemd/units/invocation:sglang-qwen.service` on a host whose real server of that
name was running: journald stamped the real server's lines with the fixture's invocation id.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import hostguard
import journaltools
import pytest
from conftest import require_root

REPO = Path(__file__).resolve().parents[2]
REAL_UNIT = "sglang-qwen.service"
REAL_INVOCATION = "0123456789abcdef0123456789abcdef"
# Calls that make a process run as a unit, and which argument is the unit name.
UNIT_CALLS = {"run_in_unit": (0, "unit_name"), "run": (None, "unit")}


def test_unique_unit_names_carry_the_run_token() -> None:
    name = journaltools.unique_unit("sglang-qwen")
    assert name == f"sglang-qwen-{journaltools.RUN_ID}.service"
    assert journaltools.is_unique_unit(name)
    assert not journaltools.is_unique_unit(REAL_UNIT)
    assert not journaltools.is_unique_unit("sglang-qwen-st1x000000.service")


def test_run_in_unit_refuses_a_real_service_name(live_journald: journaltools.LiveJournald) -> None:
    """`sglang-qwen.service` is refused before any cgroup or symlink is made."""
    link = journaltools.SYSTEMD_UNITS_DIR / f"invocation:{REAL_UNIT}"
    with pytest.raises(journaltools.JournalToolError, match="not a name unique to this test run"):
        live_journald.run_in_unit(REAL_UNIT, ["true"], "f" * 32)
    # (Only our own traces: other test runs may share this host.)
    assert not (link.is_symlink() and os.readlink(link) == "f" * 32)
    assert live_journald._cgroups == [] and live_journald._links == []


def test_a_unique_unit_is_removed_with_its_journald(tmp_path: Path) -> None:
    """While running, the unit has its cgroup and invocation link; afterwards neither is left."""
    require_root()
    unit = journaltools.unique_unit("sentinel-guard")
    link = journaltools.SYSTEMD_UNITS_DIR / f"invocation:{unit}"
    before = hostguard.snapshot()
    with journaltools.live_journald() as daemon:
        proc = daemon.run_in_unit(unit, ["sleep", "60"], "e" * 32)
        assert os.readlink(link) == "e" * 32
        cgroups = [h / "system.slice" / unit for h in journaltools.cgroup_hierarchies()]
        assert all(str(proc.pid) in (c / "cgroup.procs").read_text().split() for c in cgroups)
        during = hostguard.differences(before, hostguard.snapshot())
        assert f"left behind: {link} (-> {'e' * 32})" in during
    assert not link.is_symlink()
    assert not any(c.exists() for c in cgroups)
    mine = [d for d in hostguard.differences(before, hostguard.snapshot()) if unit in d]
    assert mine == []


def test_hostguard_sees_a_real_service_link_replaced_or_removed() -> None:
    """The guard compares what it must: a replaced or removed link of a real name is reported."""
    before = {"/run/systemd/units/invocation:sglang-qwen.service": "-> " + REAL_INVOCATION}
    replaced = {"/run/systemd/units/invocation:sglang-qwen.service": "-> " + "6a1f" * 8}
    assert hostguard.differences(before, replaced) == [
        f"changed: /run/systemd/units/invocation:sglang-qwen.service: -> {REAL_INVOCATION}"
        f" => -> {'6a1f' * 8}"
    ]
    assert hostguard.differences(before, {}) == [
        f"removed: /run/systemd/units/invocation:sglang-qwen.service (was -> {REAL_INVOCATION})"
    ]


def _unique_unit_names(tree: ast.Module) -> set[str]:
    """Names assigned (anywhere in the module) from a `unique_unit(...)` call."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _is_unique_unit_call(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _is_unique_unit_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name == "unique_unit"


def _parameters(tree: ast.Module) -> set[str]:
    return {
        arg.arg
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for arg in (*node.args.args, *node.args.kwonlyargs)
    }


def test_no_test_names_a_unit_or_writes_run_systemd_except_through_the_helper() -> None:
    """Statically: only journaltools touches /run/systemd or cgroup.procs, and every unit a
    test or benchmark runs as comes from unique_unit() (or a parameter the helper then checks)."""
    # The end-to-end (tests/e2e/) boots its own machine: its /run/systemd is not the host's.
    tests = [p for p in REPO.glob("tests/**/*.py") if "e2e" not in p.relative_to(REPO).parts]
    sources = sorted([*tests, *REPO.glob("bench/*.py")])
    assert len(sources) > 20
    problems = []
    for path in sources:
        text = path.read_text()
        tree = ast.parse(text)
        if path.name not in ("journaltools.py", "hostguard.py", "test_host_untouched.py"):
            for needle in (
                "/run/systemd",
                "cgroup.procs",
                "trusted.invocation_id",
                "/sys/fs/cgroup",
            ):
                if needle in text:
                    problems.append(f"{path.name}: mentions {needle}")
        if path.name == "test_host_untouched.py":
            continue  # it calls run_in_unit with a real name on purpose, to see it refused
        allowed = _unique_unit_names(tree) | _parameters(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            attr = node.func.attr
            if attr not in UNIT_CALLS:
                continue
            if attr == "run" and not (
                isinstance(node.func.value, ast.Name) and node.func.value.id == "standin_sglang"
            ):
                continue
            position, keyword = UNIT_CALLS[attr]
            arg = next((k.value for k in node.keywords if k.arg == keyword), None)
            if arg is None and position is not None and len(node.args) > position:
                arg = node.args[position]
            if arg is None:
                continue  # the callee's default: standin_sglang.UNIT, itself checked here
            ok = _is_unique_unit_call(arg) or (isinstance(arg, ast.Name) and arg.id in allowed)
            if not ok:
                problems.append(f"{path.name}:{node.lineno}: {attr}() unit {ast.unparse(arg)}")
    assert problems == []


def test_the_default_unit_of_the_stand_in_is_unique() -> None:
    import standin_sglang

    assert journaltools.is_unique_unit(standin_sglang.UNIT)


def test_live_tests_beside_a_running_sglang_qwen_leave_it_untouched(tmp_path: Path) -> None:
    """The live tests, run beside a `sglang-qwen.service` whose PID 1 symlink exists, leave the
    symlink as it was. In a private mount namespace with its own /run/systemd, so the real host's
    is not the one at stake here."""
    require_root()
    result_file = tmp_path / "after"
    script = f"""
set -eu
mount -t tmpfs -o mode=0755 sentinel-test /run/systemd
mkdir /run/systemd/units
ln -s {REAL_INVOCATION} /run/systemd/units/invocation:{REAL_UNIT}
rc=0
"$PYTHON" -m pytest -q -p no:cacheprovider -p no:randomly \\
    tests/support/test_journaltools.py::test_live_journald_records_unit_and_invocation_id \\
    tests/support/test_journaltools.py::test_live_journald_new_invocation_id_on_restart \\
    "tests/daemon/test_daemon_live.py::test_baseline_pinned_from_the_cli_shows_without_restart" \\
    >"$OUT.log" 2>&1 || rc=$?
{{ readlink /run/systemd/units/invocation:{REAL_UNIT} || echo missing; ls -A /run/systemd/units; }} >"$OUT"
exit $rc
"""
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(result_file)}
    env.pop(journaltools.RUN_ID_ENV, None)  # the inner run gets its own token
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = Path(f"{result_file}.log")
    inner = log.read_text() if log.exists() else ""
    assert proc.returncode == 0, proc.stderr + inner
    assert "3 passed" in inner, inner
    link, *units = result_file.read_text().split()
    assert link == REAL_INVOCATION
    assert units == [f"invocation:{REAL_UNIT}"]
