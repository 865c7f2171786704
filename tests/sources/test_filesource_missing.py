"""A layout's directory that is not there when the sentinel starts (Docker installed, or the
kubelet started, after it): a following source says so once, watches the nearest directory
above it with inotify (no polling) and reads its files once it appears; one pass says clearly
that there is nothing to read."""

from __future__ import annotations

import select
import shutil
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from logfiles import Clock, DockerDir, PodDir, sglang_start
from structlog.testing import capture_logs

from sglang_sentinel.cli import main
from sglang_sentinel.config.schema import Config, JournalConfig
from sglang_sentinel.daemon.wiring import build_pipeline
from sglang_sentinel.model import JournalEntry, parse_selector
from sglang_sentinel.pipeline import build_source
from sglang_sentinel.sources import (
    CombinedSource,
    DockerLayout,
    FileSource,
    JournalSource,
    PodLayout,
)

CID = "c" * 64
WAIT_S = 10.0  # the wake-up comes at once; this only bounds a failure


def _texts(source: FileSource) -> list[str]:
    return [
        item.message if isinstance(item, JournalEntry) else item.decode() for item in source.lines()
    ]


def _woken(fd: int) -> bool:
    """Whether `fd` becomes readable within WAIT_S."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(int(WAIT_S * 1000)))


def _read_until(source: FileSource, want: int) -> list[str]:
    """The lines handed out as the inotify fd wakes the reader, until `want` of them or
    WAIT_S (as the daemon's loop reads: on each wake-up, after taking in the events)."""
    got: list[str] = []
    deadline = time.monotonic() + WAIT_S
    while len(got) < want and time.monotonic() < deadline:
        poller = select.poll()
        poller.register(source.fileno(), select.POLLIN)
        poller.poll(max(1, int((deadline - time.monotonic()) * 1000)))
        source.acknowledge_changes()
        got += _texts(source)
    return got


def _events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [e for e in logs if e["event"] == name]


def test_a_pod_log_directory_made_after_start_is_followed_once_it_appears(
    tmp_path: Path,
) -> None:
    """/var/log/pods made after the daemon started (two levels missing), removed, made again:
    each time its pods' lines are read; the watch above it moves down as directories appear
    and goes once it is there. Before: open raised 'log directory ... does not exist' (the
    daemon exited)."""
    root = tmp_path / "var" / "log" / "pods"
    source = FileSource([PodLayout(root, [parse_selector("llm/sglang-0")])])
    with capture_logs() as logs:
        source.open(follow=True)
        source.seek_head()
        assert _texts(source) == []
        assert source._inotify is not None
        assert source._inotify.watched == {tmp_path}
        (tmp_path / "var").mkdir()  # made a level at a time, as `mkdir -p` does
        assert _woken(source.fileno())
        source.acknowledge_changes()
        assert _texts(source) == []
        assert source._inotify.watched == {tmp_path / "var"}
        pod = PodDir(root, "llm", "sglang-0", "u1", Clock())
        pod.line("server", 0, "first start")
        assert _read_until(source, 1) == ["first start"]
        assert source._inotify.watched == {root, pod.dir, pod.dir / "server"}
        shutil.rmtree(root)
        assert _woken(source.fileno())
        source.acknowledge_changes()
        assert _texts(source) == []
        assert root.parent in source._inotify.watched
        again = PodDir(root, "llm", "sglang-0", "u2", Clock(1_767_300_000_000_000))
        again.line("server", 0, "new pod")
        assert _read_until(source, 1) == ["new pod"]
    source.close()
    assert [
        (e["log_level"], e["directory"], e["watching"])
        for e in _events(logs, "log_directory_missing")
    ] == [
        ("warning", str(root), str(tmp_path)),
        ("warning", str(root), str(root.parent)),
    ]
    assert [e["directory"] for e in _events(logs, "log_directory_appeared")] == [str(root)] * 2


def test_dockers_containers_directory_made_after_start_is_followed(tmp_path: Path) -> None:
    """Docker installed after the sentinel: its root and containers directory appear, then a
    container's json-file log; an info line (a host without Docker is no fault), not a warning.
    Before: open raised for the missing root."""
    root = tmp_path / "docker"
    source = FileSource([DockerLayout(root, ["sglang"])])
    with capture_logs() as logs:
        source.open(follow=True)
        source.seek_head()
        assert _texts(source) == []
        c = DockerDir(root, CID, "sglang")
        c.line("hello")
        c.line("world")
        assert _read_until(source, 2) == ["hello", "world"]
    source.close()
    assert [(e["log_level"], e["directory"]) for e in _events(logs, "log_directory_missing")] == [
        ("info", str(root / "containers"))
    ]


def _config(tmp_path: Path) -> Config:
    (tmp_path / "journal").mkdir()
    return Config(
        units=(),
        containers=("sglang",),
        docker_root=tmp_path / "docker",
        journal=JournalConfig(directory=tmp_path / "journal"),
        state_dir=tmp_path / "state",
    )


def test_the_daemon_records_a_json_file_startup_of_docker_installed_after_it(
    tmp_path: Path,
) -> None:
    """The daemon's pipeline on a host with no Docker yet reads the journal and watches for
    Docker's containers directory; a container's startup written there after is recorded.
    Before: the source was the journal's alone (no containers directory at start), and the
    startup was never read until the daemon was restarted."""
    config = _config(tmp_path)
    assert isinstance(build_source(config), JournalSource)  # one pass: nothing to wait for
    pipeline = build_pipeline(config)
    assert isinstance(pipeline.source, CombinedSource)
    pipeline.source.open()
    pipeline.resume(from_boot_start=False)
    assert pipeline.process() == 0
    c = DockerDir(config.docker_root, CID, "sglang", Clock())
    sglang_start(c.line, "2026-01-01", 128)
    deadline = time.monotonic() + WAIT_S
    n = 0
    while n < 3 and time.monotonic() < deadline:
        poller = select.poll()
        poller.register(pipeline.source.fileno(), select.POLLIN)
        poller.poll(max(1, int((deadline - time.monotonic()) * 1000)))
        pipeline.source.acknowledge_changes()
        n += pipeline.process()
    pipeline.commit(force=True)
    got = [
        (r.unit, r.outcome, r.facts.get("max_running_requests"))
        for r in pipeline.store.startups(("docker:sglang",))
    ]
    pipeline.source.close()
    pipeline.store.close()
    assert n == 3
    assert got == [("docker:sglang", "ready", 128)]


def test_a_scan_of_a_pod_log_directory_not_there_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One pass has nothing to wait for: a missing --pod-logs is a one-line error, exit 2."""
    (tmp_path / "journal").mkdir()
    code = main(
        [
            "scan",
            "--state-dir",
            str(tmp_path / "state"),
            "--pod",
            "llm/sglang-0",
            "--pod-logs",
            str(tmp_path / "nope"),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert f"log directory {tmp_path / 'nope'} does not exist" in err
    assert len(err.strip().splitlines()) == 1, err
