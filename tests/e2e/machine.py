"""A Debian root booted with systemd as PID 1 in systemd-nspawn, driven with nsenter.

The container shares the host's network namespace (no --private-network), so a port bound on
127.0.0.1 inside is reachable from the host. Commands run through
`nsenter -t PID1 -a env -i PATH=... bash -lc SCRIPT`: `env -i` keeps the host's environment
out, `bash -l` gives root's login PATH as on a real host.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES: tuple[str, ...] = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "ca-certificates",
    "python3",
    "python3-venv",
)
PACKAGES += ("make", "git")
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
BASE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# nspawn's exit status when the container asked for a reboot.
NSPAWN_REBOOT = 133
# What dockerd's runc needs inside the container (tests/e2e/dockerhost.py), each found by its
# error on a cgroup v1 (hybrid) host: the unified hierarchy (nspawn mounts v1 controllers
# read-only: "mkdir /sys/fs/cgroup/cpuset/docker/...: read-only file system"); keyctl and
# friends ("unable to join session keyring: operation not permitted") and bpf (the device
# cgroup's program: "bpf_prog_query(BPF_CGROUP_DEVICE) failed") past nspawn's seccomp filter;
# CAP_NET_ADMIN for a container's own network namespace ("failed to create default sandbox").
# The container shares the host's network namespace, so CAP_NET_ADMIN reaches the host's
# network too: dockerd runs with --bridge=none --iptables=false --ip6tables=false and changes
# none of it; nothing else in the root configures networks. E2E_DOCKER=0 boots without these.
_DOCKER = os.environ.get("E2E_DOCKER", "1") != "0"
DOCKER_NSPAWN_ARGS: tuple[str, ...] = (
    ("--system-call-filter=add_key keyctl request_key bpf", "--capability=CAP_NET_ADMIN")
    if _DOCKER
    else ()
)
DOCKER_NSPAWN_ENV: dict[str, str] = {"SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1"} if _DOCKER else {}


class MachineError(RuntimeError):
    """The container could not be built, booted or driven."""


def mmdebstrap_argv(suite: str, target: Path) -> list[str]:
    return [
        "mmdebstrap",
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        suite,
        str(target),
    ]


def cache_key(suite: str) -> str:
    """Everything a cached root depends on; the UTC day keeps the archive's updates in."""
    version = subprocess.run(
        ["mmdebstrap", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    day = time.strftime("%Y-%m-%d", time.gmtime())
    text = "\n".join([suite, ",".join(PACKAGES), version, os.uname().machine, day])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_root(suite: str, root: Path, log: Path, cache_dir: Path | None = None) -> None:
    """mmdebstrap a minbase root for `suite` into `root` (or unpack a safely keyed cache)."""
    tarball = None
    if cache_dir is not None:
        tarball = cache_dir / f"{suite}-{cache_key(suite)}.tar"
        if tarball.is_file():
            root.mkdir(parents=True)
            _run(["tar", "-C", str(root), "-xf", str(tarball)], log)
            return
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(f".{os.getpid()}.partial.tar")
        _run(mmdebstrap_argv(suite, partial), log)
        partial.rename(tarball)
        root.mkdir(parents=True)
        _run(["tar", "-C", str(root), "-xf", str(tarball)], log)
        return
    _run(mmdebstrap_argv(suite, root), log)


def _run(argv: list[str], log: Path) -> None:
    with log.open("ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        raise MachineError(f"{argv[0]} failed with {result.returncode}; see {log}")


def add_host_cas(root: Path) -> list[str]:
    """Copy the host's local CAs in (this network re-signs HTTPS with them)."""
    copied = []
    if HOST_CA_DIR.is_dir():
        dest = root / HOST_CA_DIR.relative_to("/")
        dest.mkdir(parents=True, exist_ok=True)
        for crt in sorted(HOST_CA_DIR.glob("*.crt")):
            shutil.copy2(crt, dest / crt.name)
            copied.append(crt.name)
    return copied


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            text = (task / "children").read_text()
            kids.extend(int(k) for k in text.split())
    except (FileNotFoundError, ProcessLookupError):
        pass
    return kids


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


@dataclass
class Machine:
    """One container root; boot(), sh(), reboot(), poweroff(); close() always cleans up."""

    name: str
    root: Path
    log: Path
    pid_file: Path
    nspawn: subprocess.Popen[bytes] | None = None
    pid1: int = 0
    boots: int = 0
    failed_units: list[str] = field(default_factory=list)

    def boot(self, timeout: float = 90.0) -> str:
        """Boot the root; return `systemctl is-system-running` (running or degraded)."""
        if self.nspawn is not None and self.nspawn.poll() is None:
            raise MachineError(f"{self.name}: already booted")
        argv = ["systemd-nspawn", "-D", str(self.root), "-b", "--register=no", "--keep-unit"]
        argv += ["--console=pipe", *DOCKER_NSPAWN_ARGS]
        out = self.log.open("ab")
        try:
            self.nspawn = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **DOCKER_NSPAWN_ENV},
            )
        finally:
            out.close()
        self.pid_file.write_text(f"{self.nspawn.pid}\n")
        self.boots += 1
        deadline = time.monotonic() + timeout
        self.pid1 = 0
        while time.monotonic() < deadline:
            if self.nspawn.poll() is not None:
                raise MachineError(
                    f"{self.name}: systemd-nspawn exited with {self.nspawn.returncode}"
                )
            for kid in _children(self.nspawn.pid):
                if _cmdline(kid)[:1] in (["/usr/lib/systemd/systemd"], ["/lib/systemd/systemd"]):
                    self.pid1 = kid
            if self.pid1:
                break
            time.sleep(0.05)
        if not self.pid1:
            raise MachineError(f"{self.name}: no systemd child of nspawn within {timeout} s")
        state = ""
        while time.monotonic() < deadline:
            left = max(1.0, deadline - time.monotonic())
            try:
                result = self.sh("systemctl is-system-running --wait", check=False, timeout=left)
            except subprocess.TimeoutExpired:
                break
            state = result.stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(0.2)
        if state not in ("running", "degraded"):
            raise MachineError(f"{self.name}: system state {state!r} after {timeout} s")
        self.failed_units = []
        if state == "degraded":
            failed = self.sh("systemctl --failed --no-legend --plain", check=False).stdout
            self.failed_units = [line.split()[0] for line in failed.splitlines() if line.strip()]
        return state

    def argv(self, script: str) -> list[str]:
        if not self.pid1:
            raise MachineError(f"{self.name}: not booted")
        return [
            "nsenter", "-t", str(self.pid1), "-a",
            "env", "-i", f"PATH={BASE_PATH}", "HOME=/root", "LANG=C.UTF-8",
            "bash", "-lc", script,
        ]  # fmt: skip

    def sh(
        self, script: str, *, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run a bash script inside as root; stdout/stderr captured and appended to the log."""
        result = subprocess.run(
            self.argv(script),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        with self.log.open("a", encoding="utf-8") as out:
            out.write(f"--- [{self.name}] $ {script}\n{result.stdout}{result.stderr}")
            out.write(f"--- exit {result.returncode}\n")
        if check and result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-25:])
            raise MachineError(f"{self.name}: exit {result.returncode}: {script}\n{tail}")
        return result

    def _wait_exit(self, timeout: float) -> int | None:
        assert self.nspawn is not None
        try:
            return self.nspawn.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def reboot(self, timeout: float = 90.0) -> str:
        """`systemctl reboot` inside; nspawn exits with 133 and is started again on the root."""
        subprocess.run(self.argv("systemctl reboot"), capture_output=True, check=False, timeout=30)
        code = self._wait_exit(timeout)
        if code != NSPAWN_REBOOT:
            raise MachineError(f"{self.name}: nspawn exited with {code} on reboot, expected 133")
        return self.boot(timeout)

    def poweroff(self, timeout: float = 60.0) -> None:
        """Clean shutdown: SIGTERM to nspawn powers the container off; SIGKILL if it hangs."""
        if self.nspawn is None or self.nspawn.poll() is not None:
            return
        self.nspawn.send_signal(signal.SIGTERM)
        if self._wait_exit(timeout) is None:
            self.nspawn.kill()
            self.nspawn.wait(timeout=30)

    def close(self) -> None:
        """Power off and remove the root (always; also after a failure)."""
        try:
            self.poweroff()
        finally:
            self.pid_file.unlink(missing_ok=True)
            if self.root.exists():
                subprocess.run(["rm", "-rf", "--one-file-system", str(self.root)], check=False)
