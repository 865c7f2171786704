"""Real CRI log lines from podman (`--log-driver k8s-file`, the format containerd writes for the
kubelet, `P` pieces included) placed as the kubelet lays them out: one `N.log` per container
start, the older one rotated to `N.log.<time>` and gzipped; read by `sentinel scan --pod`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from dockerd import BUSYBOX, SCRIPT, _busybox_tar
from logfiles import gzip_file
from sentinelproc import cli_stdout

pytestmark = pytest.mark.engines


def _runroot(tmp: Path) -> Path:
    """podman refuses a run root longer than 50 characters: a short one, linked from `tmp`."""
    link = tmp / "runroot"
    if not link.is_symlink():
        link.symlink_to(tempfile.mkdtemp(prefix="sgl-podman-", dir="/tmp"))
    return Path(os.readlink(link))


def podman(tmp: Path, *args: str, stdin: bytes | None = None) -> str:
    conf = tmp / "containers.conf"
    if not conf.exists():
        # Debian's default ulimits need privileges this host's container runtime lacks.
        conf.write_text("[containers]\ndefault_ulimits = []\n")
    argv = [
        "podman",
        "--root",
        str(tmp / "root"),
        "--runroot",
        str(_runroot(tmp)),
        "--storage-driver",
        "vfs",
        "--cgroup-manager",
        "cgroupfs",
        "--events-backend",
        "file",
        *args,
    ]
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    out = subprocess.run(argv, input=stdin, capture_output=True, env=env, timeout=120, check=False)
    if out.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {out.stderr.decode(errors='replace')}")
    return out.stdout.decode()


def require_podman() -> None:
    problem = None
    if os.geteuid() != 0:
        problem = "needs root"
    elif shutil.which("podman") is None or not BUSYBOX.is_file():
        problem = "podman / busybox-static not installed (scripts/bootstrap.sh --test-peers)"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"real podman tests must run in CI: {problem}")
        pytest.skip(problem)


def test_podman_cri_lines_in_the_kubelet_layout(tmp_path: Path) -> None:
    require_podman()
    engine = tmp_path / "podman"
    engine.mkdir()
    podman(engine, "import", "-", "sentinel-test-busybox:1", stdin=_busybox_tar())
    name = f"sgl-files-{os.getpid()}"
    pods = tmp_path / "pods"
    cdir = pods / "llm_sglang-0_5e1c2a7b-0000-4000-8000-000000000001" / "server"
    cdir.mkdir(parents=True)
    # Two starts (/count on a volume goes on, as a restarted container's file system does),
    # each written to its own N.log, as the kubelet has the runtime do.
    state = engine / "state"
    state.mkdir()
    for n in range(2):
        log = cdir / f"{n}.log"
        podman(engine, "run", "--rm", "--name", name, "--network", "none", "--log-driver",
               "k8s-file", "--log-opt", f"path={log}", "-v", f"{state}:/state",
               "sentinel-test-busybox:1", "/bin/sh", "-c",
               SCRIPT.replace("/count", "/state/count"))  # fmt: skip
        text = log.read_bytes()
        assert b" stderr P " in text and b" stderr F " in text  # server_args in pieces
    # The kubelet's rotation of the first start's file, then its gzip.
    (cdir / "0.log").rename(cdir / "0.log.20260101-100000")
    (cdir / "0.log").touch()
    gzip_file(cdir / "0.log.20260101-100000")
    shutil.rmtree(_runroot(engine))
    doc = json.loads(
        cli_stdout(
            "scan",
            "--state-dir",
            str(tmp_path / "s"),
            "--json",
            "--pod",
            "llm/sglang-0/server",
            "--pod-logs",
            str(pods),
            timeout=120,
        )
    )
    got = [(s["unit"], s["outcome"], s["facts"]["max_running_requests"]) for s in doc["startups"]]
    assert got == [
        ("k8s:llm/sglang-0/server", "ready", 128),
        ("k8s:llm/sglang-0/server", "ready", 96),
    ]
    assert [f["check"] for f in doc["startups"][1]["findings"]] == ["max_running_requests_drop"]
    for s in doc["startups"]:
        assert s["server_args"]["cuda_graph_bs"] == list(range(6000))
