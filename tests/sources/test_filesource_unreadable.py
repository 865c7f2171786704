"""A layout's directory this user cannot list (Docker's root is root:root 0710, the shipped
unit runs as a dynamic user): the file source says so once at open instead of finding nothing
silently, and the rest of the sources keep working."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from sglang_sentinel.config.schema import Config, JournalConfig
from sglang_sentinel.pipeline import build_source
from sglang_sentinel.sources import CombinedSource, DockerLayout, FileSource

NOBODY = 65534


@contextlib.contextmanager
def files_as_nobody() -> Iterator[None]:
    """This thread's file access checked as nobody:nogroup (setfsuid(2): leaving fsuid 0 drops
    the file capabilities from the effective set until it is set back)."""
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("needs root (setfsuid) and CI runs as root")
        pytest.skip("needs root (setfsuid)")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setfsgid(NOBODY)
    libc.setfsuid(NOBODY)
    try:
        yield
    finally:
        libc.setfsuid(0)
        libc.setfsgid(0)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory any user may pass through (pytest's tmp_path is behind a 0700 one)."""
    top = Path(tempfile.mkdtemp(prefix="sentinel-unreadable-", dir="/var/tmp"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top)


def test_an_unlistable_docker_root_is_logged_once_at_open(open_dir: Path) -> None:
    root = open_dir / "docker"
    (root / "containers").mkdir(parents=True)
    root.chmod(0o710)  # as dockerd makes it
    source = FileSource([DockerLayout(root, ["sglang"])])
    with capture_logs() as logs, files_as_nobody():
        source.open(follow=False)
        source.seek_head()
        assert list(source.lines()) == []
    source.close()
    unreadable = [e for e in logs if e["event"] == "log_directory_unreadable"]
    assert unreadable == [
        {
            "event": "log_directory_unreadable",
            "log_level": "warning",
            "directory": str(root),
            "error": "Permission denied",
            "hint": "its files are not read; on a Docker host install the drop-in "
            "deploy/dropins/docker-host.conf (README, Containers)",
        }
    ]


def test_a_listable_docker_root_logs_nothing(open_dir: Path) -> None:
    root = open_dir / "docker"
    (root / "containers").mkdir(parents=True)
    source = FileSource([DockerLayout(root, ["sglang"])])
    with capture_logs() as logs, files_as_nobody():
        source.open(follow=False)
    source.close()
    assert [e["event"] for e in logs] == []


def test_a_docker_root_it_cannot_search_is_set_up_and_warned_not_a_crash(open_dir: Path) -> None:
    """The shipped unit on a Docker host naming a container: stat() of root/containers is
    EACCES for it. The source is built (journal and files) and opened; it said so once."""
    root = open_dir / "docker"
    (root / "containers").mkdir(parents=True)
    root.chmod(0o710)
    (open_dir / "journal").mkdir()
    config = Config(
        units=(),
        containers=("sglang",),
        docker_root=root,
        journal=JournalConfig(directory=open_dir / "journal"),
        state_dir=open_dir / "state",
    )
    with capture_logs() as logs, files_as_nobody():
        source = build_source(config)
        source.open(follow=False)
        source.close()
    assert isinstance(source, CombinedSource)
    assert [(e["event"], e["directory"]) for e in logs] == [("log_directory_unreadable", str(root))]
