"""A real dockerd for one test: its own data root, exec root, socket and pidfile, no network.

Debian's docker.io (`dockerd --iptables=false --ip6tables=false --bridge=none
--storage-driver=vfs`), started and stopped by pid (its managed containerd with it). The image
is made with `docker import` from a root holding only Debian's static busybox
(busybox-static): nothing comes from a registry.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

BUSYBOX = Path("/bin/busybox")
IMAGE = "sentinel-test-busybox:1"

# One SGLang start: a server_args line past 16 KiB (6000 cuda_graph_bs values), the summary
# line with max_running_requests = 128 - 32 * (earlier starts of this container), ready, and
# enough access lines to make the json-file driver rotate. /count survives a restart.
SCRIPT = r"""
n=$(cat /count 2>/dev/null || echo 0); echo $((n + 1)) > /count
mrr=$((128 - 32 * n))
bs=$(seq -s ', ' 0 5999)
echo "[2026-01-01 10:00:01] server_args=ServerArgs(model_path='/models/Qwen3-8B', tp_size=2, api_key='sk-real-docker-9', cuda_graph_bs=[$bs], attention_backend='fa3', dp_size=1)" >&2
echo "[2026-01-01 10:00:50 TP0] max_total_num_tokens=400000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=$mrr, context_len=40960, available_gpu_mem=20.00 GB" >&2
echo "[2026-01-01 10:00:55] The server is fired up and ready to roll!" >&2
i=0; while [ $i -lt 400 ]; do echo "[2026-01-01 10:01:00] INFO:     127.0.0.1:$i - \"GET /health HTTP/1.1\" 200 OK"; i=$((i + 1)); done
"""


def require_engine() -> str:
    """dockerd's path; without it (or without root) skip locally and fail in CI."""
    path = shutil.which("dockerd") or (
        "/usr/sbin/dockerd" if Path("/usr/sbin/dockerd").exists() else None
    )
    problem = None
    if os.geteuid() != 0:
        problem = "needs root"
    elif path is None or shutil.which("docker") is None:
        problem = "docker.io is not installed (scripts/bootstrap.sh --test-peers installs it)"
    elif not BUSYBOX.is_file():
        problem = "busybox-static is not installed (scripts/bootstrap.sh --test-peers)"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"real dockerd tests must run in CI: {problem}")
        pytest.skip(problem)
    assert path is not None
    return path


@dataclass
class Dockerd:
    root: Path
    proc: subprocess.Popen[bytes]

    @property
    def data_root(self) -> Path:
        return self.root / "data"

    @property
    def socket(self) -> Path:
        return self.root / "d.sock"

    def docker(self, *args: str, timeout: float = 60) -> str:
        out = subprocess.run(
            ["docker", "-H", f"unix://{self.socket}", *args],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if out.returncode != 0:
            raise AssertionError(f"docker {' '.join(args)}: {out.stderr.decode(errors='replace')}")
        return out.stdout.decode()

    def container_id(self, name: str) -> str:
        return self.docker("inspect", "-f", "{{.Id}}", name).strip()


def _busybox_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("bin")
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        tar.add(str(BUSYBOX), arcname="bin/busybox")
        link = tarfile.TarInfo("bin/sh")
        link.type, link.linkname = tarfile.SYMTYPE, "busybox"
        tar.addfile(link)
    return buf.getvalue()


@contextlib.contextmanager
def running_dockerd(root: Path) -> Iterator[Dockerd]:
    path = require_engine()
    root.mkdir(parents=True, exist_ok=True)
    log = open(root / "dockerd.log", "wb")  # noqa: SIM115 - closed below
    # The exec root holds containerd's sockets (containerd.sock.ttrpc and more), and a unix
    # socket's path has at most 107 bytes: under pytest's tmp_path (pytest-of-root/pytest-324/
    # <test name>/...) it ran past that and containerd never started. A short directory of its own.
    exec_root = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))
    proc = subprocess.Popen(
        [
            path,
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
            "--storage-driver=vfs",
            f"--data-root={root / 'data'}",
            f"--exec-root={exec_root}",
            f"--pidfile={root / 'd.pid'}",
            f"--host=unix://{root / 'd.sock'}",
        ],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    d = Dockerd(root, proc)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError(
                    f"dockerd exited: {(root / 'dockerd.log').read_text()[-2000:]}"
                )
            if d.socket.exists():
                ok = subprocess.run(
                    ["docker", "-H", f"unix://{d.socket}", "version"],
                    capture_output=True,
                    check=False,
                )
                if ok.returncode == 0:
                    break
            if time.monotonic() > deadline:
                raise AssertionError("dockerd did not answer within 30 s")
            time.sleep(0.1)
        subprocess.run(
            ["docker", "-H", f"unix://{d.socket}", "import", "-", IMAGE],
            input=_busybox_tar(),
            capture_output=True,
            check=True,
        )
        yield d
    finally:
        containerd_pid = exec_root / "containerd" / "containerd.pid"
        child = int(containerd_pid.read_text()) if containerd_pid.exists() else None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    os.kill(child, 0)
                    time.sleep(0.1)
                os.kill(child, signal.SIGKILL)
        log.close()
        _unmount_below(root, exec_root)
        shutil.rmtree(exec_root, ignore_errors=True)


def _unmount_below(*tops: Path) -> None:
    """Unmount what dockerd left mounted under its roots (it bind-mounts its data root on
    itself, and a dockerd that died before its cleanup leaves that mount on the host)."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as info:
        for line in info:
            point = line.split()[4].replace("\\040", " ")
            if any(point == str(t) or point.startswith(f"{t}/") for t in tops):
                found.append(point)
    for point in sorted(found, key=len, reverse=True):  # the deepest first
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
