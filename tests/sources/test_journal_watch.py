"""Watching costs inotify instances (a per-user limit, 128 by default): only a source that
follows the journal takes them, and running out of them is named, not an internal error."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from sglang_sentinel.errors import JournalError
from sglang_sentinel.sources import JournalSource
from sglang_sentinel.sources.journal import _watch


def inotify_fds() -> int:
    fds = Path("/proc/self/fd")
    count = 0
    for fd in fds.iterdir():
        try:
            count += os.readlink(fd) == "anon_inode:inotify"
        except OSError:
            continue  # the directory's own fd, gone by now
    return count


@pytest.mark.parametrize(("follow", "taken"), [(False, 0), (True, 3)])
def test_only_a_following_source_takes_inotify_instances(
    seed_journal_dir: Path, follow: bool, taken: int
) -> None:
    before = inotify_fds()
    source = JournalSource(["sglang-qwen.service"], directory=seed_journal_dir)
    source.open(follow=follow)
    try:
        source.seek_head()
        assert sum(1 for _ in source.lines()) > 0
        assert inotify_fds() - before == taken
    finally:
        source.close()


class _Exhausted:
    def fileno(self) -> int:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))


def test_running_out_of_inotify_instances_is_named() -> None:
    with pytest.raises(JournalError, match=r"max_user_instances"):
        _watch(_Exhausted())
