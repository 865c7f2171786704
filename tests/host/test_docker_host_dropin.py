"""deploy/dropins/docker-host.conf, the drop-in for Docker hosts: what it
grants, what that costs in `systemd-analyze security`, and, against a real dockerd, why a group
cannot do it and that its one capability is enough for a non-root scan. Under a real systemd
PID 1 (the unit, the drop-in and its mount narrowing together): tests/e2e/dockerhost.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from dockerd import IMAGE, SCRIPT, Dockerd, running_dockerd
from sentinelproc import clean_env, sentinel_argv
from unitfiles import systemd_analyze, unit_directives

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "sglang-sentinel.service"
DROPIN = REPO / "deploy" / "dropins" / "docker-host.conf"
MAX_EXPOSURE = 1.4  # the unit alone: 1.1 (test_deploy.py)
NOBODY = 65534
OVERALL = re.compile(r"Overall exposure level for \S+: (\d+\.\d+)")


def offline_exposure(tmp_path: Path, *, dropin: bool) -> float:
    """`systemd-analyze security --offline=true` of the unit installed under a scratch root."""
    system = tmp_path / "etc" / "systemd" / "system"
    system.mkdir(parents=True, exist_ok=True)
    shutil.copy(UNIT, system / UNIT.name)
    shutil.rmtree(system / f"{UNIT.name}.d", ignore_errors=True)
    if dropin:
        (system / f"{UNIT.name}.d").mkdir()
        shutil.copy(DROPIN, system / f"{UNIT.name}.d" / DROPIN.name)
    argv = [systemd_analyze(), "security", "--offline=true", "--no-pager", f"--root={tmp_path}"]
    result = subprocess.run(
        [*argv, UNIT.name],
        capture_output=True,
        text=True,
        check=False,
    )
    match = OVERALL.search(result.stdout)
    assert match, f"no overall exposure line in:\n{result.stdout}\n{result.stderr}"
    return float(match.group(1))


def test_dropin_grants_one_capability_and_narrows_what_it_sees() -> None:
    """CAP_DAC_READ_SEARCH (bounding and ambient), Docker's root cut to containers/, the
    password hashes and SSH keys hidden; nothing else of the unit changed."""
    assert unit_directives(DROPIN) == {
        "CapabilityBoundingSet": ["CAP_DAC_READ_SEARCH"],
        "AmbientCapabilities": ["CAP_DAC_READ_SEARCH"],
        "TemporaryFileSystem": ["/var/lib/docker:ro"],
        "BindReadOnlyPaths": ["/var/lib/docker/containers"],
        "InaccessiblePaths": ["-/etc/shadow -/etc/gshadow -/etc/shadow- -/etc/gshadow- -/etc/ssh"],
    }
    assert DROPIN.read_text().count("[Service]") == 1


def test_dropin_costs_at_most_0_3_in_exposure(tmp_path: Path) -> None:
    """Offline, unit and drop-in as installed: 1.4 or better, against the unit's 1.1."""
    alone = offline_exposure(tmp_path, dropin=False)
    with_dropin = offline_exposure(tmp_path, dropin=True)
    assert alone <= 1.1
    assert alone < with_dropin <= MAX_EXPOSURE


@pytest.fixture
def dockerd() -> Iterator[Dockerd]:
    # Under a directory every user may pass through: the checks below run as nobody and must
    # meet Docker's own modes, not pytest's 0700 tmp_path.
    top = Path(tempfile.mkdtemp(prefix="sentinel-dropin-", dir="/var/tmp"))
    try:
        top.chmod(0o755)
        with running_dockerd(top / "docker") as d:
            yield d
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(top)], check=False)


def as_nobody(*argv: str, groups: str = "", caps: str = "") -> subprocess.CompletedProcess[str]:
    priv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}"]
    priv += [f"--groups={groups}"] if groups else ["--clear-groups"]
    if caps:
        priv += [f"--inh-caps=+{caps}", f"--ambient-caps=+{caps}", f"--bounding-set=-all,+{caps}"]
    return subprocess.run(
        [*priv, "--", *argv], capture_output=True, text=True, check=False, env=clean_env()
    )


@pytest.mark.engines
def test_a_group_cannot_find_a_container_and_the_dropins_capability_can(
    dockerd: Dockerd,
) -> None:
    """dockerd's modes: the root group may read a log but neither list the containers nor read
    config.v2.json (the name); as nobody with only CAP_DAC_READ_SEARCH, `sentinel scan`
    records the container's startup."""
    name = f"sgl-dropin-{os.getpid()}"
    dockerd.docker("run", "--name", name, "--network", "none", IMAGE, "/bin/sh", "-c", SCRIPT)
    cdir = dockerd.data_root / "containers"
    cid = dockerd.container_id(name)
    log = cdir / cid / f"{cid}-json.log"
    assert as_nobody("ls", str(cdir), groups="0").returncode == 2
    assert as_nobody("cat", str(cdir / cid / "config.v2.json"), groups="0").returncode == 1
    assert as_nobody("head", "-c", "8", str(log), groups="0").stdout == '{"log":"'

    (caps,) = unit_directives(DROPIN)["AmbientCapabilities"]
    cap = caps.removeprefix("CAP_").lower()
    state = dockerd.root / "state"
    state.mkdir()
    os.chown(state, NOBODY, NOBODY)
    journal = dockerd.root / "journal"
    journal.mkdir()
    scan = [
        *sentinel_argv("scan", "--json", "--state-dir", str(state), "--container", name),
        *("--docker-root", str(dockerd.data_root), "--journal-dir", str(journal)),
    ]
    result = as_nobody(*scan, caps=cap)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    got = [(s["outcome"], s["facts"]["max_running_requests"]) for s in doc["startups"]]
    assert got == [("ready", 128)]
    assert "sk-real-docker-9" not in result.stdout + result.stderr


def test_the_readme_block_installs_this_dropin_where_uninstall_removes_it() -> None:
    """The README's `docker-host` block (run by the end-to-end) installs the shipped file into
    the unit's drop-in directory, which the README's uninstall removes."""
    sys.path.insert(0, str(REPO / "tests" / "e2e"))
    import readme_blocks

    block = readme_blocks.blocks()["docker-host"].splitlines()
    target = "/etc/systemd/system/sglang-sentinel.service.d/docker-host.conf"
    assert block == [
        f"install -D -m 0644 deploy/dropins/{DROPIN.name} {target}",
        "systemctl daemon-reload",
        "systemctl restart sglang-sentinel",
    ]
    assert (REPO / "deploy" / "dropins" / DROPIN.name) == DROPIN
    uninstall = readme_blocks.install_blocks()["uninstall"]
    assert "/etc/systemd/system/sglang-sentinel.service.d\n" in uninstall
