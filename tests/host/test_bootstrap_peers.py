"""Install only what each command needs, and leave no service behind.

`scripts/bootstrap.sh` (make demo, make check) installs none of the test peers; `--test-peers`
(make test, make ci) installs them and disables the services Debian's postinst enabled, so
nothing of them starts on the next boot. apt and dpkg are stand-ins here (this host has the
packages); the disabling is also run for real with deb-systemd-helper, in a mount namespace.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import require_root

REPO = Path(__file__).resolve().parents[2]
PEERS = {
    "prometheus",
    "prometheus-alertmanager",
    "mtail",
    "sqlite3",
    "chromium",
    "fonts-dejavu-core",
    "docker.io",
    "containerd",
    "podman",
    "busybox-static",
}
# (package, unit) of every unit the peers ship.
PEER_UNITS = [
    ("prometheus", "prometheus.service"),
    ("prometheus-alertmanager", "prometheus-alertmanager.service"),
    ("mtail", "mtail.service"),
    ("docker.io", "docker.service"),
    ("docker.io", "docker.socket"),
    ("containerd", "containerd.service"),
    ("podman", "podman.service"),
    ("podman", "podman.socket"),
]

FAKE_DPKG_QUERY = "#!/bin/sh\necho 'unknown ok not-installed'\n"
FAKE_APT_GET = '#!/bin/sh\necho "$*" >>"$FAKE_LOG/apt-get"\n'
# dpkg -L PKG: the unit files the real packages ship.
FAKE_DPKG = """#!/bin/sh
case "$2" in
    prometheus) echo /lib/systemd/system/prometheus.service ;;
    prometheus-alertmanager) echo /lib/systemd/system/prometheus-alertmanager.service ;;
    mtail) echo /lib/systemd/system/mtail.service ;;
    docker.io) echo /lib/systemd/system/docker.service; echo /lib/systemd/system/docker.socket ;;
    containerd) echo /lib/systemd/system/containerd.service ;;
    podman) echo /lib/systemd/system/podman.service; echo /lib/systemd/system/podman.socket ;;
