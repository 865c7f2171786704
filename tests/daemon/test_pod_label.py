"""The pod of a Kubernetes target on /metrics: one `sglang_sentinel_pod_info` series per target,
the pod of its latest startup, replaced (never added to) when a rollout makes a new pod."""

from __future__ import annotations

import shutil
from pathlib import Path

from logfiles import Clock, PodDir, sglang_start
from prometheus_client import generate_latest

from sglang_sentinel.config import load_config
from sglang_sentinel.daemon import Daemon

UNIT = "k8s:llm/sglang/server"
OLD = "sglang-7d9f8b6c4d-x2kqz"  # a Deployment's pods: ReplicaSet hash and suffix
NEW = "sglang-5f6d7c8b9-w4ml2"


def pod_series(daemon: Daemon) -> list[str]:
    page = generate_latest(daemon.registry).decode()
    return [line for line in page.splitlines() if line.startswith("sglang_sentinel_pod_info")]


def info(pod: str) -> str:
    return f'sglang_sentinel_pod_info{{k8s_pod="{pod}",unit="{UNIT}"}} 1.0'


def daemon_of(pods: Path, state: Path) -> Daemon:
    config = load_config(
        overrides={
            "units": [],
            "kubernetes.pods": ["llm/sglang/server"],
            "kubernetes.pod_logs": str(pods),
            "state_dir": str(state),
        },
        environ={},
    )
    daemon = Daemon.from_config(config)
    daemon.source.open(follow=False)
    daemon.pipeline.resume(from_boot_start=False)
    return daemon


def test_the_pod_label_follows_a_rollout_one_series_at_a_time(tmp_path: Path) -> None:
    pods, state = tmp_path / "pods", tmp_path / "state"
    clock = Clock()
    old = PodDir(pods, "llm", OLD, "uid-old", clock)
    sglang_start(lambda t: old.line("server", 0, t), "2026-01-01", 48)
    daemon = daemon_of(pods, state)
    try:
        assert pod_series(daemon) == []  # nothing published yet
        daemon._drain()
        assert pod_series(daemon) == [info(OLD)]
        # The rollout's new pod starts while the old one is still there: its startup under way
        # is the target's latest, so the label moves to it and the old pod's series is gone.
        new = PodDir(pods, "llm", NEW, "uid-new", clock)
        new.line("server", 0, "[2026-01-01 11:00:01] server_args=ServerArgs(tp_size=2)")
        daemon._drain()
        assert pod_series(daemon) == [info(NEW)]
        shutil.rmtree(old.dir)  # the kubelet removes the old pod's logs
        sglang_start(lambda t: new.line("server", 1, t), "2026-01-01", 26)
        daemon._drain()
        assert pod_series(daemon) == [info(NEW)]
    finally:
        daemon.source.close()
        daemon.store.close()
    # A restarted daemon knows the pod from the files before any new line.
    again = daemon_of(pods, state)
    try:
        again.publish()
        assert pod_series(again) == [info(NEW)]
    finally:
        again.source.close()
        again.store.close()


def test_a_pod_whose_logs_are_gone_has_no_pod_series(tmp_path: Path) -> None:
    """The label names a pod that is there: once its files are removed, no series (not a
    stale name), while the startup's facts stay."""
    pods, state = tmp_path / "pods", tmp_path / "state"
    pods.mkdir()
    old = PodDir(pods, "llm", OLD, "uid-old")
    sglang_start(lambda t: old.line("server", 0, t), "2026-01-01", 48)
    daemon = daemon_of(pods, state)
    try:
        daemon._drain()
        assert pod_series(daemon) == [info(OLD)]
        shutil.rmtree(old.dir)
        assert list(daemon.source.lines()) == []  # lists the layout again (follow=False)
        daemon.publish()
        assert pod_series(daemon) == []
        page = generate_latest(daemon.registry).decode()
        assert f'sglang_sentinel_max_running_requests{{unit="{UNIT}"}} 48.0' in page
    finally:
        daemon.source.close()
        daemon.store.close()