esac
echo /usr/share/doc/$2
"""
# Like the real one: only under dpkg (DPKG_MAINTSCRIPT_PACKAGE), removes the wants symlinks.
FAKE_HELPER = """#!/bin/sh
[ -n "$DPKG_MAINTSCRIPT_PACKAGE" ] || { echo "was not called from dpkg" >&2; exit 1; }
echo "$DPKG_MAINTSCRIPT_PACKAGE $*" >>"$FAKE_LOG/deb-systemd-helper"
[ -n "$FAKE_HELPER_BROKEN" ] || rm -f "$SENTINEL_SYSTEMD_DIR"/*.wants/"$2"
"""


def run_bootstrap(tmp_path: Path, *args: str, broken_helper: bool = False) -> tuple[int, str]:
    """bootstrap.sh with stand-in apt/dpkg that say every package is missing; the "installed"
    peers' units start out enabled in a scratch systemd directory, as postinst leaves them."""
    bin_dir, log, systemd = tmp_path / "bin", tmp_path / "log", tmp_path / "systemd"
    for d in (bin_dir, log, systemd / "multi-user.target.wants"):
        d.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("dpkg-query", FAKE_DPKG_QUERY),
        ("apt-get", FAKE_APT_GET),
        ("dpkg", FAKE_DPKG),
        ("deb-systemd-helper", FAKE_HELPER),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    for _pkg, unit in PEER_UNITS:
        link = systemd / "multi-user.target.wants" / unit
        if not link.is_symlink():
            link.symlink_to(f"/lib/systemd/system/{unit}")
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "SENTINEL_SYSTEMD_DIR": str(systemd),
        "PYTHON": str(REPO / ".venv" / "bin" / "python"),
    }
    if broken_helper:
        env["FAKE_HELPER_BROKEN"] = "1"
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "bootstrap.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return result.returncode, result.stderr


def installed(tmp_path: Path) -> set[str]:
    log = tmp_path / "log" / "apt-get"
    lines = log.read_text().splitlines() if log.exists() else []
    return {word for line in lines if line.startswith("install ") for word in line.split()[3:]}


def test_demo_and_check_install_no_test_peer(tmp_path: Path) -> None:
    require_root()
    code, err = run_bootstrap(tmp_path)
    assert code == 0, err
    wanted = installed(tmp_path)
    assert {"make", "libsystemd-dev", "systemd-journal-remote"} <= wanted
    assert wanted & PEERS == set()
    assert not (tmp_path / "log" / "deb-systemd-helper").exists()


def test_test_peers_are_installed_and_their_services_disabled(tmp_path: Path) -> None:
    require_root()
    code, err = run_bootstrap(tmp_path, "--test-peers")
    assert code == 0, err
    assert installed(tmp_path) >= PEERS
    calls = (tmp_path / "log" / "deb-systemd-helper").read_text().splitlines()
    assert sorted(calls) == sorted(f"{pkg} disable {unit}" for pkg, unit in PEER_UNITS)
    assert list((tmp_path / "systemd" / "multi-user.target.wants").iterdir()) == []
    for _pkg, unit in PEER_UNITS:
        assert f"disabled {unit} (installed as a test peer" in err


def test_a_peer_service_left_enabled_fails_the_bootstrap(tmp_path: Path) -> None:
    require_root()
    code, err = run_bootstrap(tmp_path, "--test-peers", broken_helper=True)
    assert code == 1
    assert "could not disable prometheus.service" in err


def test_deb_systemd_helper_really_removes_the_boot_symlink() -> None:
    """The real tool, on copies of /etc/systemd/system and its state (a private mount
    namespace): a unit enabled as Debian's postinst does is no longer wanted afterwards."""
    require_root()
    # deb-systemd-helper's own state starts empty, as on the package's first install: after
    # bootstrap installed and disabled prometheus (a fresh host), its kept state says "installed,
    # no link", and `enable` then leaves it disabled. /run is covered by an empty tmpfs too, so the
    # helper sees no running systemd and sends the real PID 1 no daemon-reload.
    script = r"""
set -eu
d=/etc/systemd/system  # a copy: the other units' links stay as they are
keep=$(mktemp -d); cp -a "$d/." "$keep/"
mount -t tmpfs sentinel-test "$d"; cp -a "$keep/." "$d/"; rm -rf "$keep"
mkdir -p /var/lib/systemd/deb-systemd-helper-enabled
mount -t tmpfs sentinel-test /var/lib/systemd/deb-systemd-helper-enabled
mount -t tmpfs sentinel-test /run
DPKG_MAINTSCRIPT_PACKAGE=prometheus deb-systemd-helper enable prometheus.service
test -L /etc/systemd/system/multi-user.target.wants/prometheus.service
DPKG_MAINTSCRIPT_PACKAGE=prometheus deb-systemd-helper disable prometheus.service
if test -e /etc/systemd/system/multi-user.target.wants/prometheus.service; then exit 3; fi
DPKG_MAINTSCRIPT_PACKAGE=prometheus deb-systemd-helper --quiet was-enabled prometheus.service && exit 4
echo disabled
"""
    if not Path("/lib/systemd/system/prometheus.service").exists():
        pytest.fail("prometheus is not installed: run scripts/bootstrap.sh --test-peers")
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (0, "disabled\n"), result.stderr


def test_a_target_the_e2e_installs_is_disabled_too(tmp_path: Path) -> None:
    """systemd-container (the e2e's systemd-nspawn) enables machines.target: .ci/run's footprint
    check failed on a fresh machine. scripts/disable-units.sh, which bootstrap and the e2e both
    call for what they install, disables targets as well as services, sockets and timers."""
    require_root()
    bin_dir, log, systemd = tmp_path / "bin", tmp_path / "log", tmp_path / "systemd"
    for d in (bin_dir, log, systemd / "multi-user.target.wants"):
        d.mkdir(parents=True)
    dpkg = (
        "#!/bin/sh\necho /lib/systemd/system/machines.target\n"
        "echo /lib/systemd/system/systemd-machined.service\necho /usr/bin/systemd-nspawn\n"
    )
    for name, text in (("dpkg", dpkg), ("deb-systemd-helper", FAKE_HELPER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (systemd / "multi-user.target.wants" / "machines.target").symlink_to(
        "/lib/systemd/system/machines.target"
    )
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_LOG": str(log),
        "SENTINEL_SYSTEMD_DIR": str(systemd),
    }
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "disable-units.sh"), "an e2e tool", "systemd-container"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert (log / "deb-systemd-helper").read_text().splitlines() == [
        "systemd-container disable machines.target",
        "systemd-container disable systemd-machined.service",
    ]
    assert list((systemd / "multi-user.target.wants").iterdir()) == []
    assert "disabled machines.target (installed as an e2e tool" in result.stderr
    e2e = (REPO / "scripts" / "e2e.sh").read_text()
    assert 'disable-units.sh" "an e2e tool" "${missing[@]}"' in e2e
